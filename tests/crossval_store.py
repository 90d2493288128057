"""Repetitions and stores of bench.crossval's graph parts, made by hand for the judging tests."""

from __future__ import annotations

from pathlib import Path

from bench.crossval_collectives import Store
from gradswitch.experiment.crossval import Repetition


def reps(*times: float, bound: tuple[int, ...] = ()) -> list[Repetition]:
    """Exact repetitions of these times, seeds 1, 2, ...; those at the indices `bound` machine-bound."""
    return [Repetition(i + 1, t, True, i in bound, "cpu" if i in bound else None) for i, t in enumerate(times)]


def store(tmp_path: Path, runs: dict[str, dict[str, list[Repetition]]]) -> Store:
    """A store under tmp_path holding runs[label][side]."""
    s = Store(tmp_path)
    for label, sides in runs.items():
        for side, rs in sides.items():
            for r in rs:
                s.add(label, side, r)
    return s
