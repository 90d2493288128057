"""What checking an output costs on this host, learnt from the checks done: the training loop and the graph
engine check outputs only while the emulated GPU computes and only when the check is expected to end before
the computation does (a host busy past it answers its peers late)."""

from __future__ import annotations

from dataclasses import dataclass

FIRST_S_PER_VALUE = 1e-8  # a first check's guessed cost per value (measured: 2-3 ns here, idle; more when loaded)


@dataclass
class CheckCost:
    """What checking an output costs on this host, per value made or compared (every member's input and the
    output): learnt from the checks done, the last one's rate but never under half the estimate before it (one
    fast check on an idle moment does not make the next one look cheap)."""

    per_value_s: float = FIRST_S_PER_VALUE

    def estimate_s(self, values: int) -> float:
        return values * self.per_value_s

    def record(self, values: int, seconds: float) -> None:
        self.per_value_s = max(seconds / max(1, values), self.per_value_s / 2)
