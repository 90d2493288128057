"""Which code a run came from: the package's version and, in a git checkout, `git describe`."""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGE = "gradswitch"


def package_version() -> str:
    """The installed distribution's version ("0+unknown" when the code runs without being installed)."""
    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "0+unknown"


# What a checkout's results do not count as uncommitted code: the results the benchmarks write into it (a benchmark
# run after another would otherwise record the first one's JSON as a change to the code, "-dirty")
NOT_CODE = ("bench/results",)


def _git(here: Path, *args: str) -> str | None:
    """A git command's output in the checkout holding `here`; None where git or the checkout is not there."""
    try:
        out = subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@cache
def git_describe(where: Path | None = None) -> str | None:
    """`git describe --always --tags` of the checkout holding this code, with `-dirty` where a tracked file other than
    the benchmarks' results (NOT_CODE) has uncommitted changes; None outside a checkout."""
    here = where or Path(__file__).resolve().parent
    described = _git(here, "describe", "--always", "--tags")
    if not described:
        return None
    changed = _git(here, "status", "--porcelain", "--untracked-files=no", "--", ":(top)",
                   *(f":(top,exclude){p}" for p in NOT_CODE))
    return f"{described}-dirty" if changed is None or changed else described


def code_version() -> str:
    """What results record as the code that wrote them: "0.1.0" installed, "0.1.0+g1234abc" from a checkout."""
    described = git_describe()
    return f"{package_version()}+{described}" if described else package_version()
