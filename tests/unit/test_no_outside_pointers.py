"""Nothing the project ships or documents points at what an outsider cannot see: no issue numbers of the
project's tracker ("issue 9") and no files outside the repository ("../shared/..."), in README.md, docs/,
or the code's comments, docstrings and help texts. Say what the thing is instead."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = re.compile(r"(\.(py|cc|h|p4|md|sh|toml|rb|txt|cfg)$|(^|/)(Makefile|Vagrantfile)$|^\.ci/|^vm/)")
ISSUE = re.compile(r"\bissues?\s*#?\s*\d+", re.IGNORECASE)
OUTSIDE = re.compile(r"\.\./" + "shared")
# The CI's scripts install the toolchain from a folder beside the checkout (CI infrastructure, not the
# project's), and test_ci checks that they do.
OUTSIDE_ALLOWED = {".ci/toolchain.sh", ".ci/run", "tests/unit/test_ci.py"}
THIS = "tests/unit/test_no_outside_pointers.py"  # its own examples


def files() -> list[str]:
    """The project's files: git's list in a checkout, else every file but build outputs and environments."""
    git = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    if git.returncode == 0:
        listed = git.stdout.splitlines()
    else:
        skip = {".git", ".venv", "build", "runs", "__pycache__", "node_modules"}
        listed = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                  if not skip & set(p.relative_to(ROOT).parts) and ".egg-info" not in str(p)]
    return sorted(p for p in listed if CHECKED.search(p) and (ROOT / p).is_file() and not (ROOT / p).is_symlink()
                  and not p.startswith("bench/results/"))


def offending(pattern: re.Pattern[str], allowed: set[str]) -> list[str]:
    hits = []
    for path in files():
        if path in allowed or path == THIS:
            continue
        for n, line in enumerate((ROOT / path).read_text(errors="replace").splitlines(), start=1):
            if pattern.search(line):
                hits.append(f"{path}:{n}: {line.strip()[:100]}")
    return hits


def test_the_check_sees_the_documents_and_the_code():
    checked = files()
    assert "README.md" in checked and "docs/architecture.md" in checked and "gradswitch/roce/qp.py" in checked


@pytest.mark.parametrize(("pattern", "allowed", "what"), [
    (ISSUE, set(), "an issue number an outsider cannot look up"),
    (OUTSIDE, OUTSIDE_ALLOWED, "a path outside the repository"),
], ids=["issue-numbers", "outside-paths"])
def test_nothing_points_where_an_outsider_cannot_follow(pattern, allowed, what):
    hits = offending(pattern, allowed)
    assert not hits, f"{what}; say what the thing is instead:\n" + "\n".join(hits)


def test_the_patterns_catch_what_they_are_for():
    assert ISSUE.search("(issue 18)") and ISSUE.search("Issue 9's burst") and ISSUE.search("issues #3")
    assert not ISSUE.search("an issue with the queue") and not ISSUE.search("tissue 4")
    assert OUTSIDE.search("run ../" + "shared/toolchain/install.sh")
