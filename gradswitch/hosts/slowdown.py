"""A slow worker (the slow-worker fault): its computation stretched by a factor, set at run time.

The runner (or a test) writes the factor of a node into its run directory, `RUN_DIR/slowdown-<node>`
(`write_slowdown`); the worker reads it once per iteration (`Slowdown.factor`: one `stat` of the file, a read only
when it changed) and stretches its computation by it: the emulated computation of a training loop
(gradswitch/hosts/iteration.py) takes factor x its time on the clock; a loop that computes for real (the digits model,
gradswitch/hosts/digits_job.py) waits (factor - 1) x what the computation took, with the transport running, after it
(`stretch`). No file: factor 1. A link cut is the network's (gradswitch/experiment/testbed.py `Testbed.set_link_rate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gradswitch.hosts.whole_file import write_whole

if TYPE_CHECKING:
    from gradswitch.hosts.comm import Comm


class SlowdownError(ValueError):
    """A factor a worker cannot run with (one line naming it and what is allowed)."""


def slowdown_path(run_dir: Path, node_id: int) -> Path:
    return run_dir / f"slowdown-{node_id}"


def check_factor(factor: float) -> float:
    if not (math.isfinite(factor) and factor >= 1):
        raise SlowdownError(f"slowdown factor {factor}: a worker's computation takes at least 1 times as long "
                            "(give a finite factor >= 1)")
    return float(factor)


def run_dir_of(comm: Comm) -> Path | None:
    """The run directory a worker process was started in (where its abort file lives), None outside a run."""
    return comm.abort_file.parent if comm.abort_file is not None else None


def write_slowdown(run_dir: Path, node_id: int, factor: float) -> None:
    """Make node `node_id` of the run compute `factor` times as slowly from its next iteration on (1: normal again).
    Written whole (a temporary file renamed over it), so a worker never reads half a number."""
    check_factor(factor)
    path = slowdown_path(run_dir, node_id)
    write_whole(path, f"{factor!r}\n")


def read_slowdown(run_dir: Path, node_id: int) -> float:
    """The factor written for a node (1 when none is)."""
    try:
        return check_factor(float(slowdown_path(run_dir, node_id).read_text()))
    except FileNotFoundError:
        return 1.0


@dataclass
class Slowdown:
    """A worker's view of its factor: `factor()` once per iteration (a stat; the file is read when it changed).
    `run_dir` None (a worker without a run directory, e.g. in unit tests of the loops): always 1."""

    run_dir: Path | None
    node_id: int
    _seen: tuple[int, int] | None = field(default=None, repr=False)  # (mtime_ns, size) of the file last read
    _factor: float = 1.0

    def factor(self) -> float:
        if self.run_dir is None:
            return 1.0
        try:
            st = slowdown_path(self.run_dir, self.node_id).stat()
        except FileNotFoundError:
            self._seen, self._factor = None, 1.0
            return 1.0
        key = (st.st_mtime_ns, st.st_size)
        if key != self._seen:
            self._factor = read_slowdown(self.run_dir, self.node_id)
            self._seen = key
        return self._factor


def stretch(computed_s: float, factor: float) -> float:
    """The wait that makes a computation of `computed_s` seconds take `factor` x as long."""
    return max(0.0, computed_s) * (factor - 1.0)
