"""A collective's algorithm as data: per step, what this member sends to whom, what it receives from
whom and whether it adds or copies it. The algorithms (ring.py, pairwise.py, chain.py, p2p.py) make
such schedules; executor.py runs any of them over the transport. Positions are a member's index in
its process group's rank order (the group's rank list), not global ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.hosts.ring import chunk_bounds  # the one cut of a buffer into N chunks (the all-reduce ring's)

__all__ = ["Schedule", "Span", "Step", "chunk_bounds"]

Span = tuple[int, int]  # [lo, hi) in int32 elements


@dataclass(frozen=True)
class Step:
    """One step of one member. `send_to`/`recv_from`: a member position, or None (nothing that way).
    `send` is a span of the source buffer, `recv` a span of the destination buffer. `add`: the received
    values are added to the destination span (a reduction), else they replace it. `forward`: send only
    after this step's receive (a relay: a chain's member forwards what it just got). `settle`: the next step
    waits until this step's write is acknowledged too (MPI_Sendrecv: a pairwise step ends when its send and
    its receive are both done), so no member runs more than a step ahead and at most two write into one
    member at once."""

    send_to: int | None
    send: Span
    recv_from: int | None
    recv: Span
    add: bool = False
    forward: bool = False
    settle: bool = False

    @property
    def recv_elements(self) -> int:
        return self.recv[1] - self.recv[0] if self.recv_from is not None else 0


@dataclass(frozen=True)
class Schedule:
    """A member's steps, the size of its destination buffer, and where its input goes in it.

    `in_place`: the destination buffer starts as a copy of the input placed at `input_at` (the source
    of every send is then the destination buffer itself, as a ring reduces in place); otherwise the
    sends read the input and the destination starts as zeros, with `keep` copied from the input
    (all-to-all: a member's own chunk). `output`: the span of the destination that is the result."""

    steps: tuple[Step, ...]
    dst_elements: int
    in_place: bool
    input_at: int = 0
    keep: tuple[Span, Span] | None = None  # (input span, destination span)
    output: Span = (0, 0)

    @property
    def slot_elements(self) -> int:
        """Elements of the largest single receive: each step lands in its own slot of that size."""
        return max((s.recv_elements for s in self.steps), default=0)

    def peers(self) -> set[int]:
        return {p for s in self.steps for p in (s.send_to, s.recv_from) if p is not None}
