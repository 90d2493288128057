"""Compiling the switch program with p4c-bm2-ss (warnings are errors), and the stamp beside the compiled program.

`gradswitch build` compiles gradswitch/p4src/gradswitch.p4 into gradswitch/p4src/build/ and writes
gradswitch/p4src/build/p4c-stamp.json: the compiler's version and the SHA-256 of the P4 sources and of the two outputs.
`gradswitch doctor` checks the committed (or shipped) program against it; the freshness test compares a fresh compile
only with the same p4c.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from gradswitch.protocol.paths import BMV2_JSON, CHECKOUT, P4_PROGRAM, P4_STAMP, P4INFO, P4SRC

P4C = "p4c-bm2-ss"
STAMP_FORMAT = 1


class BuildError(RuntimeError):
    """p4c is missing or refused the program; carries its output."""


@dataclass(frozen=True)
class BuildResult:
    json: Path
    p4info: Path
    output: str


@dataclass(frozen=True)
class BuildStamp:
    """What the compiled program was compiled from and with (gradswitch/p4src/build/p4c-stamp.json)."""

    format: int
    p4c_version: str
    sources_sha256: str  # every gradswitch/p4src/**/*.p4: their paths and contents (sources_digest)
    json_sha256: str
    p4info_sha256: str

    def write(self, path: Path = P4_STAMP) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def read(cls, path: Path = P4_STAMP) -> BuildStamp:
        """The stamp at path (BuildError: missing, unreadable or of another format, naming the file)."""
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise BuildError(f"{path}: no build stamp to read ({e}): run `gradswitch build`") from None
        if not isinstance(raw, dict) or raw.get("format") != STAMP_FORMAT or set(raw) != set(cls.__dataclass_fields__):
            raise BuildError(f"{path}: not a build stamp of format {STAMP_FORMAT}: run `gradswitch build`")
        return cls(**raw)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sources_digest(root: Path = P4SRC) -> str:
    """SHA-256 over every .p4 file under root but build/: its path relative to root, then its bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*.p4") if "build" not in p.relative_to(root).parts[:1]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def p4c_version() -> str | None:
    """p4c-bm2-ss's version ("1.2.4.9"), or None when it is not on PATH."""
    path = shutil.which(P4C)
    if path is None:
        return None
    proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    match = re.search(r"\d+\.\d+[\w.\-+~]*", proc.stdout + proc.stderr)
    return match.group(0) if match else (proc.stdout + proc.stderr).strip()


def stale_reasons(stamp_path: Path = P4_STAMP, json_path: Path = BMV2_JSON, p4info_path: Path = P4INFO,
                  root: Path = P4SRC) -> list[str]:
    """Why the compiled program is not what its stamp says p4c made of the current sources ([]: it is current)."""
    missing = [str(p) for p in (json_path, p4info_path) if not p.is_file()]
    if missing:
        return [f"{', '.join(missing)} missing: run `gradswitch build`"]
    try:
        stamp = BuildStamp.read(stamp_path)
    except BuildError as e:
        return [str(e)]
    reasons = []
    if stamp.sources_sha256 != sources_digest(root):
        reasons.append(f"the P4 sources under {root} changed since {json_path.name} was compiled: run `gradswitch "
                       "build`")
    for path, recorded in ((json_path, stamp.json_sha256), (p4info_path, stamp.p4info_sha256)):
        if _sha256(path) != recorded:
            reasons.append(f"{path} is not the file p4c wrote (its stamp {stamp_path.name} records another): run "
                           "`gradswitch build`")
    return reasons


def compile_program(program: Path = P4_PROGRAM, json_out: Path = BMV2_JSON, p4info_out: Path = P4INFO) -> BuildResult:
    """Compile a v1model program to BMv2 JSON and P4Info text; any warning fails the build."""
    if shutil.which(P4C) is None:
        raise BuildError(f"{P4C} is not on PATH (see `gradswitch doctor`)")
    json_out.parent.mkdir(parents=True, exist_ok=True)
    # Compiled from the folder above gradswitch/p4src/ with a relative source path, so the JSON's source
    # references are the same on every machine (the freshness test compares the files).
    base = P4SRC.parent
    source = program.resolve().relative_to(base) if program.resolve().is_relative_to(base) else program
    cmd = [P4C, "--arch", "v1model", "--std", "p4-16", "--Werror",
           "--p4runtime-files", str(p4info_out.resolve()), "-o", str(json_out.resolve()), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=base)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise BuildError(f"{P4C} failed ({proc.returncode}):\n{output}")
    if "warning" in output.lower():
        raise BuildError(f"{P4C} printed warnings (treated as errors):\n{output}")
    return BuildResult(json_out, p4info_out, output)


def build_program() -> BuildResult:
    """`gradswitch build`: compile gradswitch/p4src/gradswitch.p4 into gradswitch/p4src/build/ and stamp it; a
    checkout's only (an installed package's compiled program ships with it, and site-packages is no place to write)."""
    if CHECKOUT is None:
        raise BuildError(f"{P4SRC} belongs to the installed package, whose compiled program ships with it (see "
                         "`gradswitch doctor`): to change the P4 program, build in a checkout (git clone, then "
                         "pip install -e .)")
    version = p4c_version()
    result = compile_program()
    BuildStamp(STAMP_FORMAT, version or "unknown", sources_digest(), _sha256(result.json),
               _sha256(result.p4info)).write()
    return result
