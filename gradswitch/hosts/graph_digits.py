"""The digits MLP's real gradients through a graph run (GraphJob payload train-digits): the hosts' side of
gradswitch.workload.generators.digits_graph, the same training as the iteration loop's (gradswitch/hosts/digits_job.py).

Each all-reduce of the world group is an iteration, in the order they start: its input is this rank's gradient
of its next minibatch on its model (gradswitch/workload/digits.py), all tensors in one vector, int32 fixed point as the
loop's encoder makes it (gradswitch/workload/encoding.py); when it ends, the sum is decoded, divided by N and applied
(SGD), and the model's held-out accuracy recorded. Its check, later: every worker's gradient on the parameters
the iteration started from (the seed gives every shard and minibatch draw), encoded and summed, must equal the
output element for element. Element-wise fixed point makes one vector the same arithmetic as the loop's four
tensors: same gradients, same sums, same steps, the same model (its digest) at the end.

On a NetReduce job of k of N (or with a deadline: docs/faults.md, "Stragglers: k of N") a sum may hold fewer
than N workers, each message naming its own: as the loop does, the update divides each element by the workers its
sum holds (the same on every rank: the models stay identical), the check is exact against the sum of exactly
those workers' gradients, and each iteration records `contributors` (the fewest a message held) and
`gradient_error` (the averaged gradient's relative error against the mean of all N). A slow worker (slow-worker's
factor) stretches each gradient's computation as the loop does, by (factor - 1) x a minibatch's gradient timed warm
(`compute_s`: the graph's computation nodes wait it, gradswitch/hosts/graph_engine.py), cut short on a k-of-N job once
the sum it would join is here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.digits_job import minibatch_s
from gradswitch.hosts.graph_data import Contributors, SourceReport
from gradswitch.hosts.netreduce_quorum import held_mask
from gradswitch.workload.digits import FloatArray, Minibatches, Model
from gradswitch.workload.encoding import Encoder, IterationCheck, Reduced, uses_exponents
from gradswitch.workload.gradients import Int32Array, digits_profile
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.job import DType, JobConfig
from gradswitch.workload.records import CheckKind, IterationRecord
from gradswitch.workload.worker_result import iteration_entry


@dataclass
class _Iteration:
    """One iteration on this rank: the parameters it started from and its own gradient, until checked."""

    index: int
    start: float
    before: Model | None
    mine: FloatArray | None
    loss: float
    saturated: int
    end: float = 0.0
    output: Int32Array | None = None
    accuracy: float = 0.0
    held: npt.NDArray[np.bool_] | None = None  # k of N: per rank and element, is it in the sum (None: all)
    mean: FloatArray | None = None  # the averaged gradient the step took


def digits_problem(cfg: JobConfig) -> str | None:
    """Why a job's settings cannot carry the digits MLP's gradients on the graph engine (None: they can)."""
    if cfg.dtype != DType.FLOAT32:
        return "train-digits trains a float model: dtype = float32"
    if uses_exponents(cfg):
        return "train-digits on the graph engine sends fixed point (float_mode = fixed), not block exponents"
    if cfg.dlcp is not None and cfg.dlcp.drop:
        return "train-digits on the graph engine checks every sum exact: no DLCP dropping"
    return None


class DigitsData:
    """A rank's data source (gradswitch/hosts/graph_data.py) for a train-digits graph."""

    def __init__(self, cfg: JobConfig, rank: int, ops: Mapping[int, Op]) -> None:
        problem = digits_problem(cfg)
        if problem is not None:
            raise ValueError(problem)
        self.n = len(cfg.workers)
        self.rank = rank
        sizes = [t.elements for t in digits_profile().tensors]
        self.splits = list(np.cumsum(sizes)[:-1])
        for op in ops.values():
            if op.collective != CollectiveKind.ALL_REDUCE or op.members != tuple(range(self.n)) \
                    or op.elements != sum(sizes):
                raise ValueError(f"{op.key}: a train-digits graph has only all-reduces of the world group of "
                                 f"{sum(sizes)} elements (gradswitch.workload.generators.digits_graph), not this "
                                 f"{op.collective or op.kind} of {op.elements} on ranks {list(op.members)}")
        self.encoder = Encoder(cfg)
        self.batches = Minibatches(cfg.seed, self.n)
        self.model = Model.initial(cfg.seed)
        self.compute_s = minibatch_s(self.batches, rank, self.model)  # what a slow worker's factor stretches
        self.iterations: dict[str, _Iteration] = {}  # by operation key, in the order they started
        self.checked = 0
        self.records: list[IterationRecord] = []

    def input(self, op: Op) -> Int32Array:
        before = self.model.copy()  # the parameters this iteration's gradients come from
        grads, loss = self.batches.gradients(before, self.rank)
        mine = np.concatenate(grads)
        ints, saturated = self.encoder.first_wire(mine)
        self.iterations[op.key] = _Iteration(len(self.iterations), time.monotonic(), before, mine, loss, saturated)
        return ints

    def finished(self, op: Op, output: Int32Array, contributors: Contributors | None = None) -> None:
        it = self.iterations[op.key]
        if contributors is not None:
            it.held = held_mask(contributors, self.n, len(output))
        mean = self.encoder.decode(Reduced(output)) / (self.n if it.held is None else it.held.sum(axis=0))
        self.model.step(np.split(mean, self.splits))
        it.end, it.output, it.mean = time.monotonic(), output, mean
        it.accuracy = self.batches.accuracy(self.model)

    def expected(self, op: Op) -> Int32Array:
        """Every worker's gradient on the iteration's parameters, summed as the all-reduce must (their draws
        advance: iterations are checked in order)."""
        it = self.iterations[op.key]
        if it.index != self.checked or it.before is None or it.mine is None or it.output is None:
            raise RuntimeError(f"{op.key}: iteration {it.index} checked out of order (next: {self.checked})")
        before, mine, got = it.before, it.mine, Reduced(it.output, saturated=it.saturated)
        grads = [mine if r == self.rank else np.concatenate(self.batches.gradients(before, r)[0])
                 for r in range(self.n)]
        held = it.held  # k of N: against the sum of exactly the ranks each message's sum holds
        want, reference = self.encoder.expected_of(grads if held is None else
                                                   [g * held[r] for r, g in enumerate(grads)])
        check = IterationCheck()
        check.add(self.encoder, got, want, reference)
        extra = {"accuracy": it.accuracy, "loss": it.loss, "relative_error": check.relative_error}
        if held is not None and it.mean is not None:
            full = sum(grads) / self.n  # the mean of all N
            extra["contributors"] = float(held.sum(axis=0).min())
            extra["gradient_error"] = float(np.sqrt(np.sum((it.mean - full) ** 2) / max(np.sum(full**2), 1e-300)))
        self.records.append(IterationRecord(
            it.index, it.start, it.end, check.wrong == 0, check.wrong, check.err, check.saturated, extra,
            check=CheckKind.EXACT))
        it.before = it.mine = it.output = it.mean = it.held = None  # checked: keep no copies
        self.checked += 1
        return want.total

    def report(self) -> SourceReport:
        return SourceReport([iteration_entry(r) for r in self.records], {"model_digest": self.model.digest()})
