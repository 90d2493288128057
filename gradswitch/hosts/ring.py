"""Ring all-reduce (reduce-scatter, then all-gather) over RDMA WRITE with immediate.

Rank r sends to r+1 and receives from r-1. The tensor is cut into N chunks; in
reduce-scatter step s rank r sends chunk (r - s) and adds the chunk (r - s - 1) it receives;
after N-1 steps it owns the full sum of chunk (r + 1); all-gather circulates the owned
chunks for N-1 more steps. Each step's chunk lands in its own slot of the receiver's
region (two copies, alternating per all-reduce, so a fast neighbour cannot overwrite a
slot not yet read) and the immediate data names (sequence, step).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from gradswitch.hosts.comm import Comm, OpGen
from gradswitch.hosts.loops import make_loop
from gradswitch.roce.qp import MemoryRegion
from gradswitch.workload.dlcp import Tag
from gradswitch.workload.gradients import Int32Array, from_wire, to_wire

RKEY = 0x52494E47  # "RING"


def chunk_bounds(elements: int, n: int) -> list[tuple[int, int]]:
    base, extra = divmod(elements, n)
    bounds, start = [], 0
    for i in range(n):
        size = base + (1 if i < extra else 0)
        bounds.append((start, start + size))
        start += size
    return bounds


STEP_BITS = 8  # a write's immediate data: reduction sequence << STEP_BITS | step
MAX_WORKERS = (1 << STEP_BITS) // 2  # 2(N-1) steps must fit STEP_BITS


def step_tag(seq: int, step: int) -> int:
    return (seq & ((1 << (32 - STEP_BITS)) - 1)) << STEP_BITS | step


class Ring:
    def __init__(self, comm: Comm) -> None:
        self.comm = comm
        workers = [w.node_id for w in comm.cfg.workers]
        self.n = len(workers)
        if self.n > MAX_WORKERS:
            raise ValueError(f"ring supports at most {MAX_WORKERS} workers (step ids are {STEP_BITS} bits)")
        self.rank = workers.index(comm.me.node_id)
        self.next = workers[(self.rank + 1) % self.n]
        self.prev = workers[(self.rank - 1) % self.n]
        self.loop = make_loop(comm, self)
        self.slot_bytes = max(4, -(-self.loop.largest_op // self.n) * 4)
        self.steps = 2 * (self.n - 1)
        # Each reduction has its own slots: with W reductions in flight, a neighbour can be at most 2W
        # reductions ahead of the one this worker still reads (it starts reduction k only when k - W is done).
        self.copies = 2 * self.loop.in_flight
        self.region = comm.register(RKEY, max(1, self.copies * self.steps * self.slot_bytes))
        self.seq = 0
        if self.n > 1:
            comm.qp(self.next)
            comm.qp(self.prev)

    def _va(self, seq: int, step: int) -> int:
        return ((seq % self.copies) * self.steps + step) * self.slot_bytes

    def allreduce(self, iteration: int, index: int, data: Int32Array) -> Int32Array:
        seq = self.seq
        self.seq += 1
        return self.comm.drive(self.reduce_op(iteration, index, seq, data, index), f"tensor {index}")

    def reduce_op(self, iteration: int, unit: int, seq: int, data: Int32Array, mark: int) -> OpGen:
        """Reduction number `seq` of the job (every worker numbers them alike); `mark`: the profile
        index whose DLCP class the writes carry."""
        acc: Int32Array = data.astype(np.int32).copy()
        if self.n == 1:
            return acc
        # the chunk sent in reduce-scatter step s sums s + 1 workers' gradients; in all-gather, all n
        return (yield from ring_steps(self.comm, acc, self.rank, self.n, self.next, self.prev, seq, RKEY, self.region,
                                      partial(self._va, seq), lambda summed: self.comm.tag_for(
                                          mark, self.loop.profile, iteration, summed)))


def ring_steps(comm: Comm, acc: Int32Array, pos: int, n: int, to: int, frm: int, seq: int, rkey: int,
               region: MemoryRegion, va: Callable[[int], int],
               tag: Callable[[int], Tag | None] = lambda summed: None) -> OpGen:
    """Ring all-reduce of acc in place (reduce-scatter, then all-gather): 2(n - 1) steps of one chunk written to
    `to` (immediate: step_tag(seq, step), at va(step) of its region under rkey) and one read from `frm`'s. pos is
    this worker's place on the ring that runs towards `to`; tag(summed): the DLCP tag of a chunk that sums
    `summed` workers' values."""
    bounds = chunk_bounds(len(acc), n)
    for step in range(2 * (n - 1)):
        reduce = step < n - 1
        s = step if reduce else step - (n - 1)
        send_chunk = (pos - s) % n if reduce else (pos + 1 - s) % n
        recv_chunk = (pos - s - 1) % n if reduce else (pos - s) % n
        lo, hi = bounds[send_chunk]
        imm = step_tag(seq, step)
        comm.write(to, to_wire(acc[lo:hi]), va(step), rkey, imm, tag(s + 1 if reduce else n))
        if not comm.arrived(frm, imm):
            yield partial(comm.arrived, frm, imm)
        comm.take(frm, imm)
        lo, hi = bounds[recv_chunk]
        got = from_wire(comm.read(region, va(step), (hi - lo) * 4), hi - lo)
        if reduce:
            acc[lo:hi] += got
        else:
            acc[lo:hi] = got
    return acc
