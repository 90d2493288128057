"""The iteration loop of a worker: the gradients of each iteration through the job's all-reduce.

`WorkerLoop` all-reduces synthetic or model-profile gradients and checks every element against
the exact sum; `workers.train.TrainLoop` trains a real model. `make_loop` picks one for the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from workers.comm import Collective, Comm
from workers.encoding import AllReduce, Encoder, job_profile
from workers.records import IterationRecord, WrongResult, crash_if_asked
from workers.tensors import Profile, workload
from workers.train import TrainLoop


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

    def run(self, progress: Callable[[int], None] = lambda i: None) -> list[IterationRecord]:
        records = []
        ranks = [w.node_id for w in self.cfg.workers]
        for it in range(self.cfg.iterations):
            data = [self.encoder.gradient(t.elements, self.rank, it, j) for j, t in enumerate(self.tensors)]
            zero_before = self.comm.zero_filled
            start = time.monotonic()
            results = [self.encoder.reduce(self.allreduce, it, j, x) for j, x in enumerate(data)]
            self.comm.drain()
            end = time.monotonic()
            wrong, err, ok, saturated = 0, 0.0, True, 0
            diff2 = norm2 = 0.0
            for j, (t, r) in enumerate(zip(self.tensors, results, strict=True)):
                want, reference = self.encoder.expected(t.elements, ranks, it, j)
                c = self.encoder.check(r, want, reference)
                wrong += c.wrong_elements
                err = max(err, c.max_abs_error)
                ok &= c.correct
                saturated += c.saturated
                got_v, want_v = self.encoder.values(r), self.encoder.values(want)
                diff2 += float(np.sum((got_v - want_v) ** 2))
                norm2 += float(np.sum(want_v**2))
            relative = (diff2 / norm2) ** 0.5 if norm2 else 0.0
            extra = {"zero_filled_packets": float(self.comm.zero_filled - zero_before), "relative_error": relative}
            lossy = self.comm.dlcp is not None and self.comm.dlcp.drop
            if not ok and lossy:
                # Bounded loss: the sum is not exact by design; it is correct within the job's error bound.
                ok = relative <= self.comm.dlcp.max_relative_error  # type: ignore[union-attr]
            records.append(IterationRecord(it, start, end, ok, wrong, err, saturated, extra))
            crash_if_asked(self.cfg, self.comm.me.node_id, it)
            if not ok:
                raise WrongResult(f"{self.comm.me.host}: iteration {it}: {wrong} wrong elements", records)
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
    """The iteration loop of a worker: training with emulated computation (workers/training.py),
    synthetic or model-profile gradients all-reduced in a row, or real training of a small model."""
    if comm.cfg.training is not None:
        from workers.training import TrainingLoop

        return TrainingLoop(comm, collective)
    if comm.cfg.workload == "train-digits":
        return TrainLoop(comm, collective.allreduce)
    return WorkerLoop(comm, collective.allreduce)
