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


@cache
def git_describe(where: Path | None = None) -> str | None:
    """`git describe --always --dirty --tags` of the checkout holding this code; None outside a checkout."""
    here = where or Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "describe", "--always", "--dirty", "--tags"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def code_version() -> str:
    """What results record as the code that wrote them: "0.1.0" installed, "0.1.0+g1234abc" from a checkout."""
    described = git_describe()
    return f"{package_version()}+{described}" if described else package_version()
