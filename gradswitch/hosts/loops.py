"""The iteration loop of a worker: the gradients of each iteration through the job's all-reduce.

`WorkerLoop` all-reduces synthetic or model-profile gradients and checks every element against
the exact sum; `gradswitch.hosts.digits_job.TrainLoop` trains a real model. `make_loop` picks one for the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from gradswitch.hosts.comm import Collective, Comm
from gradswitch.hosts.digits_job import TrainLoop
from gradswitch.workload.encoding import AllReduce, Encoder, IterationCheck, job_profile
from gradswitch.workload.gradients import Profile, workload
from gradswitch.workload.records import CheckKind, IterationRecord, WrongResult, crash_if_asked


class WorkerLoop:
    """The training-step loop of a worker: gradients in, all-reduce, exact check, records out."""

    def __init__(self, comm: Comm, allreduce: AllReduce) -> None:
        self.comm = comm
        self.cfg = comm.cfg
        self.rank = comm.me.node_id
        self.allreduce = allreduce  # (iteration, profile index, int32 data) -> int32 sum
        self.tensors = workload(self.cfg.workload, self.cfg.size_bytes, self.cfg.scale).tensors
        self.profile: Profile = job_profile(self.cfg)  # what the all-reduce moves (with exponent codes)
        self.encoder = Encoder(self.cfg)
        self.largest_op = max(t.elements for t in self.profile.tensors)  # elements of the largest reduction
        self.in_flight = 1  # reductions at once
        self.extra = no_extra
        self.records: list[IterationRecord] = []  # the iterations completed so far (kept when the run fails)

    def run(self, progress: Callable[[int], None] = lambda i: None) -> list[IterationRecord]:
        records = self.records
        ranks = [w.node_id for w in self.cfg.workers]
        for it in range(self.cfg.iterations):
            data = [self.encoder.gradient(t.elements, self.rank, it, j) for j, t in enumerate(self.tensors)]
            self.comm.set_magnitudes(it, [self.encoder.magnitude_values(x) for x in data])
            zero_before = self.comm.zero_filled
            start = time.monotonic()
            results = [self.encoder.reduce(self.allreduce, it, j, x) for j, x in enumerate(data)]
            self.comm.drain()
            end = time.monotonic()
            check = IterationCheck()
            for j, (t, r) in enumerate(zip(self.tensors, results, strict=True)):
                check.add(self.encoder, r, *self.encoder.expected(t.elements, ranks, it, j))
            ok = check.correct(self.comm.dlcp)
            extra = {"zero_filled_packets": float(self.comm.zero_filled - zero_before),
                     "relative_error": check.relative_error}
            records.append(IterationRecord(it, start, end, ok, check.wrong, check.err, check.saturated, extra,
                                           check=CheckKind.EXACT))
            crash_if_asked(self.cfg, self.comm.me.node_id, it)
            if not ok:
                raise WrongResult(f"{self.comm.me.host}: iteration {it}: {check.wrong} wrong elements", records)
            progress(it)
        return records


def no_extra() -> dict[str, object]:
    return {}


class Loop(Protocol):
    """What an algorithm drives: a profile of tensors, and iterations that call its all-reduce."""

    profile: Profile
    largest_op: int  # elements of the largest single reduction
    in_flight: int  # reductions that may be in progress at once

    def run(self, progress: Callable[[int], None] = ...) -> list[IterationRecord]: ...

    def extra(self) -> dict[str, object]: ...


def make_loop(comm: Comm, collective: Collective) -> Loop:
    """The iteration loop of a worker: training with emulated computation (gradswitch/hosts/iteration.py),
    synthetic or model-profile gradients all-reduced in a row, or real training of a small model."""
    if comm.cfg.training is not None:
        from gradswitch.hosts.iteration import TrainingLoop

        return TrainingLoop(comm, collective)
    if comm.cfg.workload == "train-digits":
        return TrainLoop(comm, collective.allreduce, collective)
    return WorkerLoop(comm, collective.allreduce)
