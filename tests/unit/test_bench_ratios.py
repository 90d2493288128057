"""The benchmarks' ratios from repeated runs (bench/training.py, bench/dlcp.py): the ratio of two
runs' medians with its min and max, machine-bound runs marked, from compare summaries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import dlcp as bench_dlcp
from bench import training as bench_training


def run(samples: list[float], machine_bound: bool = False, **extra: Any) -> dict[str, Any]:
    """A compare summary entry of a run whose repetitions gave these samples/s."""
    ordered = sorted(samples)
    mid = ordered[len(ordered) // 2]
    return {"samples_per_s_real": mid, "machine_bound": machine_bound, "headline_repetitions": len(samples),
            "repetitions_done": len(samples), "machine_bound_repetitions": [],
            "spread": {"samples_per_s_real": {"min": ordered[0], "median": mid, "max": ordered[-1],
                                              "n": len(samples)}}, **extra}


def test_a_ratio_of_repeated_runs_has_its_range_and_says_when_it_is_no_headline(capsys):
    nr, ring = run([150.0, 160.0, 170.0], busiest_link_load=0.9, cpu_idle=0.4), run([100.0, 110.0, 120.0])
    row = bench_training.compared("NetReduce / ring (fifo)", nr, ring, model="vgg16", topo="rack")
    assert row["ratio"] == pytest.approx(160 / 110)
    assert (row["ratio_min"], row["ratio_max"]) == (pytest.approx(150 / 120), pytest.approx(170 / 100))
    assert row["headline"] is True and row["repetitions"] == [3, 3]
    bound = bench_training.compared("PS / ring (fifo)", run([50.0], machine_bound=True), ring, model="vgg16",
                                    topo="rack")
    assert bound["headline"] is False
    missing = bench_training.compared("PS / ring (fifo)", {}, ring, model="vgg16", topo="rack")
    assert missing["ratio"] is None
    bench_training._print_ratios([row, bound, missing])
    out = capsys.readouterr().out
    assert "vgg16, rack: NetReduce / ring (fifo)" in out and "1.45 [1.25, 1.70]" in out
    assert out.count("(machine-bound: not a headline)") == 1
    assert bench_training._spread(nr, "samples_per_s_real", 24).strip() == "160.0 [150.0, 170.0]"


def test_the_benchmarks_run_their_specs_with_the_repetitions_asked_for(monkeypatch, tmp_path: Path):
    seen: list[tuple[str, int]] = []

    def fake_compare(spec: Any, out: Path, *args: Any, **kw: Any) -> dict[str, Any]:
        seen.append((spec.name, spec.repeat))
        return {r.label: run([100.0 + i]) for i, r in enumerate(spec.runs)}

    monkeypatch.setattr(bench_dlcp, "run_compare", fake_compare)
    rows = bench_dlcp.tensorlights(tmp_path, repeat=5)
    assert seen == [("tensorlights", 5)] and set(rows) >= {"tensorlights", "tensorlights-2jobs"}
    monkeypatch.setattr(bench_training, "run_compare", fake_compare)
    figures = bench_training.dlcp(tmp_path, repeat=None)
    assert seen[1:] == [("dlcp-contention", 5), ("dlcp-spray", 5)]  # the specs' own repeat
    contention = figures["dlcp-contention"]
    # the fake runs' samples/s grow in spec order: baseline-class (101) beats baseline-fifo (100)
    assert contention["best_baseline"] == "baseline-class" and {r["what"].split(" / ")[0] for r in
                                                                contention["ratios"]} \
        == {"drop", "priority", "priority+drop", "priority+drop+spray", "alone"}
    spray = {r["what"].split(" / ")[0]: r["baseline"] for r in figures["dlcp-spray"]["ratios"]}
    assert spray["random-spray"] == "random-ecmp" and spray["leaves-flowlet"] == "leaves-ecmp"  # the same placement


def test_learning_is_measured_by_time_to_accuracy_against_the_best_baseline(monkeypatch, tmp_path: Path, capsys):
    times = {"baseline-fifo": [9.0, 10.0, 11.0], "baseline-class": [5.0, 6.0, 7.0], "dlcp-drop": [6.0, 6.5, 8.0],
             "dlcp-priority+drop": [5.5, 6.0, 6.5]}

    def entry(values: list[float]) -> dict[str, Any]:
        ordered = sorted(values)
        return {"time_to_accuracy_s": ordered[1], "median_s": 0.2, "machine_bound": False, "headline_repetitions": 3,
                "repetitions_done": 3, "spread": {
                    "time_to_accuracy_s": {"min": ordered[0], "median": ordered[1], "max": ordered[2], "n": 3},
                    "median_s": {"min": 0.2, "median": 0.2, "max": 0.2, "n": 3}}}

    monkeypatch.setattr(bench_training, "run_compare", lambda spec, *a, **kw: {r.label: entry(times[r.label])
                                                                                 for r in spec.runs})
    got = bench_training.learning(tmp_path, repeat=None)
    assert got["best_baseline"] == "baseline-class"  # the shorter time to accuracy
    ratios = {r["what"].split(" / ")[0]: r for r in got["ratios"]}
    assert ratios["dlcp-drop"]["ratio"] == pytest.approx(6.5 / 6.0)
    assert (ratios["dlcp-drop"]["ratio_min"], ratios["dlcp-drop"]["ratio_max"]) == (
        pytest.approx(6.0 / 7.0), pytest.approx(8.0 / 5.0))
    assert "dlcp-drop / baseline-class: time to 90 % test accuracy" in capsys.readouterr().out
