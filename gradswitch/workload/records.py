"""What a worker reports of its iterations, and how a run's faults and failures reach it."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from gradswitch.protocol.choice import Choice
from gradswitch.workload.job import JobConfig


class CheckKind(Choice):
    """Which check of an iteration's result ran: what `correct` and the error fields mean."""

    EXACT = "exact"  # every element of every sum compared with the exact sum this worker computed itself
    DIGEST = "digest"  # only digests of the results compared between workers (no loop of this package yet)
    NONE = "none"  # no check ran (e.g. the iteration did not finish): correct and the errors say nothing


@dataclass
class IterationRecord:
    index: int
    start: float  # CLOCK_MONOTONIC, comparable across Mininet hosts (one kernel)
    end: float
    correct: bool
    wrong_elements: int
    max_abs_error: float
    saturated: int = 0
    extra: dict[str, float] = field(default_factory=dict)
    check: CheckKind = field(kw_only=True)  # which check gave correct, wrong_elements and max_abs_error

    @property
    def time_s(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["check"] = str(self.check)
        d["time_s"] = self.time_s
        return d


class WrongResult(RuntimeError):
    def __init__(self, message: str, records: list[IterationRecord]) -> None:
        super().__init__(message)
        self.records = records


CRASH_STATUS = 3  # the exit status of a node that crashed as its job's `crash` asked


def crashes_after(cfg: JobConfig, node_id: int, iteration: int) -> bool:
    """Whether the job's fault injection (JobConfig.crash) has this node die after this iteration."""
    return cfg.crash is not None and cfg.crash.node == node_id and cfg.crash.after == iteration


def crash_if_asked(cfg: JobConfig, node_id: int, iteration: int) -> None:
    """The job's fault injection (JobConfig.crash): this node dies abruptly after this iteration."""
    if crashes_after(cfg, node_id, iteration):
        os._exit(CRASH_STATUS)
