"""float32 gradients through an int32 sum: a fixed scale, or a shared exponent per block.

The switches and the baselines only add int32 values, so float32 gradients are converted;
the job chooses how (JobConfig.float_mode, docs/netreduce.md "Floats"):

- `fixed`: x -> round(x * 2**bits), saturated to +-(2**31 - 1) // N so that a sum of N values
  cannot overflow; the sum s -> s / 2**bits. Error at most N * 2**-(bits+1) per element.
- `exponent` (SwitchML-style block floating point): every block of BLOCK values (one NetReduce
  packet's payload) is scaled by an exponent all workers share. The workers agree on it
  through the same int32 sum, in a small all-reduce before the values: worker w sends, per
  block, the code 2**(e_w - floor), where 2**e_w bounds its block's magnitudes (clamped to
  [floor, floor + window]); the sum S of N such codes satisfies 2**max(e_w) <= S <
  N * 2**max(e_w), so E = floor + floor(log2 S) bounds every worker's block and is known to
  all of them. Values are sent as round(x * 2**(B - E)) with B = 30 - ceil(log2 N), so N of
  them cannot overflow. The error is at most N/2 units of 2**(E - B) per element: relative to
  the block, not to a global scale. Only a block beyond floor + window saturates (counted).
  The price: one more all-reduce of N/BLOCK the size per tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gradswitch.protocol.p4_constants import CONFIG

Int32Array = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]
ExponentArray = npt.NDArray[np.int64]

BLOCK = CONFIG.AGG_ELEMENTS_PER_PACKET  # values per shared exponent: one NetReduce packet's payload


@dataclass(frozen=True)
class FixedPoint:
    bits: int
    workers: int

    @property
    def limit(self) -> int:
        return (2**31 - 1) // self.workers

    def encode(self, x: FloatArray) -> tuple[Int32Array, int]:
        """int32 fixed-point values and how many were saturated."""
        scaled = np.rint(x * float(2**self.bits))
        clipped = np.clip(scaled, -self.limit, self.limit)
        return clipped.astype(np.int32), int(np.count_nonzero(clipped != scaled))

    def decode(self, s: Int32Array) -> FloatArray:
        return s.astype(np.float64) / float(2**self.bits)

    @property
    def error_bound(self) -> float:
        """Largest error per element of an unsaturated sum of `workers` values."""
        return self.workers * 2.0 ** -(self.bits + 1)


@dataclass(frozen=True)
class BlockExponent:
    workers: int
    floor: int = -24  # smallest block exponent: blocks below 2**floor are scaled as if at it
    block: int = BLOCK

    @property
    def headroom(self) -> int:
        """Bits kept free so that a sum of `workers` values cannot overflow."""
        return max(0, math.ceil(math.log2(self.workers)))

    @property
    def value_bits(self) -> int:
        """B: a value at the block's bound 2**E is sent as 2**B."""
        return 30 - self.headroom

    @property
    def window(self) -> int:
        """Largest code exponent: N codes of 2**window still fit in int32."""
        return 30 - self.headroom

    def blocks(self, elements: int) -> int:
        return max(1, -(-elements // self.block))

    def _per_block(self, x: FloatArray) -> FloatArray:
        padded = np.zeros(self.blocks(len(x)) * self.block)
        padded[: len(x)] = x
        return padded.reshape(-1, self.block)

    def codes(self, x: FloatArray) -> Int32Array:
        """Per block, 2**(e - floor) where 2**e > the block's largest magnitude (clamped to the window)."""
        peak = np.max(np.abs(self._per_block(x)), axis=1)
        _, e = np.frexp(peak)  # peak < 2**e (e = 0 for a zero block)
        e = np.where(peak > 0, e, self.floor)
        codes: Int32Array = np.left_shift(1, np.clip(e - self.floor, 0, self.window)).astype(np.int32)
        return codes

    def exponents(self, code_sum: Int32Array) -> ExponentArray:
        """The shared exponent of every block, from the sum of all workers' codes."""
        s = np.maximum(code_sum.astype(np.int64), 1)  # a lost (zero-filled) code block: the floor
        return (self.floor + np.floor(np.log2(s))).astype(np.int64)

    def _scales(self, exponents: ExponentArray, elements: int) -> FloatArray:
        return np.repeat(np.ldexp(1.0, (self.value_bits - exponents).astype(np.int64)), self.block)[:elements]

    def encode(self, x: FloatArray, exponents: ExponentArray) -> tuple[Int32Array, int]:
        """int32 values scaled per block, and how many were saturated."""
        limit = (2**31 - 1) // self.workers
        scaled = np.rint(x * self._scales(exponents, len(x)))
        clipped = np.clip(scaled, -limit, limit)
        return clipped.astype(np.int32), int(np.count_nonzero(clipped != scaled))

    def decode(self, s: Int32Array, exponents: ExponentArray) -> FloatArray:
        return s.astype(np.float64) / self._scales(exponents, len(s))

    def error_bound(self, exponents: ExponentArray, elements: int) -> FloatArray:
        """Largest error per element of an unsaturated sum of `workers` values."""
        return self.workers * 0.5 / self._scales(exponents, elements)
