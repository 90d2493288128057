"""How busy the machine was while something ran: its idle CPU share, and one process's CPU use.

Every figure of this testbed shares two cores between switches and hosts, so a result says
whether the links or the machine limited it: `busiest_link_load` near 1 means the links did;
`cpu_idle` near 0 means the machine did (its CPU had nothing left), whatever the links allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CpuSample:
    """Jiffies since boot, all CPUs together (/proc/stat's first line): idle (with iowait) and total."""

    idle: int
    total: int

    def idle_share_until(self, later: CpuSample) -> float | None:
        """Idle share of the machine's CPU between this sample and a later one (None: no time passed)."""
        span = later.total - self.total
        return (later.idle - self.idle) / span if span > 0 else None


def cpu_sample() -> CpuSample:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return CpuSample(fields[3] + fields[4], sum(fields[:8]))


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used so far (None once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3, utime 14, stime 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
