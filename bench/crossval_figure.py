"""A figure of the cross-validation (bench.crossval and its parts): BMv2's value, ns-3's, and whether they agree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TOLERANCE = 0.10  # |ns-3 / BMv2 - 1| at most this, per figure
MIN_REPETITIONS = 3  # BMv2 repetitions that were not machine-bound, at least, for a judged pair


@dataclass(frozen=True)
class Figure:
    what: str
    bmv2: float | None
    ns3: float | None
    usable: bool  # the BMv2 side has MIN_REPETITIONS repetitions that were not machine-bound

    @property
    def error(self) -> float | None:
        return self.ns3 / self.bmv2 - 1 if self.bmv2 and self.ns3 is not None else None

    @property
    def within(self) -> bool | None:
        """Within TOLERANCE (None: not judged)."""
        return None if self.error is None or not self.usable else abs(self.error) <= TOLERANCE

    def row(self) -> dict[str, Any]:
        return {"what": self.what, "bmv2": self.bmv2, "ns3": self.ns3, "error": self.error, "usable": self.usable,
                "within": self.within}


def quotient(a: float | None, b: float | None) -> float | None:
    """a / b, or None where either is missing (or b is 0): the ratio figures of every part."""
    return a / b if a is not None and b else None
