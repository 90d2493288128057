"""How deep a shaped port's queue is: the testbed's HTB queues and the simulator's ports are sized alike."""

from __future__ import annotations

BUFFER_SECONDS = 0.1  # a port holds about 100 ms of its link rate
MIN_BUFFER_BYTES = 64 << 10


def buffer_bytes(rate_mbps: float) -> int:
    """A shaped port's queue in bytes: 100 ms of its rate, at least 64 KiB."""
    return max(MIN_BUFFER_BYTES, int(rate_mbps * 1e6 / 8 * BUFFER_SECONDS))
