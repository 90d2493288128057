"""A job's gradients through an int32 all-reduce, and the exact result every worker expects.

int32 gradients are summed as they are; float32 ones are converted by the job's float mode
(gradswitch/workload/floats.py). In `exponent` mode every tensor is preceded, in the job's profile, by its
tensor of exponent codes: logical tensor j is all-reduced at profile indices 2j (codes) and
2j+1 (values); otherwise at index j. Every algorithm (ring, PS, NetReduce) moves both the same
way, so the mode is the workers' business only: the switches just add int32 values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.floats import BlockExponent, ExponentArray, FixedPoint, FloatArray, Int32Array
from gradswitch.workload.gradients import Profile, Tensor, float_gradient, int_gradient, workload
from gradswitch.workload.job import DType, FloatMode, JobConfig

AllReduce = Callable[[int, int, Int32Array], Int32Array]  # (iteration, profile index, int32 data) -> sum


def uses_exponents(cfg: JobConfig) -> bool:
    return cfg.dtype == DType.FLOAT32 and cfg.float_mode == FloatMode.EXPONENT


def with_exponents(profile: Profile, codec: BlockExponent) -> Profile:
    """Each tensor preceded by its exponent codes (never droppable: they scale the whole tensor)."""
    tensors: list[Tensor] = []
    for t in profile.tensors:
        tensors += [Tensor(f"{t.name}.exponents", codec.blocks(t.elements), "exponents"), t]
    return Profile(profile.model, profile.source, tuple(tensors))


def job_profile(cfg: JobConfig, base: Profile | None = None) -> Profile:
    """The tensors a job's all-reduce moves, in order (a model's, or `base`, plus exponent codes)."""
    profile = base or workload(cfg.workload, cfg.size_bytes, cfg.scale)
    return with_exponents(profile, BlockExponent(len(cfg.workers), cfg.exponent_floor)) if uses_exponents(cfg) \
        else profile


@dataclass
class Reduced:
    """One tensor's all-reduce as a worker saw it."""

    total: Int32Array  # the int32 sum received
    codes: Int32Array | None = None  # exponent mode: the sum of the exponent codes received
    exponents: ExponentArray | None = None  # exponent mode: the shared exponents derived from it
    saturated: int = 0  # values this worker had to clip


@dataclass
class Check:
    correct: bool
    wrong_elements: int
    max_abs_error: float  # float32 only: against the float64 sum
    saturated: int = 0


@dataclass
class IterationCheck:
    """One iteration's results against the exact sums, tensor by tensor."""

    wrong: int = 0  # wrong elements (and exponent codes)
    err: float = 0.0  # float32: the largest error against the float64 sum
    saturated: int = 0  # values this worker had to clip
    diff2: float = 0.0  # squared error and squared norm of the sums, for the relative error
    norm2: float = 0.0
    checked: int = 0  # tensors checked

    def add(self, encoder: Encoder, got: Reduced, want: Reduced, reference: FloatArray | None) -> Check:
        got_v, want_v = encoder.values(got), encoder.values(want)
        c = encoder.check(got, want, reference, got_v)
        self.wrong += c.wrong_elements
        self.err = max(self.err, c.max_abs_error)
        self.saturated += c.saturated
        self.diff2 += float(np.sum((got_v - want_v) ** 2))
        self.norm2 += float(np.sum(want_v**2))
        self.checked += 1
        return c

    @property
    def relative_error(self) -> float:
        return (self.diff2 / self.norm2) ** 0.5 if self.norm2 else 0.0

    def correct(self, dlcp: DlcpPolicy | None) -> bool:
        """Exact; or, with DLCP's dropping (trimmed packets read as zeros by design), within the job's
        error bound."""
        if self.wrong == 0:
            return True
        return dlcp is not None and dlcp.drop and self.relative_error <= dlcp.max_relative_error


class Encoder:
    """Converts a job's gradients to int32, runs the all-reduce(s) of one tensor, converts back."""

    def __init__(self, cfg: JobConfig) -> None:
        self.cfg = cfg
        n = len(cfg.workers)
        self.fixed = FixedPoint(cfg.fixed_point_bits, n)
        self.block = BlockExponent(n, cfg.exponent_floor)
        self.exponent = uses_exponents(cfg)

    def index(self, j: int) -> int:
        """Profile index of logical tensor j's values."""
        return 2 * j + 1 if self.exponent else j

    def gradient(self, elements: int, rank: int, iteration: int, j: int) -> Int32Array | FloatArray:
        """Worker `rank`'s gradient of logical tensor j (int32, or float32 held as float64)."""
        if self.cfg.dtype == DType.INT32:
            return int_gradient(elements, self.cfg.seed, rank, iteration, j)
        return float_gradient(elements, self.cfg.seed, rank, iteration, j)

    def first_wire(self, x: Int32Array | FloatArray) -> tuple[Int32Array, int]:
        """What a tensor sends first, and how many values were clipped: int32 as it is, fixed point
        values, or (exponent mode) the tensor's exponent codes."""
        if self.cfg.dtype == DType.INT32:
            return x.astype(np.int32), 0
        xf = np.asarray(x, dtype=np.float64)
        if not self.exponent:
            return self.fixed.encode(xf)
        return self.block.codes(xf), 0

    def magnitude_values(self, x: Int32Array | FloatArray) -> Int32Array:
        """The int32 values a tensor contributes, for DLCP's magnitude thresholds (gradswitch/workload/dlcp.py): what
        it sends (int32, fixed point); in exponent mode its values scaled by its own block exponents (the
        shared ones, known only after the codes' all-reduce, are at least as large)."""
        if self.cfg.dtype == DType.INT32:
            return x.astype(np.int32)
        xf = np.asarray(x, dtype=np.float64)
        if not self.exponent:
            return self.fixed.encode(xf)[0]
        return self.block.encode(xf, self.block.exponents(self.block.codes(xf)))[0]

    def values_wire(self, x: Int32Array | FloatArray, codes: Int32Array) -> tuple[Int32Array, ExponentArray, int]:
        """Exponent mode: the values to send once the codes' sum is known, the shared exponents, clipped values."""
        exponents = self.block.exponents(codes)
        ints, saturated = self.block.encode(np.asarray(x, dtype=np.float64), exponents)
        return ints, exponents, saturated

    def reduce(self, allreduce: AllReduce, iteration: int, j: int, x: Int32Array | FloatArray) -> Reduced:
        first, saturated = self.first_wire(x)
        if not self.exponent:
            return Reduced(allreduce(iteration, self.index(j), first), saturated=saturated)
        codes = allreduce(iteration, 2 * j, first)
        ints, exponents, saturated = self.values_wire(x, codes)
        return Reduced(allreduce(iteration, 2 * j + 1, ints), codes, exponents, saturated)

    def values(self, r: Reduced) -> FloatArray:
        """The sum as numbers: int32 as they are, float32 decoded."""
        return r.total.astype(np.float64) if self.cfg.dtype == DType.INT32 else self.decode(r)

    def decode(self, r: Reduced) -> FloatArray:
        if r.exponents is not None:
            return self.block.decode(r.total, r.exponents)
        return self.fixed.decode(r.total)

    def expected(self, elements: int, ranks: list[int], iteration: int, j: int) -> tuple[Reduced, FloatArray | None]:
        """What every worker must receive for logical tensor j, computed locally from all workers'
        gradients, and (float32) the float64 reference sum."""
        return self.expected_of([self.gradient(elements, r, iteration, j) for r in ranks])

    def expected_of(self, xs: Sequence[Int32Array | FloatArray]) -> tuple[Reduced, FloatArray | None]:
        """What the all-reduce of these gradients (one per worker) must give, and (float32) their
        float64 sum."""
        if self.cfg.dtype == DType.INT32:
            return Reduced(_sum([x.astype(np.int32) for x in xs])), None
        fs = [np.asarray(x, dtype=np.float64) for x in xs]
        reference: FloatArray = np.sum(np.stack(fs), axis=0)
        if not self.exponent:
            return Reduced(_sum([self.fixed.encode(x)[0] for x in fs])), reference
        codes = _sum([self.block.codes(x) for x in fs])
        exponents = self.block.exponents(codes)
        return Reduced(_sum([self.block.encode(x, exponents)[0] for x in fs]), codes, exponents), reference

    def check(self, got: Reduced, want: Reduced, reference: FloatArray | None,
              got_values: FloatArray | None = None) -> Check:
        """`got_values`: `values(got)` when the caller has it already (float32: decoded once)."""
        wrong = int(np.count_nonzero(got.total != want.total))
        if want.codes is not None and got.codes is not None:
            wrong += int(np.count_nonzero(got.codes != want.codes))
        err = 0.0
        if reference is not None and len(got.total):
            values = got_values if got_values is not None else self.decode(got)
            err = float(np.max(np.abs(values - reference)))
        return Check(wrong == 0, wrong, err, got.saturated)


def _sum(arrays: list[Int32Array]) -> Int32Array:
    total = np.zeros(len(arrays[0]), dtype=np.int64)
    for a in arrays:
        total += a
    return total.astype(np.int32)
