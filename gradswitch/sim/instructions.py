"""Counting the simulator's user-space instructions: a cost that the machine's load does not move.

CPU seconds of one simulator run move by 20 % and more on a machine shared with other work (caches, frequency,
hyper-threads); the number of instructions the process executes in user space does not. `simulate` (run.py) starts
gradswitch-sim under a counter when the environment names one in `GRADSWITCH_SIM_INSTRUCTIONS`:

- `perf`: `perf stat -x, -e instructions:u` (Debian's linux-perf): the processor's own counter, at no cost to the
  run; needs hardware performance counters (a virtual machine without a PMU has none: the count is then null and
  says so).
- `callgrind`: valgrind's callgrind, which counts every instruction it executes (its `Ir`) in software, on any
  machine, exactly and repeatably, at 20-100x the run's time; its profile file (callgrind.out) stays beside the
  count, for `callgrind_annotate` (instructions per function).

The count is written to the run's folder as sim-instructions.json (`format`, the counter, the count or null and
why). Unset (the default), nothing is counted and no file is written. Under mpirun (more than one rank) nothing is
counted: the file says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from gradswitch.formats import check_format
from gradswitch.protocol.choice import Choice

ENV = "GRADSWITCH_SIM_INSTRUCTIONS"
FILE = "sim-instructions.json"
FORMAT = 1
PERF_FILE = "perf-stat.csv"
CALLGRIND_FILE = "callgrind.out"
VALGRIND_LOG = "valgrind.log"


class Counter(Choice):
    """How the simulator's user-space instructions are counted."""

    PERF = "perf"  # the processor's counter (perf stat): free, needs hardware counters
    CALLGRIND = "callgrind"  # valgrind's: in software, anywhere, 20-100x slower


class CounterError(ValueError):
    """GRADSWITCH_SIM_INSTRUCTIONS names no counter: says which there are."""


@dataclass(frozen=True)
class InstructionCount:
    """What a run's counter counted: `instructions` (user space, the simulator's process), or None and `why`."""

    counter: Counter
    instructions: int | None
    why: str | None = None  # why there is no count

    def to_dict(self) -> dict[str, object]:
        return {"format": FORMAT, "counter": self.counter.value, "instructions": self.instructions, "why": self.why}


def counter_from_env() -> Counter | None:
    """The counter GRADSWITCH_SIM_INSTRUCTIONS names (unset or empty: None)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    try:
        return Counter(value)
    except ValueError:
        raise CounterError(f"{ENV}={value!r}: give one of {', '.join(Counter.names())} "
                           "(or leave it unset to count nothing)") from None


def missing_tool(counter: Counter) -> str | None:
    """Why the counter cannot run here (its tool is not on PATH), or None."""
    tool = {Counter.PERF: "perf", Counter.CALLGRIND: "valgrind"}[counter]
    if shutil.which(tool) is None:
        package = {Counter.PERF: "linux-perf", Counter.CALLGRIND: "valgrind"}[counter]
        return f"{tool} is not on PATH (install Debian's {package})"
    return None


def launcher(counter: Counter, out_dir: Path) -> list[str]:
    """The command that runs the simulator's command (appended to it) under the counter."""
    if counter is Counter.PERF:
        return ["perf", "stat", "-x", ",", "-e", "instructions:u", "-o", str(out_dir / PERF_FILE), "--"]
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir / CALLGRIND_FILE}",
            f"--log-file={out_dir / VALGRIND_LOG}"]


def counted(counter: Counter, out_dir: Path) -> InstructionCount:
    """The count a finished run under `launcher(counter, out_dir)` left in out_dir."""
    if counter is Counter.PERF:
        return perf_count(out_dir / PERF_FILE)
    return callgrind_count(out_dir / CALLGRIND_FILE)


def perf_count(path: Path) -> InstructionCount:
    """perf stat's CSV line of instructions:u (`<count>,<unit>,instructions:u,...`)."""
    try:
        text = path.read_text()
    except OSError as e:
        return InstructionCount(Counter.PERF, None, f"perf stat wrote no {path.name} ({e.strerror})")
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("instructions"):
            if fields[0].isdigit():
                return InstructionCount(Counter.PERF, int(fields[0]))
            return InstructionCount(Counter.PERF, None, f"perf stat: instructions:u {fields[0]} on this machine "
                                    "(no hardware performance counters: a virtual machine without a PMU); "
                                    f"count with {ENV}=callgrind")
    return InstructionCount(Counter.PERF, None, f"perf stat wrote no instructions:u line in {path.name}")


def callgrind_count(path: Path) -> InstructionCount:
    """callgrind's total of executed instructions: the `summary:` line of its profile, summed over the parts a
    dump during the run (`callgrind_control -d`) split it into (path.1, path.2, ...; the last part is path)."""
    parts = [path, *(p for p in path.parent.glob(f"{path.name}.*") if p.suffix[1:].isdigit())]
    total = 0
    for part in parts:
        try:
            text = part.read_text()
        except OSError as e:
            return InstructionCount(Counter.CALLGRIND, None, f"callgrind wrote no {part.name} ({e.strerror})")
        found = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if found is None:
            return InstructionCount(Counter.CALLGRIND, None, f"no summary line in {part.name}")
        total += int(found.group(1))
    return InstructionCount(Counter.CALLGRIND, total)


def write(out_dir: Path, count: InstructionCount) -> None:
    (out_dir / FILE).write_text(json.dumps(count.to_dict(), indent=1))


def read(out_dir: Path) -> InstructionCount | None:
    """The count a run left in out_dir (None: it was not counted)."""
    path = out_dir / FILE
    if not path.exists():
        return None
    raw = check_format(json.loads(path.read_text()), path, "simulator's instruction count", FORMAT)
    instructions = raw["instructions"]
    return InstructionCount(Counter(raw["counter"]), int(instructions) if instructions is not None else None,
                            raw.get("why"))
