"""Where the project's files are: the P4 sources and compiled program, the folders shipped as package data, run
directories.

The folders the project ships beside its code are real folders of the package (gradswitch/p4src/, gradswitch/specs/,
gradswitch/sim/ns3/, gradswitch/workload/models/), so setuptools ships them as package data (pyproject.toml's
package-data) and `package_folder` finds them through importlib.resources the same way in a checkout and in an
installed wheel.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


class PackageDataError(FileNotFoundError):
    """A folder the project ships is missing from the installed package: says which and what to do."""


def package_folder(package: str, name: str) -> Path:
    """The folder `name` of package `package`'s data (in a checkout or in the installed wheel).

    The package is imported by name (importlib.resources), so a low floor may look up a high floor's data without
    importing its code."""
    folder = files(package) / name
    if not isinstance(folder, Path) or not folder.is_dir():
        raise PackageDataError(f"{package}/{name}: not a folder of the installed package ({folder}); reinstall "
                               "gradswitch (pip install --force-reinstall gradswitch) or run it from a checkout")
    return folder.resolve()


PACKAGES_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the package: a checkout or site-packages
# The git checkout the code runs from (tests, bench, `make`), or None for an installed wheel.
CHECKOUT: Path | None = PACKAGES_ROOT if (PACKAGES_ROOT / "pyproject.toml").is_file() else None
REPO_ROOT = PACKAGES_ROOT  # what tests and benchmarks, which run from a checkout, call it

P4SRC = package_folder("gradswitch", "p4src")
P4_PROGRAM = P4SRC / "gradswitch.p4"
P4_CONFIG = P4SRC / "include" / "config.p4"
P4_BUILD = P4SRC / "build"
BMV2_JSON = P4_BUILD / "gradswitch.json"
P4INFO = P4_BUILD / "gradswitch.p4info.txtpb"
P4_STAMP = P4_BUILD / "p4c-stamp.json"  # the compiler's version and the hashes of the sources it compiled


def user_cache_dir() -> Path:
    """Where gradswitch keeps what it builds for a user ($XDG_CACHE_HOME/gradswitch, default ~/.cache/gradswitch)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gradswitch"


def runtime_dir() -> Path:
    """Directory for logs, pcaps and the control socket of running networks.

    GRADSWITCH_RUNTIME_DIR overrides it; the default is /tmp/gradswitch (switch logs
    and pcaps must be on a local file system the root-owned BMv2 processes can write).
    """
    path = Path(os.environ.get("GRADSWITCH_RUNTIME_DIR", "/tmp/gradswitch"))
    path.mkdir(parents=True, exist_ok=True)
    return path
