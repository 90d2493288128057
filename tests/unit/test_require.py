"""tests/require.py: a test skips for something missing only where no switch requires it; under the switch it
fails, naming what is missing and the switch."""

from __future__ import annotations

import pytest

from tests.require import SWITCHES, missing, need_tool


@pytest.mark.parametrize("what", sorted(SWITCHES))
def test_missing_skips_unless_its_switch_requires_it(monkeypatch, what):
    for switch in SWITCHES.values():
        monkeypatch.delenv(switch, raising=False)
    with pytest.raises(pytest.skip.Exception, match=rf"^\[{what}\] gone$"):
        missing(what, "gone")
    for other in SWITCHES:  # another switch does not require it
        monkeypatch.setenv(SWITCHES[other], "1" if other != what else "0")
    with pytest.raises(pytest.skip.Exception):
        missing(what, "gone")
    monkeypatch.setenv(SWITCHES[what], "1")
    with pytest.raises(pytest.fail.Exception, match=rf"^\[{what}\] required but missing \({SWITCHES[what]}=1\): gone$"):
        missing(what, "gone")


def test_pytest_require_toolchain_forces_it_and_a_label_names_the_marker(monkeypatch):
    monkeypatch.delenv("GRADSWITCH_REQUIRE_TOOLCHAIN", raising=False)
    with pytest.raises(pytest.fail.Exception, match=r"^\[p4c\] required but missing"):
        missing("toolchain", "p4c 1.2.5 here, the committed program is p4c 1.2.4.9's", forced=True, label="p4c")


def test_a_tool_not_on_path_is_missing_with_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("GRADSWITCH_REQUIRE_TOOLCHAIN", "1")
    with pytest.raises(pytest.fail.Exception, match=r"ruby is not on PATH \(apt install ruby\)"):
        need_tool("ruby", "apt install ruby")
    monkeypatch.setenv("GRADSWITCH_REQUIRE_TOOLCHAIN", "0")
    with pytest.raises(pytest.skip.Exception, match=r"^\[toolchain\] ruby is not on PATH"):
        need_tool("ruby", "apt install ruby")
    (tmp_path / "ruby").write_text("#!/bin/sh\n")
    (tmp_path / "ruby").chmod(0o755)
    assert need_tool("ruby", "apt install ruby") == str(tmp_path / "ruby")
