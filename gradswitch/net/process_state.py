"""A process's run state as the kernel reports it, and waiting for a stop or a continue to take effect.

kill(SIGSTOP) returns before every thread of the target has stopped (the signal is delivered on the target's own
CPUs): a caller that goes on at once may still find it running. `stop` and `resume` return once /proc says the
process is stopped ("T") or no longer stopped, within a deadline.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from gradswitch.protocol.polling import wait_until

STATE_DEADLINE_S = 2.0  # for a signalled process's state to change (a loaded 2-core machine takes milliseconds)
STOPPED = "T"


def process_state(pid: int) -> str:
    """The state letter of /proc/PID/stat (R running, S sleeping, T stopped, Z zombie, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def stop(pid: int, what: str, timeout: float = STATE_DEADLINE_S) -> None:
    """SIGSTOP the process and return once it is stopped; TimeoutError naming `what` otherwise."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: process_state(pid) == STOPPED, timeout, interval=0.005, what=f"{what} to stop")


def resume(pid: int, what: str, timeout: float = STATE_DEADLINE_S) -> None:
    """SIGCONT the process and return once it is no longer stopped; TimeoutError naming `what` otherwise."""
    os.kill(pid, signal.SIGCONT)
    wait_until(lambda: process_state(pid) != STOPPED, timeout, interval=0.005, what=f"{what} to go on")
