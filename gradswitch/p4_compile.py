"""Compiling the switch program with p4c-bm2-ss (warnings are errors)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from protocol.paths import BMV2_JSON, P4_PROGRAM, P4INFO, REPO_ROOT

P4C = "p4c-bm2-ss"


class BuildError(RuntimeError):
    """p4c is missing or refused the program; carries its output."""


@dataclass(frozen=True)
class BuildResult:
    json: Path
    p4info: Path
    output: str


def compile_program(program: Path = P4_PROGRAM, json_out: Path = BMV2_JSON, p4info_out: Path = P4INFO) -> BuildResult:
    """Compile a v1model program to BMv2 JSON and P4Info text; any warning fails the build."""
    if shutil.which(P4C) is None:
        raise BuildError(f"{P4C} is not on PATH (see `gradswitch doctor`)")
    json_out.parent.mkdir(parents=True, exist_ok=True)
    # Compiled from the repository root with a relative source path, so the JSON's source
    # references are the same on every machine (the freshness test compares the files).
    source = program.resolve().relative_to(REPO_ROOT) if program.resolve().is_relative_to(REPO_ROOT) else program
    cmd = [P4C, "--arch", "v1model", "--std", "p4-16", "--Werror",
           "--p4runtime-files", str(p4info_out.resolve()), "-o", str(json_out.resolve()), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise BuildError(f"{P4C} failed ({proc.returncode}):\n{output}")
    if "warning" in output.lower():
        raise BuildError(f"{P4C} printed warnings (treated as errors):\n{output}")
    return BuildResult(json_out, p4info_out, output)
