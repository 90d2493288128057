"""bench/engines_sim.py's judgement of a run whose figure its loss events set (a Sweep): the graph engine's median
samples/s within the loop's [min, max] over the sweep, the same outcome at every rate; within 1 % of the loop's
median is reported beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.engines_sim import SWEPT, judge_sweep


def runs(*rates: float, outcome: str = "ok") -> list[dict[str, Any]]:
    return [{"samples_per_s_real": r, "outcome": outcome} for r in rates]


def test_a_graph_median_inside_the_loops_range_agrees() -> None:
    j = judge_sweep(runs(93.66, 93.66, 93.66, 94.42, 93.0), runs(92.11, 93.11, 94.18, 93.11, 93.7))
    assert j["agrees"] and j["graph_median_in_loop_range"] and j["same_outcomes"]
    assert j["graph_samples_per_s"]["median"] == 93.11
    assert j["loop_samples_per_s"] == {"min": 93.0, "median": 93.66, "max": 94.42, "n": 5}
    assert j["graph_median_over_loop_median"] == pytest.approx(93.11 / 93.66)
    assert j["within_1pct_of_loop_median"]


def test_a_graph_median_outside_the_loops_range_misses_even_within_1pct() -> None:
    j = judge_sweep(runs(93.66, 93.66, 93.66), runs(93.11, 93.11, 92.11))
    assert not j["agrees"] and not j["graph_median_in_loop_range"]
    assert j["within_1pct_of_loop_median"]  # reported, not what decides


def test_another_outcome_at_one_rate_misses() -> None:
    loop = runs(90.0, 91.0, 92.0, outcome="check_failed")
    graph = runs(90.0, 91.0, 92.0, outcome="check_failed")
    assert judge_sweep(loop, graph)["agrees"]
    graph[1]["outcome"] = "ok"
    j = judge_sweep(loop, graph)
    assert not j["agrees"] and not j["same_outcomes"]


def test_a_failed_run_misses_and_unequal_sweeps_are_refused() -> None:
    assert judge_sweep(runs(1.0, 2.0), [{"error": "RunError: x"}, *runs(2.0)]) == {
        "agrees": False, "why": "a run without samples/s (failed)"}
    with pytest.raises(ValueError, match="1 loop and 2 graph runs"):
        judge_sweep(runs(1.0), runs(1.0, 2.0))


def test_every_sweep_starts_at_the_specs_own_rate() -> None:
    for sweep in SWEPT.values():
        assert sweep.factors[0] == 1.0 and len(set(sweep.factors)) == len(sweep.factors) >= 3


def test_every_swept_run_is_a_valid_spec_at_every_rate() -> None:
    from bench.engines_sim import dlcp_drop_runs

    specs = {s.label: s for s in dlcp_drop_runs((8, 16))}
    assert set(SWEPT) <= set(specs)  # a sweep names a run the benchmark has
    for label, sweep in SWEPT.items():
        spec = specs[label]
        assert spec.network.bw_mbps is not None and spec.dilation is not None
        for factor in sweep.factors:
            at = spec.but(bw_mbps=spec.network.bw_mbps * factor)
            assert at.problems() == [], (label, factor)
            assert at.dilation == pytest.approx(spec.dilation / factor)  # the dilation undoes the rate


def test_a_merge_replaces_its_rows_stamped_and_keeps_the_files_own_version(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import common, engines_sim

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(engines_sim, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "toolchain", lambda level="info": {"bmv2": {"logging_macros": False}})

    def row(run: str, ratio: float, agrees: bool) -> dict[str, Any]:
        return {"study": "dlcp-drop", "run": run, "graph_over_loop": ratio, "agrees": agrees, "same_bytes": False}

    monkeypatch.setattr(engines_sim, "code_version", lambda: "0.1.0+old")
    engines_sim.write(engines_sim.NAME, [row("a", 0.98, False), row("b", 1.0, True)])
    monkeypatch.setattr(engines_sim, "code_version", lambda: "0.1.0+new")
    engines_sim.write("partial", [row("a", 0.995, True)])
    monkeypatch.setattr(engines_sim, "code_version", lambda: "0.1.0+merging")
    engines_sim.merge("partial")
    doc = json.loads((tmp_path / f"{engines_sim.NAME}.json").read_text())
    assert doc["summary"]["code_version"] == "0.1.0+old"  # a merge measures nothing
    assert doc["summary"]["agree"] == 2 and doc["summary"]["graph_over_loop_min"] == 0.995
    merged = {r["run"]: r for r in doc["rows"]}
    assert merged["a"]["code_version"] == "0.1.0+new" and merged["a"]["graph_over_loop"] == 0.995
    assert "code_version" not in merged["b"]  # untouched
