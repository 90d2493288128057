"""Figures over repetitions or seeds: the one `spread` that compare's summaries, the simulator studies and the
benchmarks write into their JSON."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def spread(values: Iterable[float]) -> dict[str, float]:
    """`{"min", "median", "max", "n"}` of some values (none: ValueError, as min() raises)."""
    got = list(values)
    if not got:
        raise ValueError("spread of no values")
    return {"min": min(got), "median": statistics.median(got), "max": max(got), "n": len(got)}


def spread_known(values: Iterable[float | None]) -> dict[str, float] | None:
    """The spread of the values that are known (not None); None when none is."""
    got = [v for v in values if v is not None]
    return spread(got) if got else None
