"""The simulator's build: the ns-3 wheel as a C++ SDK, CMake, the `gradswitch-sim` binary.

`make sim` (or `python -m gradswitch.sim.build`) installs the PyPI wheel `ns3==3.44.post0` into the running
interpreter's environment when it is missing (`pip install --no-deps`: with its dependencies pip builds
cppyy from source for minutes), configures gradswitch/sim/ns3 with CMake against it and builds
build/ns3/gradswitch-sim, and in a checkout beside it build/ns3/gs-qp-script (the transport's conformance
driver of the tests, tests/ns3/qp_script.py, from tests/ns3/gs-qp-script/: not shipped). `--mpi` builds
build/ns3-mpi/gradswitch-sim against ns-3 built with MPI
(/opt/ns3-mpi: the same sources with NS3_MPI). Nothing built is committed.

An installed gradswitch (no checkout) builds from the sources it ships (the package's sim/ns3 folder) into
a per-user cache, $XDG_CACHE_HOME/gradswitch/ns3-<hash of the sources> (ns3-mpi-<hash>), on first use
(`ensure_built`), needing the ns3 wheel (`pip install --no-deps ns3==3.44.post0`), cmake and g++.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gradswitch.protocol.paths import CHECKOUT, P4_CONFIG, package_folder, user_cache_dir

WHEEL = "ns3==3.44.post0"
SOURCES = package_folder("gradswitch.sim", "ns3")  # the C++ models and gradswitch-sim: package data of the wheel
# The test harness beside them in a checkout (one requester and one responder QP over a scripted wire): built only
# there, into the same build, for tests/ns3/test_transport_conformance.py.
QP_SCRIPT_SOURCES: Path | None = CHECKOUT / "tests" / "ns3" / "gs-qp-script" if CHECKOUT is not None else None
MPI_PREFIX = Path("/opt/ns3-mpi")
BINARY_NAME = "gradswitch-sim"
QP_SCRIPT_NAME = "gs-qp-script"  # one requester QP and one responder QP over a scripted wire (tests/ns3/qp_script.py)
CONFIG_P4 = P4_CONFIG
NLOHMANN_JSON = Path("/usr/include/nlohmann/json.hpp")  # the JSON library the simulator reads and writes with


class BuildError(RuntimeError):
    """The simulator cannot be built or is not built: says what to do."""


def wheel_prefix() -> Path | None:
    """The installed ns3 wheel's directory (include/ns3, lib64), or None."""
    spec = importlib.util.find_spec("ns3")
    if spec is None or spec.submodule_search_locations is None:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location)
        if (path / "include" / "ns3" / "core-module.h").exists():
            return path
    return None


def sources() -> list[Path]:
    """Every file the binary is built from (the models, the program, CMake, config.p4)."""
    files = [p for p in SOURCES.rglob("*") if p.is_file() and p.suffix in (".h", ".cc", ".txt")]
    return sorted(files) + [CONFIG_P4]


@cache
def sources_digest() -> str:
    """SHA-256 over the sources' paths and contents: the name of an installed package's build in the cache."""
    digest = hashlib.sha256()
    for path in sources():
        name = path.name if path == CONFIG_P4 else path.relative_to(SOURCES).as_posix()
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def build_dir(mpi: bool = False) -> Path:
    """build/ns3 (build/ns3-mpi) of a checkout; for an installed package the user's cache, one folder per version of
    the sources (nothing is ever written into site-packages)."""
    name = "ns3-mpi" if mpi else "ns3"
    if CHECKOUT is not None:
        return CHECKOUT / "build" / name
    return user_cache_dir() / f"{name}-{sources_digest()[:16]}"


def binary(mpi: bool = False) -> Path:
    return build_dir(mpi) / BINARY_NAME


def qp_script_binary() -> Path:
    return build_dir() / QP_SCRIPT_NAME


@dataclass(frozen=True)
class Status:
    wheel: Path | None
    binary: Path
    built: bool
    stale: list[Path]  # sources newer than the binary
    mpi: bool = False  # the MPI build (build/ns3-mpi)
    absent: Path | None = None  # the program not built (gradswitch-sim, or gs-qp-script beside it)

    def missing(self) -> str | None:
        """Why the simulator cannot run now (None: it can, or an installed package can build it on first use)."""
        if CHECKOUT is None and not self.built:
            return cannot_build(self.mpi)
        how = "python -m gradswitch.sim.build --mpi" if self.mpi else "make sim"
        if not self.built:
            where = "" if self.wheel or self.mpi else f" (the ns-3 wheel is not installed either: {WHEEL})"
            return f"{self.absent or self.binary} is not built{where}: run `{how}`"
        if self.stale:
            return f"{self.binary} is older than {self.stale[0]}: run `{how}`"
        return None


def status(mpi: bool = False) -> Status:
    path = binary(mpi)
    # A checkout's one-process build makes gs-qp-script beside gradswitch-sim: a build without it is not built either.
    programs = [path] if mpi or QP_SCRIPT_SOURCES is None else [path, qp_script_binary()]
    absent = [p for p in programs if not p.exists()]
    stale: list[Path] = []
    if not absent and CHECKOUT is not None:  # an installed package's build is named by its sources' hash: current
        mtime = min(p.stat().st_mtime for p in programs)
        stale = [p for p in sources() if p.stat().st_mtime > mtime]
    return Status(wheel_prefix(), path, not absent, stale, mpi, absent[0] if absent else None)


def install_wheel() -> Path:
    """pip install --no-deps the ns3 wheel into this interpreter's environment."""
    prefix = wheel_prefix()
    if prefix is not None:
        return prefix
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", WHEEL], check=True)
    importlib.invalidate_caches()
    prefix = wheel_prefix()
    if prefix is None:
        raise BuildError(f"pip installed {WHEEL} but no ns3/include/ns3/core-module.h is to be found")
    return prefix


def cannot_build(mpi: bool = False) -> str | None:
    """Why an installed package cannot build the simulator on first use (None: it can)."""
    if mpi and not (MPI_PREFIX / "include" / "ns3" / "mpi-interface.h").exists():
        return f"{MPI_PREFIX} has no ns-3 built with MPI: build ns-3 with --enable-mpi there (docs/simulator.md)"
    if not mpi and wheel_prefix() is None:
        return f"the ns-3 simulator needs the ns3 wheel: pip install --no-deps {WHEEL}"
    tools = [t for t in ("cmake", "g++") if shutil.which(t) is None]
    if not NLOHMANN_JSON.exists():
        tools.append(f"{NLOHMANN_JSON} (nlohmann-json3-dev)")
    if tools:
        return f"building the ns-3 simulator needs {', '.join(tools)}: apt install cmake g++ nlohmann-json3-dev"
    return None


def ensure_built(mpi: bool = False) -> Status:
    """The simulator's status, after building it into the user's cache where an installed package has not yet."""
    s = status(mpi)
    if s.built or CHECKOUT is not None or cannot_build(mpi) is not None:
        return s
    out = build_dir(mpi)
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / f"{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building the same sources: wait for it, then use its build
        if not status(mpi).built:
            print(f"building the ns-3 simulator from the shipped sources into {out} (first use; some minutes)",
                  file=sys.stderr, flush=True)
            try:
                build(mpi=mpi, prefix=None if not mpi else MPI_PREFIX, install=False)
            except (BuildError, subprocess.CalledProcessError) as e:
                raise BuildError(f"building the ns-3 simulator into {out} failed ({e}); the output is above") from None
    return status(mpi)


def build(mpi: bool = False, jobs: int = 2, prefix: Path | None = None, install: bool = True) -> Path:
    """Configure (once) and build the simulator; returns the binary. install: pip install the ns3 wheel if missing."""
    if shutil.which("cmake") is None:
        raise BuildError("cmake is not on PATH: install it (apt install cmake)")
    if not NLOHMANN_JSON.exists():
        raise BuildError("nlohmann/json.hpp is missing: install nlohmann-json3-dev (apt install nlohmann-json3-dev)")
    if mpi:
        prefix = prefix or MPI_PREFIX
        if not (prefix / "include" / "ns3" / "mpi-interface.h").exists():
            raise BuildError(f"{prefix} has no ns-3 built with MPI: build ns-3 3.44 with --enable-mpi and install it "
                             f"there (docs/simulator.md, vm/provision.sh)")
    elif prefix is None:
        prefix = install_wheel() if install else wheel_prefix()
        if prefix is None:
            raise BuildError(f"the ns-3 simulator needs the ns3 wheel: pip install --no-deps {WHEEL}")
    out = build_dir(mpi)
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = ["cmake", "-S", str(SOURCES), "-B", str(out), *generator, f"-DNS3_PREFIX={prefix}",
                 f"-DGS_P4_INCLUDE={CONFIG_P4.parent}", f"-DGS_MPI={'ON' if mpi else 'OFF'}",
                 "-DCMAKE_BUILD_TYPE=Release"]
    if QP_SCRIPT_SOURCES is not None and not mpi:
        configure.append(f"-DGS_QP_SCRIPT_DIR={QP_SCRIPT_SOURCES}")
    subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(out), "-j", str(jobs)], check=True, stdout=2)  # progress on stderr
    path = binary(mpi)
    if not path.exists():
        raise BuildError(f"the build finished without {path}")
    path.touch()  # newer than every source it was built from, even when nothing needed rebuilding
    if not mpi and qp_script_binary().exists():
        qp_script_binary().touch()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradswitch.sim.build", description=__doc__.splitlines()[0])
    parser.add_argument("--mpi", action="store_true", help=f"build against ns-3 with MPI ({MPI_PREFIX})")
    parser.add_argument("--prefix", type=Path, default=None,
                        help=f"where ns-3 is installed (default: the wheel; with --mpi {MPI_PREFIX})")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    args = parser.parse_args(argv)
    try:
        path = build(mpi=args.mpi, jobs=args.jobs, prefix=args.prefix)
    except (BuildError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
