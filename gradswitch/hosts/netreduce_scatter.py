"""NetReduce reduce-scatter: the switches sum every rank's buffer and give each rank only the sum of its shard.

Shards are gradswitch.hosts.ring.chunk_bounds of the buffer in rank order (the ring's cut, the one every backend
checks against). Every rank sends its whole buffer as NetReduce messages on its one RC connection, as for
all-reduce; a message carries one piece of one shard, and its first packet names the shard's owner in its
RETH (gradswitch.protocol.netreduce.JobLayout.owner_va). The switches send the message's sum whole only to its owner;
every other receiver gets the packet's headers alone, trimmed, which its RC responder takes as zeros (loss
budget 1), so every connection's PSNs stay whole and every sender is acknowledged end to end
(docs/netreduce.md, "Reduce-scatter"). Messages go out interleaved over the owners (owner 0's first piece,
owner 1's, ...), so that the whole copies leave on every rank's link at once.

The graph engine calls `reduce_scatter_op(worker, data)` (a non-blocking operation, gradswitch/hosts/comm.py) on a
`NetReduceWorker(comm, scatter=True)` of a job the controller placed with `scatter=True`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradswitch.hosts.comm import OpGen
from gradswitch.hosts.netreduce import NetReduceWorker
from gradswitch.hosts.ring import chunk_bounds
from gradswitch.protocol.netreduce import MESSAGE_ELEMENTS
from gradswitch.workload.gradients import Int32Array


@dataclass(frozen=True)
class Piece:
    """One message of a reduce-scatter: elements [lo, hi) of the buffer, in rank `owner`'s shard."""

    owner: int
    lo: int
    hi: int


def scatter_plan(elements: int, ranks: int) -> list[Piece]:
    """The messages of a reduce-scatter of `elements` int32 values over `ranks` ranks, in the order they are
    sent: round j holds piece j of every shard that has one."""
    if elements < 1:
        raise ValueError(f"a reduce-scatter of {elements} elements: give it at least one")
    shards = chunk_bounds(elements, ranks)
    rounds = max(-(-(hi - lo) // MESSAGE_ELEMENTS) for lo, hi in shards)
    plan: list[Piece] = []
    for j in range(rounds):
        for owner, (lo, hi) in enumerate(shards):
            start = lo + j * MESSAGE_ELEMENTS
            if start < hi:
                plan.append(Piece(owner, start, min(hi, start + MESSAGE_ELEMENTS)))
    return plan


def reduce_scatter_op(worker: NetReduceWorker, data: Int32Array) -> OpGen:
    """This rank's shard of the sum of every rank's `data` (the same length on every rank), summed by the
    switches: yields what it waits for (run it with Comm.drive, or beside others with Comm.step)."""
    if not worker.layout.scatter:
        raise ValueError(f"NetReduce job {worker.layout.job} was not set up to reduce-scatter: "
                         "create its worker with NetReduceWorker(comm, scatter=True)")
    plan = scatter_plan(len(data), worker.layout.workers)
    chunks = []
    for piece in plan:
        chunk = np.zeros(MESSAGE_ELEMENTS, dtype=np.int32)
        chunk[: piece.hi - piece.lo] = data[piece.lo : piece.hi]
        chunks.append(chunk)
    sums = yield from worker.messages_op(chunks, [p.owner for p in plan])
    lo, hi = chunk_bounds(len(data), worker.layout.workers)[worker.rank]
    out = np.zeros(hi - lo, dtype=np.int32)
    for piece, got in zip(plan, sums, strict=True):
        if piece.owner == worker.rank:
            assert got is not None  # (messages_op returns every sum this rank owns)
            out[piece.lo - lo : piece.hi - lo] = got[: piece.hi - piece.lo]
    return out


def reduce_scatter(worker: NetReduceWorker, data: Int32Array) -> Int32Array:
    """reduce_scatter_op run to its end, blocking."""
    return worker.comm.drive(reduce_scatter_op(worker, data), "a NetReduce reduce-scatter")
