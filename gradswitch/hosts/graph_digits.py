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
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.graph_data import SourceReport
from gradswitch.workload.digits import FloatArray, Minibatches, Model
from gradswitch.workload.encoding import Encoder, IterationCheck, Reduced, uses_exponents
from gradswitch.workload.floats import ExponentArray
from gradswitch.workload.generators.digits import DigitsReduction, digits_reductions
from gradswitch.workload.gradients import Int32Array, digits_profile
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.job import DType, JobConfig
from gradswitch.workload.records import CheckKind, IterationRecord
from gradswitch.workload.worker_result import iteration_entry


@dataclass
class _Iteration:
    """One iteration on this rank: the parameters it started from and its own gradient (per tensor), until
    checked; per tensor, its sum received and (block exponents) its codes' sum and the shared exponents they give."""

    index: int
    start: float
    before: Model | None
    mine: list[FloatArray] | None
    loss: float
    tensors: int
    comm_start: float = 0.0
    saturated: int = 0
    codes: list[Int32Array | None] = field(default_factory=list)  # block exponents: each tensor's codes' sum
    exponents: list[ExponentArray | None] = field(default_factory=list)  # ... and its shared exponents
    totals: list[Int32Array | None] = field(default_factory=list)  # each tensor's sum
    end: float = 0.0
    ended: bool = False
    accuracy: float = 0.0
    train_s: float = 0.0  # the iterations' wall time until this one's end (checks and evaluation excluded)
    want: list[tuple[Reduced, FloatArray | None]] | None = None  # per tensor, what the sums must be (once computed)

    def __post_init__(self) -> None:
        self.codes = [None] * self.tensors
        self.exponents = [None] * self.tensors
        self.totals = [None] * self.tensors


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
        self.tensors = len(digits_profile().tensors)
        self.exponent = uses_exponents(cfg)
        self.encoder = Encoder(cfg)
        self.reductions = digits_reductions(self.exponent)  # an iteration's, in order
        for op in ops.values():
            want = self.reductions[op.sequence % len(self.reductions)]
            if op.collective != CollectiveKind.ALL_REDUCE or op.members != tuple(range(self.n)) \
                    or op.elements != want.elements:
                sizes = ", ".join(str(r.elements) for r in self.reductions)
                raise ValueError(f"{op.key}: a train-digits graph{' with block exponents' if self.exponent else ''} "
                                 f"has only all-reduces of the world group of {sizes} elements in turn "
                                 f"(gradswitch.workload.generators.digits_graph), not this "
                                 f"{op.collective or op.kind} of {op.elements} on ranks {list(op.members)}")
        self.batches = Minibatches(cfg.seed, self.n)
        self.model = Model.initial(cfg.seed)
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

    def input(self, op: Op) -> Int32Array:
        r = self._reduction(op)
        if op.sequence % len(self.reductions) == 0:  # the iteration's first: its gradient
            start = time.monotonic()
            before = self.model.copy()  # the parameters this iteration's gradients come from
            mine, loss = self.batches.gradients(before, self.rank)
            self.iterations.append(_Iteration(len(self.iterations), start, before, mine, loss, self.tensors,
                                              comm_start=time.monotonic()))
        it = self._iteration(op)
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

    def finished(self, op: Op, output: Int32Array) -> None:
        it, r = self._iteration(op), self._reduction(op)
        if r.codes:
            it.codes[r.tensor] = output
            return
        it.totals[r.tensor] = output
        if not self._last(op):
            return
        self.model.step([self.encoder.decode(s) / self.n for s in self._sums(it)])
        it.end, it.ended = time.monotonic(), True
        self.train_s += it.end - it.start
        it.train_s = self.train_s
        it.accuracy = self.batches.accuracy(self.model)

    def _wanted(self, it: _Iteration) -> list[tuple[Reduced, FloatArray | None]]:
        """Per tensor, what every worker's gradient on the iteration's parameters sums to (their draws advance:
        computed once per iteration, in order)."""
        if it.want is None:
            assert it.before is not None and it.mine is not None
            grads = [it.mine if r == self.rank else self.batches.gradients(it.before, r)[0] for r in range(self.n)]
            it.want = [self.encoder.expected_of([g[j] for g in grads]) for j in range(self.tensors)]
        return it.want

    def expected(self, op: Op) -> Int32Array:
        """What the operation's sum must be: its tensor's codes' or values' of every worker's gradient on the
        iteration's parameters (operations are checked in order; the iteration's record at its last)."""
        if op.sequence != self.checked:
            raise RuntimeError(f"{op.key}: operation {op.sequence} checked out of order (next: {self.checked})")
        it, r = self._iteration(op), self._reduction(op)
        if it.before is None or (self._last(op) and not it.ended):
            raise RuntimeError(f"{op.key}: iteration {it.index} checked before it ended")
        want, _ = self._wanted(it)[r.tensor]
        self.checked += 1
        if r.codes:
            assert want.codes is not None
            return want.codes
        if not self._last(op):
            return want.total
        check = IterationCheck()
        for (w, ref), got in zip(self._wanted(it), self._sums(it), strict=True):
            check.add(self.encoder, got, w, ref)
        check.saturated = it.saturated
        self.records.append(IterationRecord(
            it.index, it.start, it.end, check.wrong == 0, check.wrong, check.err, check.saturated,
            {"accuracy": it.accuracy, "loss": it.loss, "relative_error": check.relative_error,
             "comm_s": it.end - it.comm_start, "train_s": it.train_s},
            check=CheckKind.EXACT))
        it.before = it.mine = it.want = None  # checked: keep no copies
        it.codes, it.exponents, it.totals = [], [], []
        return want.total

    def report(self) -> SourceReport:
        return SourceReport([iteration_entry(r) for r in self.records], {"model_digest": self.model.digest()})
