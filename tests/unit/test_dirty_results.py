"""docs/performance.md names every result file recorded from uncommitted code (its code_version ends in -dirty),
and none other: a new one written from a dirty checkout fails here until it is listed there, or run again from a
clean one."""

from __future__ import annotations

import re

from gradswitch.protocol.paths import REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "results"
DOC = REPO_ROOT / "docs" / "performance.md"


def dirty_results() -> dict[str, str]:
    """Each result file whose recorded code_version (anywhere in it) is a dirty checkout's: its name and version."""
    found: dict[str, str] = {}
    for path in sorted(RESULTS.glob("*.json")):
        versions = set(re.findall(r'"code_version":\s*"([^"]*)"', path.read_text()))
        dirty = sorted(v for v in versions if v.endswith("-dirty"))
        if dirty:
            found[path.name] = dirty[0]
    return found


def listed() -> dict[str, str]:
    text = DOC.read_text()
    table = text[text.index("<!-- dirty results -->"):].split("\n\n")[0]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| (\S+\.json) \| (\S+) \|$", table, re.M)}


def test_every_dirty_result_is_listed_and_only_those():
    assert listed() == dirty_results()


def test_the_check_sees_a_dirty_file(tmp_path, monkeypatch):
    (tmp_path / "new.json").write_text('{"code_version": "0.1.0+abc1234-dirty"}')
    (tmp_path / "clean.json").write_text('{"code_version": "0.1.0+abc1234"}')
    monkeypatch.setattr(__name__ + ".RESULTS", tmp_path)
    assert dirty_results() == {"new.json": "0.1.0+abc1234-dirty"}
