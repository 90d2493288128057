"""Choosing the BMv2 build: one resolver (gradswitch.net.bmv2.resolve_bmv2) for --bmv2, $GRADSWITCH_BMV2 and PATH.

Stand-in executables (shell scripts answering --help and --version like simple_switch_grpc)
check the resolver's logic anywhere; tests/bmv2/test_bmv2_builds.py checks the real builds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gradswitch.cli.main import main
from gradswitch.net.bmv2 import BMV2_ENV, Bmv2Config, resolve_bmv2
from gradswitch.net.bmv2_executable import Bmv2BuildError

HELP = "Usage: SWITCH_NAME [options] <path to JSON config file>\\n  --grpc-server-addr arg  Bind gRPC server"


def fake_switch(prefix: Path, logging: bool, name: str = "simple_switch_grpc") -> Path:
    """PREFIX/bin/NAME answering like BMv2, with or without a per-packet log format string in it."""
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "lib" / "libbmpi.so.0").write_bytes(b"")
    marker = "# Processing packet received on port {}\n" if logging else ""
    path = prefix / "bin" / name
    path.write_text(f'#!/bin/sh\n{marker}[ "$1" = --version ] && echo 1.15.5-test && exit 0\nprintf "{HELP}\\n"\n')
    path.chmod(0o755)
    return path


def unset_bmv2_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No $GRADSWITCH_BMV2 during the test, and none after it whatever the code under test set
    (`delenv` of an unset variable records nothing to undo, so use_bmv2's value outlived the test)."""
    monkeypatch.setenv(BMV2_ENV, "")
    monkeypatch.delenv(BMV2_ENV)


def test_a_file_a_prefix_or_its_bin_directory(tmp_path, monkeypatch):
    path = fake_switch(tmp_path / "nolog", logging=False)
    for given in (path, tmp_path / "nolog", tmp_path / "nolog" / "bin"):
        build = resolve_bmv2(str(given))
        assert (build.executable, build.version, build.logging) == (path, "1.15.5-test", False)
        assert build.lib_dir == tmp_path / "nolog" / "lib"
        assert build.env({"LD_LIBRARY_PATH": "/x"})["LD_LIBRARY_PATH"] == f"{tmp_path / 'nolog' / 'lib'}:/x"
    monkeypatch.setenv(BMV2_ENV, str(tmp_path / "nolog"))
    assert resolve_bmv2().executable == path
    assert resolve_bmv2().chosen_by == BMV2_ENV
    assert Bmv2Config("s1", 0, 1, 2, {}, tmp_path).executable == str(path)  # where every switch gets it


def test_logging_is_read_from_the_build(tmp_path):
    assert resolve_bmv2(str(fake_switch(tmp_path / "log", logging=True))).logging is True


@pytest.mark.parametrize(("given", "message"), [
    ("missing", "{given}: {given} does not exist"),
    ("empty-dir", "{given}: no simple_switch_grpc in {given} or {given}/bin"),
    ("not-bmv2", "is not a BMv2 simple_switch_grpc (its --help shows no --grpc-server-addr"),
    ("not-executable", "is not executable"),
])
def test_a_wrong_path_is_one_line_naming_it(tmp_path, monkeypatch, given, message):
    target = tmp_path / given
    if given == "empty-dir":
        target.mkdir()
    elif given == "not-bmv2":
        target.write_text("#!/bin/sh\necho usage: something else\n")
        target.chmod(0o755)
    elif given == "not-executable":
        target.write_text("data")
    with pytest.raises(Bmv2BuildError) as err:
        resolve_bmv2(str(target))
    text = str(err.value)
    assert text.startswith(f"--bmv2 {target}: ") and message.format(given=target) in text and "\n" not in text
    monkeypatch.setenv(BMV2_ENV, str(target))
    with pytest.raises(Bmv2BuildError, match=f"^{BMV2_ENV}={target}: "):
        resolve_bmv2()


def test_the_command_line_reports_it_before_anything_starts(tmp_path, capsys, monkeypatch):
    unset_bmv2_env(monkeypatch)
    assert main(["--bmv2", str(tmp_path / "nope"), "net", "--topo", "rack", "--hosts", "2"]) == 2
    assert capsys.readouterr().err == f"error: --bmv2 {tmp_path / 'nope'}: {tmp_path / 'nope'} does not exist\n"
    monkeypatch.setenv(BMV2_ENV, str(tmp_path / "nope"))
    assert main(["net", "--topo", "rack", "--hosts", "2"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {BMV2_ENV}={tmp_path / 'nope'}: ")


def test_the_option_sets_the_one_setting(tmp_path, monkeypatch):
    from gradswitch.net.bmv2 import use_bmv2

    unset_bmv2_env(monkeypatch)
    path = fake_switch(tmp_path / "b", logging=False)
    use_bmv2(str(tmp_path / "b"))
    assert os.environ[BMV2_ENV] == str(path)


def test_one_port_for_grpc_and_thrift_is_refused_before_anything_starts(tmp_path):
    """BMv2 would start, fail the second bind, and never listen: a 30 s timeout instead of a line."""
    with pytest.raises(ValueError, match=r"^trace: gRPC and Thrift ports are both 59195; give the switch two"):
        Bmv2Config("trace", 0, 59195, 59195, {1: "p1"}, tmp_path)
    Bmv2Config("trace", 0, 59195, 59196, {1: "p1"}, tmp_path)  # two ports: fine
