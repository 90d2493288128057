"""Broadcast as a pipelined chain from the root (NCCL's ring broadcast): the members in group order
starting at the root; the buffer is cut into C chunks; the root sends chunk c to the next member, and
every other member receives chunk c from the one before it and forwards it to the one after (the last
keeps it). Chunks are small enough that the pipeline's fill, (N-2) chunks' time, stays a few per cent
of the whole (gradswitch/workload/broadcast_chain.py: the rule the simulator follows too)."""

from __future__ import annotations

from gradswitch.hosts.collectives.schedule import Schedule, Step, chunk_bounds
from gradswitch.workload.broadcast_chain import chunks_of


def broadcast(p: int, n: int, elements: int, root: int) -> Schedule:
    """Member p's schedule; `root`: the root's position in the group."""
    spans = chunk_bounds(elements, chunks_of(elements * 4))
    at = (p - root) % n  # place in the chain
    nxt = (p + 1) % n if at < n - 1 else None
    prev = (p - 1) % n if at > 0 else None
    steps = tuple(Step(nxt, c, prev, c, forward=True) for c in spans)
    # in place everywhere: a member forwards what it received; every chunk of a non-root is received
    return Schedule(steps, elements, in_place=True, output=(0, elements))
