"""bench/training_graph.py's judgement of a graph-engine run against the training loop's figure: the median over
the repetitions that were exact and not machine-bound, and whether its range overlaps the loop's."""

from __future__ import annotations

from typing import Any

import pytest

from bench.training_graph import SPEC, runs, summary


def rep(samples: float, machine_bound: bool = False, checked: bool = True) -> dict[str, Any]:
    return {"samples_per_s_real": samples, "machine_bound": machine_bound, "checked": checked}


def loop_table(label: str, lo: float, mid: float, hi: float) -> dict[str, Any]:
    return {"runs": {label: {"spread": {"samples_per_s_real": {"min": lo, "median": mid, "max": hi, "n": 3}}}}}


def test_the_runs_are_the_speedup_specs_rack_fifo_pairs() -> None:
    specs = runs(["resnet50", "bert-base"])
    assert [s.label for s in specs] == ["resnet50-rack-ring-fifo", "resnet50-rack-netreduce-fifo",
                                        "bert-base-rack-ring-fifo", "bert-base-rack-netreduce-fifo"]
    assert SPEC.exists() and all(s.emulate is not None and s.dilation == pytest.approx(4.0) for s in specs)


def test_machine_bound_and_wrong_repetitions_are_left_out_and_the_ranges_compared() -> None:
    spec = runs(["resnet50"])[0]
    table = loop_table(spec.label, 100.0, 101.0, 102.0)
    row = summary(spec, [rep(99.0), rep(101.5), rep(50.0, machine_bound=True), rep(200.0, checked=False)], table)
    assert row["usable"] == 2 and not row["exact"]
    assert row["samples_per_s_real"] == {"min": 99.0, "median": 100.25, "max": 101.5}
    assert row["over_loop"] == pytest.approx(100.25 / 101.0)
    assert row["within_spread"]  # [99, 101.5] overlaps [100, 102]
    below = summary(spec, [rep(90.0), rep(95.0), rep(99.9)], table)
    assert not below["within_spread"] and below["exact"]
    none = summary(spec, [rep(90.0, machine_bound=True)], table)
    assert none["usable"] == 0 and "samples_per_s_real" not in none and "within_spread" not in none
