"""A real (small) training job whose gradients go through the switches.

Workload "train-digits": an MLP (64 -> HIDDEN -> 10, ReLU, softmax; gradswitch/workload/digits.py, which the graph
engine's run of the same job shares, gradswitch/hosts/graph_digits.py) learns scikit-learn's digits data set (1797 8x8
images, shipped with the package). Every worker holds a shard of the training set; each iteration it computes the
gradient of a minibatch with numpy, sends it as int32 fixed point through the chosen all-reduce (ring, PS or NetReduce,
through BMv2), averages, and takes an SGD step. Accuracy on the held-out set is measured every iteration, so runs with
and without DLCP's dropping can be compared on learning, not only on time.

Every iteration's sum is checked (docs/training.md, "train-digits"): shards, minibatch draws
and the initial model come from the job's seed, so a worker computes every other worker's
gradient on its own model and the exact sum they must add up to. Without DLCP dropping the
sum must be exact; with it (zero-filled packets), the relative error against that sum is
recorded, and models may drift apart (a ring's all-gather carries a zero-filled chunk
downstream only): each worker reports a digest of its parameters at the end.

A slow worker (gradswitch/hosts/slowdown.py) stretches its minibatch's computation by its factor: it waits (factor - 1)
x what a minibatch's gradient takes (timed warm at the start), with the transport running. On a NetReduce job that
aggregates k of N (docs/faults.md, "Stragglers: k of N"), a sum may hold fewer than N workers: every result names its
contributors, the check is exact against the sum of exactly those, the update divides by their number (the same on every
worker: the models stay identical), and the gradient's relative error against the mean of all N is recorded. A worker
whose next sum is already here (the others got there first) stops computing: its contribution would be dropped anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from gradswitch.hosts.comm import Comm
from gradswitch.hosts.netreduce_quorum import PartialSums, held_mask
from gradswitch.hosts.slowdown import Slowdown, run_dir_of, stretch
from gradswitch.workload.digits import BATCH, FloatArray, Minibatches, Model
from gradswitch.workload.encoding import AllReduce, Encoder, IterationCheck, job_profile
from gradswitch.workload.gradients import digits_profile
from gradswitch.workload.records import CheckKind, IterationRecord, WrongResult, crash_if_asked

SLOW_POLL_S = 0.01  # a slow worker's longest single wait for packets while it 'computes'


def minibatch_s(batches: Minibatches, rank: int, model: Model, tries: int = 5) -> float:
    """Rank `rank`'s minibatch gradient on `model`, timed warm (the fastest of a few, after one untimed: the first
    call pays for numpy's first use, tens of ms, which stretched by a factor would be a stall, not a slow worker):
    what a slow worker's factor stretches (the graph engine's run of the model too: gradswitch/hosts/graph_digits.py)"""
    x, y = batches.shards[rank]
    model = model.copy()
    model.gradients(x[:BATCH], y[:BATCH])
    best = float("inf")
    for _ in range(tries):
        t = time.perf_counter()
        model.gradients(x[:BATCH], y[:BATCH])
        best = min(best, time.perf_counter() - t)
    return best


class TrainLoop:
    """Like WorkerLoop, but the gradients are a model's, and the records carry accuracy and loss."""

    def __init__(self, comm: Comm, allreduce: AllReduce, collective: object = None) -> None:
        self.comm = comm
        self.records: list[IterationRecord] = []
        # k of N: the collective's sums may leave workers out, and say which (NetReduceWorker)
        self.partial = collective if isinstance(collective, PartialSums) and collective.layout.k_of_n else None
        self.slowdown = Slowdown(run_dir_of(comm), comm.me.node_id)
        self.overtaken = False  # this iteration's computation was cut short: its sum was here already
        self.cfg = comm.cfg
        self.allreduce = allreduce
        self.profile = job_profile(self.cfg, digits_profile())  # what the all-reduce moves
        self.encoder = Encoder(self.cfg)
        ranks = [w.node_id for w in self.cfg.workers]
        self.rank = ranks.index(comm.me.node_id)
        self.n = len(ranks)
        # every worker's shard and minibatch draws, so that this worker can compute their gradients too
        self.batches = Minibatches(self.cfg.seed, self.n)
        self.model = Model.initial(self.cfg.seed)
        self.compute_s = minibatch_s(self.batches, self.rank, self.model)  # what a slow worker's factor stretches
        self.largest_op = max(t.elements for t in self.profile.tensors)
        self.in_flight = 1

    def extra(self) -> dict[str, object]:
        return {"model_digest": self.model.digest()}

    def _slow(self, computed_s: float) -> None:
        """A slow worker's computation takes its factor x as long: the rest, waited with the transport running (cut
        short on a k-of-N job once this iteration's first sum is here: this worker's part would come too late)."""
        self.overtaken = False
        wait = stretch(computed_s, self.slowdown.factor())
        deadline = time.monotonic() + wait
        while (now := time.monotonic()) < deadline:
            if self.partial is not None and self.partial.overtaken():
                self.overtaken = True
                return
            self.comm.step(min(SLOW_POLL_S, deadline - now), "this slow worker's computation")

    def _held(self, elements: int) -> npt.NDArray[np.bool_]:
        """Per rank and element: does the last reduction's sum hold that rank's value (k of N: the ranks each
        message's result named; else every rank)."""
        # (or a reduction the ring did, while the switch was lost: it names none)
        return held_mask(None if self.partial is None else self.partial.last_contributors, self.n, elements)

    def _gradients(self, model: Model, r: int) -> tuple[list[FloatArray], float]:
        """Worker r's gradients of this iteration (its next minibatch) on `model`, flat, in
        back-propagation order (the profile's), and its minibatch loss."""
        return self.batches.gradients(model, r)

    def run(self, progress: Callable[[int], None] = lambda i: None) -> list[IterationRecord]:
        records = self.records  # the iterations completed so far (kept when the run fails)
        train_s = 0.0  # wall time of the iterations so far (checks and evaluation excluded)
        for it in range(self.cfg.iterations):
            start = time.monotonic()
            before = self.model.copy()  # the parameters this iteration's gradients come from
            mine, loss = self._gradients(before, self.rank)
            self._slow(self.compute_s)
            self.comm.set_magnitudes(it, [self.encoder.magnitude_values(g) for g in mine])
            zero_before = self.comm.zero_filled
            comm_start = time.monotonic()
            reduced, held = [], []
            for index, g in enumerate(mine):
                reduced.append(self.encoder.reduce(self.allreduce, it, index, g))
                held.append(self._held(len(g)))
            self.comm.drain()
            comm_s = time.monotonic() - comm_start
            means = [self.encoder.decode(r) / h.sum(axis=0) for r, h in zip(reduced, held, strict=True)]
            self.model.step(means)
            end = time.monotonic()
            train_s += end - start
            # The check, outside the iteration's time: every worker's gradient on the same parameters.
            grads = [mine if r == self.rank else self._gradients(before, r)[0] for r in range(self.n)]
            check = IterationCheck()
            for index, got in enumerate(reduced):  # k of N: against the sum of exactly the ranks it names
                check.add(self.encoder, got, *self.encoder.expected_of([g[index] * held[index][r]
                                                                        for r, g in enumerate(grads)]))
            ok = check.correct(self.comm.dlcp)
            full = [sum(g[index] for g in grads) / self.n for index in range(len(reduced))]  # the mean of all N
            error = float(np.sqrt(sum(np.sum((m - f) ** 2) for m, f in zip(means, full, strict=True))
                                  / max(sum(np.sum(f**2) for f in full), 1e-300)))
            extra = {"accuracy": self.batches.accuracy(self.model), "loss": loss,
                     "zero_filled_packets": float(self.comm.zero_filled - zero_before),
                     "relative_error": check.relative_error, "comm_s": comm_s, "train_s": train_s,
                     "gradient_error": error, "overtaken": float(self.overtaken),
                     "contributors": float(min(int(h.sum(axis=0).min()) for h in held))}
            records.append(IterationRecord(it, start, end, ok, check.wrong, check.err, check.saturated, extra,
                                           check=CheckKind.EXACT))
            crash_if_asked(self.cfg, self.comm.me.node_id, it)
            if not ok:
                raise WrongResult(f"{self.comm.me.host}: iteration {it}: {check.wrong} wrong elements "
                                  f"(relative error {check.relative_error:.3g})", records)
            progress(it)
        return records
