"""A NetReduce worker's side of k of N (docs/faults.md, "Stragglers: k of N").

On a k-of-N job the switch emits a cell's sum once k workers are in, on every worker's connection: a worker left
out (late) finds the sum of its message already delivered on its own connection, PSN by PSN, before it sends it, or
while it is on its way. Its receiver has those PSNs and acknowledges them: an ACK for PSNs this side has not sent
(or not yet posted). An RC requester would ignore it (an ACK past what was sent is invalid), retransmit a message the
switch drops as late, and exhaust its retries. `QuorumRequester` takes such an ACK for what it says, the receiver
holds everything through that PSN on this connection, and settles every posted packet up to it, sent or not: a
late message posted after its sum was delivered is never put on the wire. ACKs within what was sent, NAKs and
timeouts are RC's own; a NAK still gets the packet resent while it is unacknowledged.

Results name their contributors in their Last packet's ImmDt (`JobLayout.contributors`); the message number is the
low bits (`JobLayout.imm_message`), so a worker finds a result by those (`tag_of`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from gradswitch.protocol.netreduce import MESSAGE_ELEMENTS, JobLayout
from gradswitch.roce.headers import AckType, Transport
from gradswitch.roce.psn import psn_add, psn_diff
from gradswitch.roce.qp import RecvCompletion, Requester, WorkRequest


class QuorumRequester(Requester):
    """The sending half of a k-of-N job's QP: an ACK past what was sent settles what is posted up to it."""

    delivered: int | None = None  # the highest PSN the receiver acknowledged past what this side had sent

    def on_ack(self, t: Transport, now: float) -> None:
        aeth = t.aeth
        if (aeth is not None and not self.error and aeth.kind == AckType.ACK
                and psn_diff(t.bth.psn, self.sent_end) >= 0):
            if self.delivered is None or psn_diff(t.bth.psn, self.delivered) > 0:
                self.delivered = t.bth.psn
            self.settle(now)
            return
        super().on_ack(t, now)

    def settle(self, now: float) -> None:
        """Everything posted through the delivered PSN is acknowledged (marked sent if it was not)."""
        if self.delivered is None or self.error:
            return
        last = psn_add(self.next_post, -1)
        through = self.delivered if psn_diff(self.delivered, last) <= 0 else last
        if psn_diff(through, self.una) < 0:
            return
        if psn_diff(through, self.sent_end) >= 0:
            self.counters.add("settled_unsent", psn_diff(through, self.sent_end) + 1)
            self.sent_end = psn_add(through, 1)
            if psn_diff(self.nxt, self.sent_end) < 0:
                self.nxt = self.sent_end
        self._ack_through(through, now)

    def _post(self, kind: str, data: bytes, va: int, rkey: int, imm: int | None, tag: object) -> WorkRequest:
        wr = super()._post(kind, data, va, rkey, imm, tag)
        self.settle(time.monotonic())
        return wr


def tag_of(layout: JobLayout, tags: dict[int, RecvCompletion], k: int) -> int | None:
    """The key of message k's result among a receive QP's completions (by ImmDt), None while it has not come."""
    imm = layout.imm(k)
    if not layout.k_of_n:
        return imm if imm in tags else None
    return next((key for key in tags if layout.imm_message(key) == imm), None)


@runtime_checkable
class PartialSums(Protocol):
    """A collective whose sums may hold fewer than all workers, and that says which (NetReduceWorker)."""

    layout: JobLayout
    last_contributors: list[tuple[int, ...]]  # per message of the last reduction: the ranks its sum holds

    def overtaken(self) -> bool:
        """The sum of this worker's next message is here already."""
        ...


def held_mask(contributors: Sequence[tuple[int, ...]] | None, workers: int, elements: int) -> npt.NDArray[np.bool_]:
    """Per rank and element of a reduction of `elements` values: does its sum hold that rank's value? `contributors`:
    per message (MESSAGE_ELEMENTS values each, in order) the ranks its result named (None: every rank, every
    element: an N-of-N sum, or one the ring did)."""
    held = np.ones((workers, elements), dtype=bool)
    if contributors is None:
        return held
    for i, ranks in enumerate(contributors):
        lo, hi = i * MESSAGE_ELEMENTS, min(elements, (i + 1) * MESSAGE_ELEMENTS)
        held[:, lo:hi] = False
        held[list(ranks), lo:hi] = True
    return held
