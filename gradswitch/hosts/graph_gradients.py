"""The loop's float32 gradients through a graph of all-reduces in a row (GraphJob payload `gradients`): the hosts' side
of gradswitch.workload.generators.plain_graph for a float32 job, so that its run reports the error of its sums against
the float64 sum (max_abs_error) as the loop without training does (gradswitch/hosts/loops.py).

Each iteration is the loop's all-reduces: one of the world group per tensor of the job's profile
(gradswitch/workload/encoding.py job_profile; with block exponents, each tensor's exponent codes, then its values), in
order. An operation's input is its tensor as the loop's encoder makes it of the rank's float32 gradient
(gradswitch/workload/gradients.py float_gradient, from the job's seed: the loop's values): fixed point, the codes, or
the values scaled by the shared exponents the codes' sum gave. Its check: the sum of every rank's encoded gradient,
element for element (and the codes' sum); and, for a tensor's values, the largest absolute error of the sum received,
decoded, against the float64 sum of the ranks' gradients (`float_error`, per operation: the iteration's
max_abs_error is the largest of its operations', gradswitch/workload/graph_iterations.py iteration_float_errors).

On a NetReduce job of k of N (fixed point only, as the loop's) a tensor's sum may hold fewer than N ranks, each
message naming its own: its check is against the sum of exactly those ranks' gradients, its error against their
float64 sum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.graph_data import (
    Contributors,
    SourceReport,
    check_all_reduces_in_turn,
    refuse_some_ranks_with_exponents,
)
from gradswitch.hosts.netreduce_quorum import held_mask
from gradswitch.workload.encoding import Encoder, Reduced, job_profile, uses_exponents
from gradswitch.workload.floats import ExponentArray, FloatArray
from gradswitch.workload.generators.plain import CODES_KIND
from gradswitch.workload.gradients import Int32Array, Tensor
from gradswitch.workload.job import DType, JobConfig


def gradients_problem(cfg: JobConfig) -> str | None:
    """Why a job's settings cannot carry the loop's float32 gradients on the graph engine (None: they can)."""
    if cfg.dtype != DType.FLOAT32:
        return "the gradients payload carries float32 gradients: dtype = float32"
    return None


HeldMask = npt.NDArray[np.bool_]  # per rank and element of a tensor: is that rank's value in its sum


@dataclass
class _Tensor:
    """One tensor of one iteration on this rank, until its values are checked: the shared exponents its codes' sum
    gave (block exponents), the ranks its sum holds (k of N), what its sum must be and the float64 reference."""

    exponents: ExponentArray | None = None
    held: HeldMask | None = None
    want: tuple[Reduced, FloatArray | None] | None = None


class GradientData:
    """A rank's data source (gradswitch/hosts/graph_data.py) for a float32 job's graph of all-reduces in a row."""

    def __init__(self, cfg: JobConfig, rank: int, ops: Mapping[int, Op]) -> None:
        problem = gradients_problem(cfg)
        if problem is not None:
            raise ValueError(problem)
        self.n = len(cfg.workers)
        self.rank = rank
        self.seed = cfg.seed
        self.exponent = uses_exponents(cfg)
        self.encoder = Encoder(cfg)
        self.tensors: tuple[Tensor, ...] = job_profile(cfg).tensors  # an iteration's all-reduces, in order
        check_all_reduces_in_turn(ops, self.n, [t.elements for t in self.tensors], "a float32 job's graph of "
                                  "all-reduces in a row", "gradswitch.workload.generators.plain_graph")
        self.state: dict[tuple[int, int], _Tensor] = {}  # (iteration, logical tensor) -> its state, until checked

    def _place(self, op: Op) -> tuple[int, int, bool]:
        """The operation's iteration, logical tensor (block exponents: profile index 2j its codes, 2j + 1 its
        values) and whether it carries that tensor's exponent codes."""
        iteration, p = divmod(op.sequence, len(self.tensors))
        return iteration, p // 2 if self.exponent else p, self.tensors[p].kind == CODES_KIND

    def _elements(self, j: int) -> int:
        return self.tensors[self.encoder.index(j)].elements

    def _gradient(self, rank: int, iteration: int, j: int) -> FloatArray:
        return np.asarray(self.encoder.gradient(self._elements(j), rank, iteration, j), dtype=np.float64)

    def _tensor(self, iteration: int, j: int) -> _Tensor:
        return self.state.setdefault((iteration, j), _Tensor())

    def input(self, op: Op) -> Int32Array:
        iteration, j, codes = self._place(op)
        x = self._gradient(self.rank, iteration, j)
        if codes:
            return self.encoder.block.codes(x)
        t = self._tensor(iteration, j)
        if self.exponent:  # the values, scaled by the exponents the codes' sum gave (finished, before this started)
            if t.exponents is None:
                raise RuntimeError(f"{op.key}: tensor {j}'s values started before its exponent codes' sum came")
            ints, _ = self.encoder.block.encode(x, t.exponents)
            return ints
        return self.encoder.fixed.encode(x)[0]

    def expected(self, op: Op) -> Int32Array:
        iteration, j, codes = self._place(op)
        want, _ = self._wanted(iteration, j)
        if codes:
            assert want.codes is not None
            return want.codes
        return want.total

    def _wanted(self, iteration: int, j: int) -> tuple[Reduced, FloatArray | None]:
        """What tensor j's sum must be, and the float64 sum of the ranks' gradients (k of N: of exactly the ranks
        its sum holds)."""
        t = self._tensor(iteration, j)
        if t.want is None:
            grads = [self._gradient(q, iteration, j) for q in range(self.n)]
            if t.held is not None:
                grads = [g * t.held[q] for q, g in enumerate(grads)]
            t.want = self.encoder.expected_of(grads)
        return t.want

    def contributed(self, ops: list[Op]) -> list[Int32Array]:
        """The iteration's tensors as this rank contributes them (DLCP's magnitude thresholds, the loop's
        Encoder.magnitude_values: fixed point as sent; block exponents, scaled by its own)."""
        out = []
        for op in ops:
            iteration, j, codes = self._place(op)
            if not codes:
                out.append(self.encoder.magnitude_values(self._gradient(self.rank, iteration, j)))
        return out

    def finished(self, op: Op, output: Int32Array, contributors: Contributors | None = None,
                 zero_filled: int = 0) -> None:
        iteration, j, codes = self._place(op)
        t = self._tensor(iteration, j)
        refuse_some_ranks_with_exponents(op, self.exponent, contributors)
        if contributors is not None:
            t.held = held_mask(contributors, self.n, len(output))
        if codes:
            t.exponents = self.encoder.block.exponents(output)
            return

    def float_error(self, op: Op, output: Int32Array) -> float | None:
        """A tensor's values: the largest absolute error of their sum received, decoded, against the float64 sum of
        the ranks' gradients (after `expected`: the tensor's check, its last); its codes: None."""
        iteration, j, codes = self._place(op)
        if codes:
            return None
        t = self.state.pop((iteration, j), _Tensor())
        want, reference = t.want if t.want is not None else self._wanted(iteration, j)
        if reference is None or len(output) != len(want.total):
            return None
        got = Reduced(output, None, t.exponents)
        return self.encoder.check(got, want, reference).max_abs_error

    def report(self) -> SourceReport:
        return SourceReport()
