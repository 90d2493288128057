"""What one simple_switch_grpc executable is: its version, whether logging is compiled in, its libraries.

BMv2 built with logging macros (the default, and the p4lang packages) formats a log record
for every table hit, action and parser state even when `-L` hides it, and runs several times
slower than a build configured with `--disable-logging-macros --disable-elogger`. Figures
must say which build they come from, so every result records `Bmv2Build.describe()`.

Logging is detected without running the switch: a build with logging macros carries the
format strings of its per-packet log records ("Processing packet received on port {}",
"Table '{}': hit with handle {}"); a build without them has none, since the macros compile
to nothing. The strings are looked for in the executable and in the BMv2 libraries it loads
(resolved by `ldd` with the environment it runs in). tests/bmv2/test_bmv2_builds.py checks
this against what each build really logs at `-L trace` for one packet.

An install prefix's libraries go first: a build under PREFIX/bin runs with
LD_LIBRARY_PATH=PREFIX/lib. Without it, the logging-free BMv2 under /opt/p4/bmv2-nolog would
load the PI and Thrift glue of the build with logging (its RUNPATH lists /opt/p4/lib first).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

PIPELINE_LOG_MARKERS = (b"Processing packet received on port", b"hit with handle")
BMV2_LIBRARY = re.compile(r"^\s*(lib(?:bm|simpleswitch|runtimestubs)\S*)\s+=>\s+(\S+)")


class Bmv2BuildError(ValueError):
    """A path that is not a usable simple_switch_grpc (one line, naming it)."""


@dataclass(frozen=True)
class Bmv2Build:
    executable: Path  # absolute, symlinks resolved
    version: str
    logging: bool  # logging macros compiled in (slow per packet, whatever -L says)
    lib_dir: Path | None  # PREFIX/lib put first on LD_LIBRARY_PATH, when the build has one
    chosen_by: str  # "PATH" or "GRADSWITCH_BMV2" (which `gradswitch --bmv2` sets)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment to run it in (its own libraries first)."""
        env = dict(os.environ if base is None else base)
        if self.lib_dir is not None:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(self.lib_dir), env.get("LD_LIBRARY_PATH")) if p)
        return env

    def describe(self) -> dict[str, object]:
        """What results record: path, version, logging or not, how it was chosen."""
        return {"path": str(self.executable), "version": self.version, "logging_macros": self.logging,
                "lib_dir": str(self.lib_dir) if self.lib_dir else None, "chosen_by": self.chosen_by}

    def summary(self) -> str:
        kind = "with logging macros" if self.logging else "without logging macros"
        return f"{self.executable} {self.version}, {kind}"


def library_dir(executable: Path) -> Path | None:
    """PREFIX/lib of an executable installed as PREFIX/bin/simple_switch_grpc, when it holds BMv2 libraries."""
    lib = executable.parent.parent / "lib"
    if executable.parent.name == "bin" and any(lib.glob("libbm*.so*")):
        return lib
    return None


def loaded_libraries(executable: Path, env: dict[str, str]) -> dict[str, Path]:
    """The BMv2 libraries the dynamic loader picks for the executable in this environment (ldd)."""
    proc = subprocess.run(["ldd", str(executable)], capture_output=True, text=True, env=env, timeout=20, check=False)
    found = {}
    for line in proc.stdout.splitlines():
        if m := BMV2_LIBRARY.match(line):
            found[m.group(1)] = Path(m.group(2))
    return found


def has_pipeline_logging(files: list[Path]) -> bool:
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if any(marker in data for marker in PIPELINE_LOG_MARKERS):
            return True
    return False


@functools.lru_cache(maxsize=16)
def _probe(executable: Path, mtime_ns: int) -> Bmv2Build:
    lib_dir = library_dir(executable)
    build = Bmv2Build(executable, "", False, lib_dir, "")
    env = build.env()
    try:
        help_text = subprocess.run([str(executable), "--help"], capture_output=True, text=True, env=env,
                                   timeout=20, check=False)
        version = subprocess.run([str(executable), "--version"], capture_output=True, text=True, env=env,
                                 timeout=20, check=False)
    except OSError as e:
        raise Bmv2BuildError(f"{executable} does not run: {e.strerror}") from None
    if "--grpc-server-addr" not in help_text.stdout + help_text.stderr:
        first = (help_text.stdout + help_text.stderr).strip().splitlines()[:1] or ["nothing"]
        raise Bmv2BuildError(f"{executable} is not a BMv2 simple_switch_grpc (its --help shows no "
                             f"--grpc-server-addr; it printed: {first[0][:80]})")
    text = (version.stdout + version.stderr).strip()
    number = re.search(r"\d+\.\d+\.\d+[\w.\-+~]*", text)
    files = [executable, *loaded_libraries(executable, env).values()]
    return Bmv2Build(executable, number.group(0) if number else text[:40], has_pipeline_logging(files), lib_dir, "")


def probe(executable: Path, chosen_by: str) -> Bmv2Build:
    """Describe one executable (cached while the file does not change); Bmv2BuildError if it is not BMv2."""
    path = executable.resolve()
    if not path.is_file():
        raise Bmv2BuildError(f"{executable}: no such file")
    if not os.access(path, os.X_OK):
        raise Bmv2BuildError(f"{executable} is not executable")
    # The probe runs the executable (and reads its libraries) once per file; who chose it is not part of it.
    return dataclasses.replace(_probe(path, path.stat().st_mtime_ns), chosen_by=chosen_by)
