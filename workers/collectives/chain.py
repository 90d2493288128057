"""Broadcast as a pipelined chain from the root (NCCL's ring broadcast): the members in group order
starting at the root; the buffer is cut into C chunks; the root sends chunk c to the next member, and
every other member receives chunk c from the one before it and forwards it to the one after (the last
keeps it). Chunks are small enough that the pipeline's fill, (N-2) chunks' time, stays a few per cent
of the whole: CHUNK_BYTES, at most MAX_CHUNKS of them."""

from __future__ import annotations

import math

from workers.collectives.schedule import Schedule, Step, chunk_bounds

CHUNK_BYTES = 8192
MAX_CHUNKS = 1024  # steps of one collective must fit a write's immediate data (executor.STEP_BITS)


def chunks_of(elements: int) -> int:
    return max(1, min(MAX_CHUNKS, math.ceil(elements * 4 / CHUNK_BYTES)))


def broadcast(p: int, n: int, elements: int, root: int) -> Schedule:
    """Member p's schedule; `root`: the root's position in the group."""
    spans = chunk_bounds(elements, chunks_of(elements))
    at = (p - root) % n  # place in the chain
    nxt = (p + 1) % n if at < n - 1 else None
    prev = (p - 1) % n if at > 0 else None
    steps = tuple(Step(nxt, c, prev, c, forward=True) for c in spans)
    # in place everywhere: a member forwards what it received; every chunk of a non-root is received
    return Schedule(steps, elements, in_place=True, output=(0, elements))
