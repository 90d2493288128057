"""The digits MLP's real gradients through a graph run (GraphJob payload train-digits): the hosts' side of
gradswitch.workload.generators.digits_graph, the same training as the iteration loop's (gradswitch/hosts/digits_job.py).

Each iteration is the loop's reductions (digits_reductions): one all-reduce of the world group per tensor (fixed
point), or two (block exponents: its exponent codes, then its values), in the order they start. The iteration's first
operation computes this rank's gradient of its next minibatch on its model (gradswitch/workload/digits.py); each
operation's input is its tensor as the loop's encoder makes it (gradswitch/workload/encoding.py: int32 fixed point, the
codes, or the values scaled by the shared exponents the codes' sum gave); when the iteration's last ends, its sums are
decoded, divided by N and applied (SGD), and the model's held-out accuracy recorded. Its check, later: every worker's
gradient on the parameters the iteration started from (the seed gives every shard and minibatch draw), encoded and
summed tensor by tensor, must equal each output element for element: same gradients, same sums, same steps, the same
model (its digest) as the loop's.

On a NetReduce job of k of N (or with a deadline: docs/faults.md, "Stragglers: k of N"; fixed point only, as the
loop's) a tensor's sum may hold fewer than N workers, each message naming its own: as the loop does, the update
divides each element of each tensor by the workers its own sum holds (the same on every rank: the models stay
identical) and each tensor's check is exact against the sum of exactly those workers' gradients. Each iteration
records, as the loop's, `contributors` (the fewest workers a message's sum held, over the iteration's tensors: N
without k of N) and `gradient_error` (the averaged gradient's relative error against the mean of all N, over all
tensors). A slow worker (slow-worker's factor) stretches each gradient's computation as the loop does, by
(factor - 1) x a minibatch's gradient timed warm (`compute_s`: the graph's computation nodes wait it,
gradswitch/hosts/graph_engine.py), cut short on a k-of-N job once the sum it would join is here.

DLCP dropping (`dlcp = { drop = true }`, docs/dlcp.md), as the loop's: the graph's all-reduces carry the loop's
layer classes and are droppable but for exponent codes (digits_graph); before the iteration's first all-reduce the
rank's magnitude thresholds come from its gradient as it goes on the wire (`contributed`: Encoder.magnitude_values of
each tensor, the loop's set_magnitudes), the switches trim, the receivers zero-fill within the loss budget, and the
iteration records its packets zero-filled (`zero_filled_packets`, over its all-reduces' receives) and is correct while
the relative error of its sums against the exact ones is at most max_relative_error (IterationCheck.correct, the
loop's judgement). A zero-filled chunk of a ring's all-gather reaches some ranks only, so the models may drift apart,
as the loop's: each rank checks against every worker's gradient on its own parameters.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.digits_job import minibatch_s
from gradswitch.hosts.graph_data import (
    Contributors,
    SourceReport,
    check_all_reduces_in_turn,
    refuse_some_ranks_with_exponents,
)
from gradswitch.hosts.netreduce_quorum import held_mask
from gradswitch.workload.digits import FloatArray, Minibatches, Model
from gradswitch.workload.encoding import Encoder, IterationCheck, Reduced, uses_exponents
from gradswitch.workload.floats import ExponentArray
from gradswitch.workload.generators.digits import DigitsReduction, digits_reductions
from gradswitch.workload.gradients import Int32Array, digits_profile
from gradswitch.workload.job import DType, JobConfig
from gradswitch.workload.records import CheckKind, IterationRecord
from gradswitch.workload.worker_result import iteration_entry

HeldMask = npt.NDArray[np.bool_]  # per rank and element of a tensor: is that rank's value in its sum


@dataclass
class _Iteration:
    """One iteration on this rank: the parameters it started from and its own gradient (per tensor), until
    checked; per tensor, its sum received, (block exponents) its codes' sum and the shared exponents they give, and
    (k of N) the ranks its sum holds."""

    index: int
    start: float
    before: Model | None
    mine: list[FloatArray] | None
    loss: float
    tensors: int
    comm_start: float = 0.0
    saturated: int = 0
    zero_filled: int = 0  # packets its all-reduces' receives took as zeros (DLCP dropping)
    codes: list[Int32Array | None] = field(default_factory=list)  # block exponents: each tensor's codes' sum
    exponents: list[ExponentArray | None] = field(default_factory=list)  # ... and its shared exponents
    totals: list[Int32Array | None] = field(default_factory=list)  # each tensor's sum
    held: list[HeldMask | None] = field(default_factory=list)  # k of N: each tensor's held mask (None: every rank's)
    end: float = 0.0
    ended: bool = False
    accuracy: float = 0.0
    train_s: float = 0.0  # the iterations' wall time until this one's end (checks and evaluation excluded)
    grads: list[list[FloatArray]] | None = None  # every worker's gradient on `before` (once computed)
    want: list[tuple[Reduced, FloatArray | None] | None] = field(default_factory=list)  # per tensor, its sum's must
    means: list[FloatArray] | None = None  # per tensor, the averaged gradient the step took

    def __post_init__(self) -> None:
        self.codes = [None] * self.tensors
        self.exponents = [None] * self.tensors
        self.totals = [None] * self.tensors
        self.held = [None] * self.tensors
        self.want = [None] * self.tensors


def digits_problem(cfg: JobConfig) -> str | None:
    """Why a job's settings cannot carry the digits MLP's gradients on the graph engine (None: they can)."""
    if cfg.dtype != DType.FLOAT32:
        return "train-digits trains a float model: dtype = float32"
    return None


class DigitsData:
    """A rank's data source (gradswitch/hosts/graph_data.py) for a train-digits graph."""

    def __init__(self, cfg: JobConfig, rank: int, ops: Mapping[int, Op]) -> None:
        problem = digits_problem(cfg)
        if problem is not None:
            raise ValueError(problem)
        self.n = len(cfg.workers)
        self.rank = rank
        self.tensors = len(digits_profile().tensors)
        self.exponent = uses_exponents(cfg)
        self.dlcp = cfg.dlcp
        self.encoder = Encoder(cfg)
        self.reductions = digits_reductions(self.exponent)  # an iteration's, in order
        check_all_reduces_in_turn(ops, self.n, [r.elements for r in self.reductions],
                                  f"a train-digits graph{' with block exponents' if self.exponent else ''}",
                                  "gradswitch.workload.generators.digits_graph")
        self.batches = Minibatches(cfg.seed, self.n)
        self.model = Model.initial(cfg.seed)
        self.compute_s = minibatch_s(self.batches, rank, self.model)  # what a slow worker's factor stretches
        self.iterations: list[_Iteration] = []  # in the order they started
        self.checked = 0  # operations checked
        self.train_s = 0.0  # the iterations' wall time so far (checks and evaluation excluded), as the loop's
        self.records: list[IterationRecord] = []

    def _reduction(self, op: Op) -> DigitsReduction:
        return self.reductions[op.sequence % len(self.reductions)]

    def _iteration(self, op: Op) -> _Iteration:
        return self.iterations[op.sequence // len(self.reductions)]

    def _last(self, op: Op) -> bool:
        """Is the operation its iteration's last reduction?"""
        return op.sequence % len(self.reductions) == len(self.reductions) - 1

    def _begin(self, op: Op) -> _Iteration:
        """The operation's iteration, begun (its gradient computed on the model as it is) if this is its first."""
        index = op.sequence // len(self.reductions)
        if index == len(self.iterations):  # the iteration's first: its gradient
            start = time.monotonic()
            before = self.model.copy()  # the parameters this iteration's gradients come from
            mine, loss = self.batches.gradients(before, self.rank)
            self.iterations.append(_Iteration(index, start, before, mine, loss, self.tensors,
                                              comm_start=time.monotonic()))
        return self.iterations[index]

    def contributed(self, ops: list[Op]) -> list[Int32Array]:
        """The iteration's gradient as this rank contributes it, tensor by tensor, for DLCP's magnitude thresholds:
        the loop's (Encoder.magnitude_values: fixed point as sent; block exponents, scaled by its own)."""
        if not ops:
            return []
        it = self._begin(min(ops, key=lambda o: o.sequence))
        assert it.mine is not None
        return [self.encoder.magnitude_values(g) for g in it.mine]

    def input(self, op: Op) -> Int32Array:
        r = self._reduction(op)
        it = self._begin(op)
        if op.sequence % len(self.reductions) == 0:  # the iteration's first: its communication starts
            it.comm_start = time.monotonic()
        assert it.mine is not None
        x = it.mine[r.tensor]
        if r.codes:
            return self.encoder.block.codes(x)
        if self.exponent:  # the values, scaled by the exponents the codes' sum gives
            codes = it.codes[r.tensor]
            assert codes is not None
            ints, exponents, saturated = self.encoder.values_wire(x, codes)
            it.exponents[r.tensor] = exponents
        else:
            ints, saturated = self.encoder.fixed.encode(x)
        it.saturated += saturated
        return ints

    def _sums(self, it: _Iteration) -> list[Reduced]:
        """The iteration's sums as the loop holds them, tensor by tensor."""
        out = []
        for total, codes, exponents in zip(it.totals, it.codes, it.exponents, strict=True):
            assert total is not None
            out.append(Reduced(total, codes, exponents))
        return out

    def finished(self, op: Op, output: Int32Array, contributors: Contributors | None = None,
                 zero_filled: int = 0) -> None:
        it, r = self._iteration(op), self._reduction(op)
        it.zero_filled += zero_filled
        refuse_some_ranks_with_exponents(op, self.exponent, contributors)
        if contributors is not None:
            it.held[r.tensor] = held_mask(contributors, self.n, len(output))  # this tensor's own sum's
        if r.codes:
            it.codes[r.tensor] = output
            return
        it.totals[r.tensor] = output
        if not self._last(op):
            return
        # each tensor's elements divided by the workers its own sum holds (N without k of N), as the loop's
        it.means = [self.encoder.decode(s) / (self.n if h is None else h.sum(axis=0))
                    for s, h in zip(self._sums(it), it.held, strict=True)]
        self.model.step(it.means)
        it.end, it.ended = time.monotonic(), True
        self.train_s += it.end - it.start
        it.train_s = self.train_s
        it.accuracy = self.batches.accuracy(self.model)

    def float_error(self, op: Op, output: Int32Array) -> float | None:
        return None  # the iteration's records carry it (report)

    def _grads(self, it: _Iteration) -> list[list[FloatArray]]:
        """Every worker's gradient on the iteration's parameters (their draws advance: computed once per iteration,
        in order)."""
        if it.grads is None:
            assert it.before is not None and it.mine is not None
            it.grads = [it.mine if r == self.rank else self.batches.gradients(it.before, r)[0] for r in range(self.n)]
        return it.grads

    def _wanted(self, it: _Iteration, j: int) -> tuple[Reduced, FloatArray | None]:
        """What tensor j's sum must be: every worker's gradient of it summed (k of N: exactly the workers its sum
        holds, known once it ended; with block exponents, codes and values, every worker's)."""
        want = it.want[j]
        if want is None:
            held = it.held[j]
            want = self.encoder.expected_of([g[j] if held is None else g[j] * held[q]
                                             for q, g in enumerate(self._grads(it))])
            it.want[j] = want
        return want

    def expected(self, op: Op) -> Int32Array:
        """What the operation's sum must be: its tensor's codes' or values' of every worker's gradient on the
        iteration's parameters (k of N: of exactly the workers its sum holds; operations are checked in order, the
        iteration's record at its last)."""
        if op.sequence != self.checked:
            raise RuntimeError(f"{op.key}: operation {op.sequence} checked out of order (next: {self.checked})")
        it, r = self._iteration(op), self._reduction(op)
        if it.before is None or (self._last(op) and not it.ended):
            raise RuntimeError(f"{op.key}: iteration {it.index} checked before it ended")
        want, _ = self._wanted(it, r.tensor)
        self.checked += 1
        if r.codes:
            assert want.codes is not None
            return want.codes
        if not self._last(op):
            return want.total
        assert it.means is not None
        check = IterationCheck()
        for j, got in enumerate(self._sums(it)):
            w, reference = self._wanted(it, j)
            check.add(self.encoder, got, w, reference)
        check.saturated = it.saturated
        grads = self._grads(it)
        full = [sum((g[j] for g in grads[1:]), grads[0][j]) / self.n  # the mean of all N
                for j in range(self.tensors)]
        error = float(np.sqrt(sum(np.sum((m - f) ** 2) for m, f in zip(it.means, full, strict=True))
                              / max(sum(np.sum(f**2) for f in full), 1e-300)))
        held = min(self.n if h is None else int(h.sum(axis=0).min()) for h in it.held)
        # exact; with DLCP dropping, within max_relative_error (the loop's judgement)
        self.records.append(IterationRecord(
            it.index, it.start, it.end, check.correct(self.dlcp), check.wrong, check.err, check.saturated,
            {"accuracy": it.accuracy, "loss": it.loss, "zero_filled_packets": float(it.zero_filled),
             "relative_error": check.relative_error,
             "comm_s": it.end - it.comm_start, "train_s": it.train_s, "gradient_error": error,
             "contributors": float(held)},
            check=CheckKind.EXACT))
        it.before = it.mine = it.grads = it.means = None  # checked: keep no copies
        it.codes, it.exponents, it.totals, it.held, it.want = [], [], [], [], []
        return want.total

    def report(self) -> SourceReport:
        return SourceReport([iteration_entry(r) for r in self.records], {"model_digest": self.model.digest()})
