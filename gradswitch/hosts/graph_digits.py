"""The digits MLP's real gradients through a graph run (GraphJob payload train-digits): the hosts' side of
gradswitch.workload.generators.digits_graph, the same training as the iteration loop's (gradswitch/hosts/digits_job.py).

Each iteration is one all-reduce of the world group (fixed point), or two (block exponents: every tensor's exponent
codes, then its values), in the order they start. Its values' input is this rank's gradient of its next minibatch on
its model (gradswitch/workload/digits.py), all tensors in one vector, int32 as the loop's encoder makes each tensor
(gradswitch/workload/encoding.py; with block exponents, scaled by the shared exponents the codes' sum gives); when it
ends, the sum is decoded, divided by N and applied (SGD), and the model's held-out accuracy recorded. Its check,
later: every worker's gradient on the parameters the iteration started from (the seed gives every shard and
minibatch draw), encoded and summed tensor by tensor, must equal the output element for element. Fixed point, the
codes and the values scaled by per-tensor exponents are all element by element, so one vector of each is the same
arithmetic as the loop's per-tensor reductions: same gradients, same sums, same steps, the same model (its digest).

On a NetReduce job of k of N (or with a deadline: docs/faults.md, "Stragglers: k of N"; fixed point only, as the
loop's) a sum may hold fewer than N workers, each message naming its own: as the loop does, the update divides each
element by the workers its sum holds (the same on every rank: the models stay identical) and the check is exact
against the sum of exactly those workers' gradients. Each iteration records, as the loop's, `contributors` (the
fewest workers a message's sum held: N without k of N) and `gradient_error` (the averaged gradient's relative error
against the mean of all N). A slow worker (slow-worker's factor) stretches each gradient's computation as the loop
does, by (factor - 1) x a minibatch's gradient timed warm (`compute_s`: the graph's computation nodes wait it,
gradswitch/hosts/graph_engine.py), cut short on a k-of-N job once the sum it would join is here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.digits_job import minibatch_s
from gradswitch.hosts.graph_data import Contributors, SourceReport
from gradswitch.hosts.netreduce_quorum import held_mask
from gradswitch.workload.digits import FloatArray, Minibatches, Model
from gradswitch.workload.encoding import Encoder, IterationCheck, Reduced, uses_exponents
from gradswitch.workload.floats import ExponentArray
from gradswitch.workload.generators.digits import digits_codes
from gradswitch.workload.gradients import Int32Array, digits_profile
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.job import DType, JobConfig
from gradswitch.workload.records import CheckKind, IterationRecord
from gradswitch.workload.worker_result import iteration_entry


@dataclass
class _Iteration:
    """One iteration on this rank: the parameters it started from and its own gradient (per tensor), until
    checked; with block exponents, the codes' sum it received and the shared exponents it gives."""

    index: int
    start: float
    before: Model | None
    mine: list[FloatArray] | None
    loss: float
    comm_start: float = 0.0
    saturated: int = 0
    codes: Int32Array | None = None  # block exponents: the codes' sum received
    exponents: list[ExponentArray] = field(default_factory=list)  # ... and each tensor's shared exponents
    end: float = 0.0
    output: Int32Array | None = None
    accuracy: float = 0.0
    train_s: float = 0.0  # the iterations' wall time until this one's end (checks and evaluation excluded)
    want: list[tuple[Reduced, FloatArray | None]] | None = None  # per tensor, what the sums must be (once computed)
    # k of N: per tensor, per rank and element, is that rank's value in the sum (None: every rank's)
    held: list[npt.NDArray[np.bool_]] | None = None
    means: list[FloatArray] | None = None  # per tensor, the averaged gradient the step took
    full: list[FloatArray] | None = None  # per tensor, the mean of all N workers' gradients (once computed)


def digits_problem(cfg: JobConfig) -> str | None:
    """Why a job's settings cannot carry the digits MLP's gradients on the graph engine (None: they can)."""
    if cfg.dtype != DType.FLOAT32:
        return "train-digits trains a float model: dtype = float32"
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
        self.sizes = [t.elements for t in digits_profile().tensors]
        self.splits = list(np.cumsum(self.sizes)[:-1])
        self.exponent = uses_exponents(cfg)
        self.encoder = Encoder(cfg)
        self.code_splits = list(np.cumsum([self.encoder.block.blocks(e) for e in self.sizes])[:-1])
        per_iteration = [digits_codes(), sum(self.sizes)] if self.exponent else [sum(self.sizes)]
        for op in ops.values():
            want = per_iteration[op.sequence % len(per_iteration)]
            if op.collective != CollectiveKind.ALL_REDUCE or op.members != tuple(range(self.n)) \
                    or op.elements != want:
                raise ValueError(f"{op.key}: a train-digits graph{' with block exponents' if self.exponent else ''} "
                                 f"has only all-reduces of the world group of {' and '.join(map(str, per_iteration))} "
                                 f"elements in turn (gradswitch.workload.generators.digits_graph), not this "
                                 f"{op.collective or op.kind} of {op.elements} on ranks {list(op.members)}")
        self.batches = Minibatches(cfg.seed, self.n)
        self.model = Model.initial(cfg.seed)
        self.compute_s = minibatch_s(self.batches, rank, self.model)  # what a slow worker's factor stretches
        self.iterations: list[_Iteration] = []  # in the order they started
        self.checked = 0  # operations checked
        self.train_s = 0.0  # the iterations' wall time so far (checks and evaluation excluded), as the loop's
        self.records: list[IterationRecord] = []

    def _codes_op(self, op: Op) -> bool:
        """Is the operation an iteration's exponent codes (block exponents: every even one of the group)?"""
        return self.exponent and op.sequence % 2 == 0

    def _iteration(self, op: Op) -> _Iteration:
        return self.iterations[op.sequence // (2 if self.exponent else 1)]

    def input(self, op: Op) -> Int32Array:
        if self.exponent and not self._codes_op(op):  # the values, scaled by the exponents the codes' sum gives
            it = self._iteration(op)
            assert it.mine is not None and it.codes is not None
            parts = []
            for x, codes in zip(it.mine, np.split(it.codes, self.code_splits), strict=True):
                ints, exponents, saturated = self.encoder.values_wire(x, codes)
                parts.append(ints)
                it.exponents.append(exponents)
                it.saturated += saturated
            return np.concatenate(parts)
        start = time.monotonic()
        before = self.model.copy()  # the parameters this iteration's gradients come from
        mine, loss = self.batches.gradients(before, self.rank)
        it = _Iteration(len(self.iterations), start, before, mine, loss, comm_start=time.monotonic())
        self.iterations.append(it)
        if self.exponent:
            return np.concatenate([self.encoder.block.codes(x) for x in mine])
        encoded = [self.encoder.fixed.encode(x) for x in mine]
        it.saturated = sum(s for _, s in encoded)
        return np.concatenate([ints for ints, _ in encoded])

    def _sums(self, it: _Iteration, output: Int32Array) -> list[Reduced]:
        """The iteration's sums as the loop holds them, tensor by tensor."""
        totals = np.split(output, self.splits)
        if not self.exponent:
            return [Reduced(t) for t in totals]
        assert it.codes is not None
        return [Reduced(t, c, e) for t, c, e in zip(totals, np.split(it.codes, self.code_splits), it.exponents,
                                                    strict=True)]

    def finished(self, op: Op, output: Int32Array, contributors: Contributors | None = None) -> None:
        it = self._iteration(op)
        if contributors is not None:
            if self.exponent:
                raise ValueError(f"{op.key}: a sum of some ranks alone (k of N) is for fixed point; block exponents' "
                                 "codes and values hold every rank's")
            it.held = np.split(held_mask(contributors, self.n, len(output)), self.splits, axis=1)
        if self._codes_op(op):
            it.codes = output
            return
        sums = self._sums(it, output)
        if it.held is None:
            it.means = [self.encoder.decode(r) / self.n for r in sums]
        else:  # k of N: each element divided by the workers its sum holds, as the loop's
            it.means = [self.encoder.decode(r) / h.sum(axis=0) for r, h in zip(sums, it.held, strict=True)]
        self.model.step(it.means)
        it.end, it.output = time.monotonic(), output
        self.train_s += it.end - it.start
        it.train_s = self.train_s
        it.accuracy = self.batches.accuracy(self.model)

    def _wanted(self, it: _Iteration) -> list[tuple[Reduced, FloatArray | None]]:
        """Per tensor, what every worker's gradient on the iteration's parameters sums to (their draws advance:
        computed once per iteration, in order)."""
        if it.want is None:
            assert it.before is not None and it.mine is not None
            grads = [it.mine if r == self.rank else self.batches.gradients(it.before, r)[0] for r in range(self.n)]
            held = it.held  # k of N: the sum of exactly the ranks each message's sum holds
            it.want = [self.encoder.expected_of([g[j] if held is None else g[j] * held[j][r]
                                                 for r, g in enumerate(grads)]) for j in range(len(self.sizes))]
            it.full = [sum((g[j] for g in grads[1:]), grads[0][j]) / self.n  # the mean of all N
                       for j in range(len(self.sizes))]
        return it.want

    def expected(self, op: Op) -> Int32Array:
        """What the operation's sum must be: the codes' or the values' of every worker's gradient on the
        iteration's parameters (k of N: of exactly the workers each message's sum holds; operations are checked in
        order)."""
        if op.sequence != self.checked:
            raise RuntimeError(f"{op.key}: operation {op.sequence} checked out of order (next: {self.checked})")
        it = self._iteration(op)
        if it.before is None or (not self._codes_op(op) and it.output is None):
            raise RuntimeError(f"{op.key}: iteration {it.index} checked before it ended")
        want = self._wanted(it)
        self.checked += 1
        if self._codes_op(op):
            return np.concatenate([w.codes for w, _ in want if w.codes is not None])
        assert it.output is not None and it.means is not None and it.full is not None
        check = IterationCheck()
        for (w, reference), got in zip(want, self._sums(it, it.output), strict=True):
            check.add(self.encoder, got, w, reference)
        check.saturated = it.saturated
        error = float(np.sqrt(sum(np.sum((m - f) ** 2) for m, f in zip(it.means, it.full, strict=True))
                              / max(sum(np.sum(f**2) for f in it.full), 1e-300)))
        held = self.n if it.held is None else min(int(h.sum(axis=0).min()) for h in it.held)
        self.records.append(IterationRecord(
            it.index, it.start, it.end, check.wrong == 0, check.wrong, check.err, check.saturated,
            {"accuracy": it.accuracy, "loss": it.loss, "relative_error": check.relative_error,
             "comm_s": it.end - it.comm_start, "train_s": it.train_s, "gradient_error": error,
             "contributors": float(held)},
            check=CheckKind.EXACT))
        it.before = it.mine = it.output = it.codes = it.want = it.held = it.means = it.full = None  # checked
        it.exponents = []
        return np.concatenate([w.total for w, _ in want])

    def report(self) -> SourceReport:
        return SourceReport([iteration_entry(r) for r in self.records], {"model_digest": self.model.digest()})
