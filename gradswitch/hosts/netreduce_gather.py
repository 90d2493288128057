"""NetReduce all-gather: each rank's shard crosses each link once, replicated by the switches.

Every rank has a shard of the same length; the output, on every rank, is the shards in rank order. A message
carries one piece of one rank's shard and names that rank, its owner, in its first packet's RETH
(gradswitch.protocol.netreduce.JobLayout.owner_va). The owner sends the values; every other rank sends, on its own RC
connection and at the same PSNs, a placeholder: the packets' headers alone, marked trimmed
(gradswitch.hosts.netreduce.PlaceholderRequester), which the switch takes as zeros. So the cell's sum is the owner's
values, and the switches send it whole to every receiver but the owner, whose copy is trimmed to its headers:
every connection's PSNs stay whole and every sender is acknowledged end to end, as for all-reduce
(docs/netreduce.md, "All-gather"). Messages go out interleaved over the owners, as reduce-scatter's do, each
round starting one owner further (round j: owners j, j+1, ... mod N).

A placeholder may not complete a cell (the switch cannot send it on whole): it is held until resent whole, a
retransmission later, and go-back-N resends every packet after it. Whichever packet of a cell comes last is the
one that completes it, and a host that pauses (as Python processes on a busy machine do) sends the last one
whatever the schedule, so no choice of who sends placeholders keeps them early (measured: docs/netreduce.md,
"All-gather"). So by default every rank sends every message it does not own as zeros, whole: each uplink carries
the whole output S, the operation's link-rate time is S/B, N/(N-1) the ring's (N-1) s/B, and no cell waits;
`placeholders=True` sends them as placeholders, which only a switch that could grow one into the values
would keep at (N-1) s/B (the simulator's what-if, SimSettings.grow_placeholders).

The graph engine calls `all_gather_op(worker, shard)` (a non-blocking operation, gradswitch/hosts/comm.py) on a
`NetReduceWorker(comm, gather=True)` of a job the controller placed with `gather=True`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradswitch.hosts.comm import OpGen
from gradswitch.hosts.netreduce import NetReduceWorker
from gradswitch.protocol.netreduce import MESSAGE_ELEMENTS
from gradswitch.workload.gradients import Int32Array


@dataclass(frozen=True)
class Piece:
    """One message of an all-gather: elements [lo, hi) of rank `owner`'s shard."""

    owner: int
    lo: int
    hi: int


def gather_plan(shard_elements: int, ranks: int) -> list[Piece]:
    """The messages of an all-gather of shards of `shard_elements` int32 values from `ranks` ranks, in the
    order they are sent: round j holds piece j of every rank's shard, owners j, j + 1, ... (mod ranks)."""
    if shard_elements < 1:
        raise ValueError(f"an all-gather of shards of {shard_elements} elements: give each at least one")
    rounds = -(-shard_elements // MESSAGE_ELEMENTS)
    return [Piece((j + t) % ranks, j * MESSAGE_ELEMENTS, min(shard_elements, (j + 1) * MESSAGE_ELEMENTS))
            for j in range(rounds) for t in range(ranks)]


def placeholders_of(plan: list[Piece], rank: int, placeholders: bool) -> list[bool]:
    """Which of the plan's messages `rank` sends as a placeholder: with `placeholders`, every other rank's."""
    return [placeholders and piece.owner != rank for piece in plan]


def all_gather_op(worker: NetReduceWorker, shard: Int32Array, placeholders: bool = False) -> OpGen:
    """Every rank's `shard` (the same length on every rank), in rank order, replicated by the switches (the
    other ranks' messages sent as zeros, whole, or with `placeholders` as placeholders): yields what it waits
    for (run it with Comm.drive, or beside others with Comm.step)."""
    if not worker.layout.gather:
        raise ValueError(f"NetReduce job {worker.layout.job} was not set up to all-gather: "
                         "create its worker with NetReduceWorker(comm, gather=True)")
    n, e = worker.layout.workers, len(shard)
    plan = gather_plan(e, n)
    chunks = []
    for piece in plan:
        chunk = np.zeros(MESSAGE_ELEMENTS, dtype=np.int32)
        if piece.owner == worker.rank:
            chunk[: piece.hi - piece.lo] = shard[piece.lo : piece.hi]
        chunks.append(chunk)
    owners = [p.owner for p in plan]
    got = yield from worker.messages_op(chunks, owners, placeholders_of(plan, worker.rank, placeholders))
    out = np.zeros(n * e, dtype=np.int32)
    out[worker.rank * e : (worker.rank + 1) * e] = shard
    for piece, values in zip(plan, got, strict=True):
        if piece.owner != worker.rank:
            assert values is not None  # (messages_op returns every message another rank owns)
            out[piece.owner * e + piece.lo : piece.owner * e + piece.hi] = values[: piece.hi - piece.lo]
    return out


def all_gather(worker: NetReduceWorker, shard: Int32Array, placeholders: bool = False) -> Int32Array:
    """all_gather_op run to its end, blocking."""
    return worker.comm.drive(all_gather_op(worker, shard, placeholders), "a NetReduce all-gather")
