"""Running one operation's schedule over the RoCE transport (gradswitch/hosts/comm.py), as a generator that
yields what it waits for, so a rank runs many at once (gradswitch/hosts/graph_engine.py).

Step i of operation o lands in o's memory region at the receiver (rkey ops.RKEY_BASE + o), at
i x the operation's slot, with immediate data o << STEP_BITS | i: operations in flight on one queue
pair never mix, whatever their groups. The operation ends when its output is complete: every step's receive is in
and its own last step done (a send's: its write posted), as a collective library's kernel ends once its steps are
done; it does not wait for its writes' acknowledgements. A write's data stay the transport's until acknowledged: the
requester keeps its own copy of the bytes from the post on (gradswitch/roce/qp.py WorkRequest) and resends from it,
so a later operation, which reads and writes its own buffers and lands in its own region at the receiver, cannot
change what a retransmission sends; a later write to the same peer queues behind it on the queue pair; the rank
waits for every acknowledgement once its whole graph is done (gradswitch/hosts/graph_main.py run_rank,
Comm.drain). A step marked `settle` (all-to-all's pairwise exchange) still waits for its write's acknowledgement
before the next step, which paces the members; the last step's would pace nothing and is not waited for.

DLCP: each write carries its step's tag (Op.tag_at: a droppable operation's packets classed by the sender's
magnitude thresholds of the iteration, as the training loop's writes); a receive's packets that a switch trimmed
and the receiver took as zeros (within the loss budget) count in the operation's `Received`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from functools import partial

import numpy as np

from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.comm import Comm, Wait
from gradswitch.roce.qp import MemoryRegion, WorkRequest
from gradswitch.workload.gradients import Int32Array, from_wire, to_wire

OpRun = Generator[Wait, None, Int32Array]  # yields what it waits for, returns this rank's output


def _acked(comm: Comm, qpn: int, wr: WorkRequest) -> bool:
    return wr.wr_id in comm.acked[qpn]


@dataclass
class Received:
    """What an operation's receives took as zeros: packets trimmed by a switch and zero-filled (DLCP)."""

    zero_filled: int = 0


def execute(comm: Comm, op: Op, region: MemoryRegion, data: Int32Array, received: Received | None = None) -> OpRun:
    """Run this rank's part of `op` with input `data`; `region`: the op's region on this rank; `received` counts
    its zero-filled packets."""
    sched = op.schedule()
    slot = op.slot_elements() * 4
    dst: Int32Array = np.zeros(sched.dst_elements, dtype=np.int32)
    if sched.in_place:
        dst[sched.input_at : sched.input_at + len(data)] = data
        src = dst
    else:
        src = data
        if sched.keep is not None:
            (ilo, ihi), (dlo, dhi) = sched.keep
            dst[dlo:dhi] = data[ilo:ihi]
    posted: list[tuple[int, WorkRequest]] = []

    def send(i: int, to: int, lo: int, hi: int) -> None:
        qp = comm.qp(op.members[to])
        tag = op.tag_at(i, comm.magnitudes.get(op.iteration) if op.iteration is not None else None)
        posted.append((qp.cfg.qpn, qp.requester.post_write(to_wire(src[lo:hi]), i * slot, op.rkey, imm=op.imm(i),
                                                                 tag=tag)))

    for i, st in enumerate(sched.steps):
        if st.send_to is not None and not st.forward:
            send(i, st.send_to, *st.send)
        if st.recv_from is not None:
            peer, imm = op.members[st.recv_from], op.imm(i)
            if not comm.arrived(peer, imm):
                yield partial(comm.arrived, peer, imm)
            completion = comm.take(peer, imm)
            if received is not None:
                received.zero_filled += completion.zero_filled
            lo, hi = st.recv
            got = from_wire(comm.read(region, i * slot, (hi - lo) * 4), hi - lo)
            if st.add:
                dst[lo:hi] += got
            else:
                dst[lo:hi] = got
        if st.send_to is not None and st.forward:
            send(i, st.send_to, *st.send)
        if st.settle and st.send_to is not None and i + 1 < len(sched.steps):
            qpn, wr = posted[-1]
            if not _acked(comm, qpn, wr):
                yield partial(_acked, comm, qpn, wr)
    lo, hi = sched.output
    return dst[lo:hi]
