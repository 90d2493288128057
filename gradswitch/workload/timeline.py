"""A worker's timeline of one run (computation and reductions as intervals) and the per-iteration measures
taken from it: computation, communication, the part of it not hidden by computation. The host processes and the
simulator's results both record their timelines this way."""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.protocol.choice import Choice


class EventKind(Choice):
    FORWARD = "forward"  # a layer's forward pass on the emulated GPU
    BACKWARD = "backward"  # a layer's backward pass
    OP = "op"  # a reduction (a bucket or a partition) in progress


@dataclass(frozen=True)
class Event:
    """One interval of a worker's timeline."""

    iteration: int
    kind: EventKind
    name: str
    start: float
    end: float
    lane: int = 0  # ops: which of the in-flight slots


@dataclass(frozen=True)
class IterationTiming:
    index: int
    start: float  # forward start
    end: float  # the next forward start (the last iteration: when it could start)
    compute_s: float  # time computing (forward and backward) inside [start, end)
    comm_s: float  # time any of this iteration's reductions was in progress
    exposed_comm_s: float  # iteration time not hidden by computation: end - start - compute_s
    overlap: float  # fraction of comm_s hidden behind computation

    @property
    def time_s(self) -> float:
        return self.end - self.start


def _union(intervals: list[tuple[float, float]]) -> float:
    total, cur_start, cur_end = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_end is None or s > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def timings(events: list[Event], bounds: list[tuple[float, float]]) -> list[IterationTiming]:
    """Per-iteration measures from a timeline: computation inside the iteration, reductions of it,
    exposed communication = iteration time - computation, overlap = hidden part of communication."""
    out = []
    for i, (start, end) in enumerate(bounds):
        compute = sum(max(0.0, min(e.end, end) - max(e.start, start)) for e in events
                      if e.kind != EventKind.OP and e.end > start and e.start < end)
        comm = _union([(e.start, e.end) for e in events if e.kind == EventKind.OP and e.iteration == i])
        exposed = max(0.0, end - start - compute)
        overlap = min(1.0, max(0.0, (comm - exposed) / comm)) if comm > 0 else 0.0
        out.append(IterationTiming(i, start, end, compute, comm, exposed, overlap))
    return out
