"""What every rank puts into a collective and what it must get out, so each checks its own output.

A rank's input to a communication operation is int32, deterministic from (job seed, operation, rank):
the operation is the k-th collective of a process group, or the k-th send between two ranks with one
tag (executor.OpKey), which every member numbers alike. Values lie within +-2^15, so a sum over up to
2^16 ranks is exact in int32. The check compares every element of the output with the expectation
computed here from every member's input (numpy, whatever the size).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from gradswitch.hosts.collectives.schedule import chunk_bounds
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import CollectiveKind

VALUE_RANGE = 1 << 16


def elements_of(nbytes: int) -> int:
    """int32 elements that carry `nbytes` (a size that is not a multiple of 4 is rounded up)."""
    return max(1, -(-nbytes // 4))


def input_of(seed: int, op: str, rank: int, elements: int) -> Int32Array:
    """Rank `rank`'s input to operation `op` (an OpKey's text): a different affine sequence per
    (seed, op, rank), modulo VALUE_RANGE, centred on 0: (i x step + start) mod 2^16 - 2^15.

    Computed in uint32, whose wrap-around leaves the residue mod 2^16 intact, with a mask for the
    modulo: an order of magnitude faster than int64 arithmetic (a rank makes its input as the
    operation starts, while its other operations' packets wait, and checks every member's)."""
    digest = hashlib.blake2b(f"{seed}/{op}/{rank}".encode(), digest_size=8).digest()
    h = int.from_bytes(digest, "big")
    step = 2 * (h % 9973) + 1
    start = (h >> 20) % VALUE_RANGE
    values = np.arange(elements, dtype=np.uint32)
    values *= np.uint32(step)
    values += np.uint32(start)
    values &= np.uint32(VALUE_RANGE - 1)
    out: Int32Array = values.view(np.int32)
    out -= VALUE_RANGE // 2
    return out


def _sum(parts: Sequence[Int32Array]) -> Int32Array:
    """Element-wise sum, exact in int32: values within +-2^15 over at most 2^16 members."""
    out = np.array(parts[0], dtype=np.int32)
    for x in parts[1:]:
        out += x
    return out


def expected(kind: CollectiveKind, inputs: Sequence[Int32Array], p: int, root: int = 0) -> Int32Array:
    """Member p's output of a collective whose members' inputs are `inputs` (in group order);
    `root`: broadcast's root position."""
    n = len(inputs)
    out: Int32Array
    if kind == CollectiveKind.ALL_REDUCE:
        return _sum(inputs)
    if kind == CollectiveKind.REDUCE_SCATTER:
        lo, hi = chunk_bounds(len(inputs[0]), n)[p]
        return _sum([x[lo:hi] for x in inputs])
    if kind == CollectiveKind.ALL_GATHER:
        return np.concatenate(list(inputs)).astype(np.int32)
    if kind == CollectiveKind.ALL_TO_ALL:
        lo, hi = chunk_bounds(len(inputs[0]), n)[p]
        return np.concatenate([x[lo:hi] for x in inputs]).astype(np.int32)
    if kind == CollectiveKind.BROADCAST:
        out = np.array(inputs[root], dtype=np.int32)
        return out
    raise ValueError(f"collective {kind!r}: no expected output")


def wrong_elements(got: Int32Array, want: Int32Array) -> int:
    """Elements that differ (every element compared); a length mismatch counts the longer's excess."""
    n = min(len(got), len(want))
    return int(np.count_nonzero(got[:n] != want[:n])) + abs(len(got) - len(want))
