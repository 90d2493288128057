"""The code version a result records: `git describe`, `-dirty` for uncommitted code but not for the benchmarks'
results written into the checkout (a benchmark run after another recorded the first one's JSON as dirty code)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gradswitch.version import git_describe


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / "gradswitch").mkdir()
    (tmp_path / "gradswitch" / "model.py").write_text("X = 1\n")
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "a.json").write_text("{}\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return tmp_path


def test_a_clean_checkout_is_its_commit(checkout: Path) -> None:
    described = git_describe(checkout / "gradswitch")
    assert described is not None and not described.endswith("-dirty")


def test_a_changed_result_is_not_dirty_code(checkout: Path) -> None:
    (checkout / "bench" / "results" / "a.json").write_text('{"format": 1}\n')
    described = git_describe(checkout / "gradswitch")
    assert described is not None and not described.endswith("-dirty")


def test_changed_code_is_dirty_wherever_it_is(checkout: Path) -> None:
    (checkout / "bench" / "results" / "a.json").write_text('{"format": 1}\n')
    (checkout / "gradswitch" / "model.py").write_text("X = 2\n")
    assert (git_describe(checkout / "gradswitch") or "").endswith("-dirty")
    assert (git_describe(checkout / "bench") or "").endswith("-dirty")  # asked from elsewhere in the checkout


def test_outside_a_checkout_there_is_no_description(tmp_path: Path) -> None:
    assert git_describe(tmp_path) is None
