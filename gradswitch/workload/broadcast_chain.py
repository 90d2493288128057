"""How a broadcast's pipelined chain cuts its buffer, the one rule both engines follow (the hosts'
gradswitch/hosts/collectives/chain.py and the simulator's graph engine, which gradswitch.sim passes it to): chunks of
CHUNK_BYTES, at least 1 and at most MAX_CHUNKS of them (the steps of one collective fit the hosts' write
immediate data: gradswitch/hosts/collectives/executor.py STEP_BITS). Small chunks keep the pipeline's fill, (N-2)
chunks' time, a few per cent of the whole."""

from __future__ import annotations

import math

CHUNK_BYTES = 8192
MAX_CHUNKS = 1024


def chunks_of(nbytes: int) -> int:
    """How many chunks a buffer of `nbytes` is cut into."""
    return max(1, min(MAX_CHUNKS, math.ceil(nbytes / CHUNK_BYTES)))
