"""bench/training_graph.py's judgement of a graph-engine run against the training loop's runs of the same day and
the table's figure: the median over the repetitions that were exact and not machine-bound, and whether its range
overlaps the loop's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.common import RESULTS
from bench.training_graph import SPEC, result_name, runs, speedups, summary
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.training_graph import ideal_link_load


def rep(samples: float, machine_bound: bool = False, checked: bool = True) -> dict[str, Any]:
    return {"samples_per_s_real": samples, "machine_bound": machine_bound, "checked": checked}


def loop_table(label: str, lo: float, mid: float, hi: float) -> dict[str, Any]:
    return {"runs": {label: {"spread": {"samples_per_s_real": {"min": lo, "median": mid, "max": hi, "n": 3}}}}}


def test_the_runs_are_the_speedup_specs_rack_fifo_pairs() -> None:
    specs = runs(["resnet50", "bert-base"])
    assert [s.label for s in specs] == ["resnet50-rack-ring-fifo", "resnet50-rack-netreduce-fifo",
                                        "bert-base-rack-ring-fifo", "bert-base-rack-netreduce-fifo"]
    assert SPEC.exists() and all(s.workload.emulate is not None and s.dilation == pytest.approx(4.0) for s in specs)


def test_machine_bound_and_wrong_repetitions_are_left_out_and_the_ranges_compared() -> None:
    spec = runs(["resnet50"])[0]
    table = loop_table(spec.label, 100.0, 101.0, 102.0)
    today = [rep(80.0), rep(85.0, machine_bound=True), rep(90.0)]
    row = summary(spec, [rep(99.0), rep(101.5), rep(50.0, machine_bound=True), rep(200.0, checked=False)], today,
                  table)
    assert row["usable"] == 2 and not row["exact"] and row["loop_usable"] == 2 and row["loop_exact"]
    assert row["samples_per_s_real"] == {"min": 99.0, "median": 100.25, "max": 101.5, "n": 2}
    assert row["over_loop"] == pytest.approx(100.25 / 101.0)
    assert row["within_spread"]  # [99, 101.5] overlaps [100, 102]
    assert row["samples_per_s_real_loop_today"] == {"min": 80.0, "median": 85.0, "max": 90.0, "n": 2}
    assert row["over_loop_today"] == pytest.approx(100.25 / 85.0) and not row["within_spread_today"]
    assert row["loop_today_over_table"] == pytest.approx(85.0 / 101.0)
    below = summary(spec, [rep(90.0), rep(95.0), rep(99.9)], today, table)
    assert not below["within_spread"] and below["exact"] and below["within_spread_today"]  # [90, 99.9] and [80, 90]
    none = summary(spec, [rep(90.0, machine_bound=True)], [rep(90.0, machine_bound=True)], table)
    assert none["usable"] == 0 and "samples_per_s_real" not in none and "within_spread" not in none
    assert none["loop_usable"] == 0 and "samples_per_s_real_loop_today" not in none
    assert "over_loop_today" not in none


def test_graph_runs_are_judged_against_the_ideal_link_load_the_loops_report_gives() -> None:
    """The graph engine's repetitions are machine-bound by the loop's rule: the busiest link under 0.8 of the ideal
    iteration's load, which the loop's results (training-speedup.json) give per run."""
    table = json.loads((RESULTS / "training-speedup.json").read_text())["speedup"]["runs"]
    for spec in runs(["resnet50", "vgg16", "bert-base"]):
        assert ideal_link_load(spec, topology_for(spec)) == pytest.approx(table[spec.label]["ideal_link_load"])


def test_another_rate_keeps_the_emulated_cluster_and_writes_its_own_file() -> None:
    at_20, at_10 = runs(["vgg16"]), runs(["vgg16"], 10.0)
    assert [s.network.bw_mbps for s in at_10] == [10.0, 10.0]
    assert at_10[0].dilation == pytest.approx(8.0) and at_20[0].dilation == pytest.approx(4.0)
    assert result_name(at_20) == "training-graph" and result_name(at_10) == "training-graph-10mbps"


def test_speed_ups_per_model_and_topology_beside_the_tables() -> None:
    """NetReduce / ring per model and topology: the graph engine's and the loop's of the day where both runs had
    usable repetitions (medians, and the extremes crossed), always the table's."""
    specs = runs(["resnet50"], 10.0, ("rack", "leafspine"))
    assert [s.label for s in specs] == ["resnet50-rack-ring-fifo", "resnet50-rack-netreduce-fifo",
                                        "resnet50-leafspine-ring-fifo", "resnet50-leafspine-netreduce-fifo"]
    assert result_name(specs) == "training-graph-rack-leafspine-10mbps"
    table_ratios = (("rack", 1.34), ("leafspine", 1.19))
    table = {"runs": {s.label: loop_table(s.label, 99.0, 100.0, 101.0)["runs"][s.label] for s in specs},
             "ratios": [{"model": "resnet50", "topo": t, "what": "NetReduce / ring (fifo)", "ratio": r,
                         "ratio_min": r - 0.01, "ratio_max": r + 0.01} for t, r in table_ratios]}
    fast, slow = [rep(130.0), rep(132.0), rep(134.0)], [rep(100.0), rep(98.0), rep(102.0)]
    rows = [summary(specs[0], slow, slow, table), summary(specs[1], fast, [rep(1.0, machine_bound=True)], table),
            summary(specs[2], slow, slow, table), summary(specs[3], fast, fast, table)]
    rack, leafspine = speedups(rows, table)
    assert (rack["topo"], leafspine["topo"]) == ("rack", "leafspine")
    assert rack["ratio"] == pytest.approx(1.32) and rack["ratio_min"] == pytest.approx(130.0 / 102.0)
    assert rack["ratio_max"] == pytest.approx(134.0 / 98.0) and rack["loop_ratio"] == 1.34
    assert "loop_today_ratio" not in rack  # the loop's NetReduce runs were all machine-bound
    assert leafspine["loop_today_ratio"] == pytest.approx(1.32) and leafspine["loop_ratio"] == 1.19


def test_priority_runs_are_paired_with_the_tables_priority_ratio() -> None:
    """--scheduling priority: the table's priority runs, their own file, NetReduce / ring against the table's
    priority ratio (not its FIFO one), FIFO and priority apart when both run."""
    specs = runs(["bert-base"], 10.0, ("rack",), ("fifo", "priority"))
    assert [s.label for s in specs] == ["bert-base-rack-ring-fifo", "bert-base-rack-netreduce-fifo",
                                        "bert-base-rack-ring-priority", "bert-base-rack-netreduce-priority"]
    assert all(str(s.algorithm.scheduling) == s.label.rsplit("-", 1)[1] for s in specs)
    assert result_name(specs) == "training-graph-fifo-priority-10mbps"
    assert result_name(runs(["bert-base"], 10.0, ("rack",), ("priority",))) == "training-graph-priority-10mbps"
    table = {"runs": {s.label: loop_table(s.label, 99.0, 100.0, 101.0)["runs"][s.label] for s in specs},
             "ratios": [{"model": "bert-base", "topo": "rack", "what": f"NetReduce / ring ({k})", "ratio": r,
                         "ratio_min": r, "ratio_max": r} for k, r in (("fifo", 1.36), ("priority", 1.32))]}
    slow, fast, faster = [rep(100.0)], [rep(130.0)], [rep(140.0)]
    rows = [summary(specs[0], slow, slow, table), summary(specs[1], fast, fast, table),
            summary(specs[2], slow, slow, table), summary(specs[3], faster, faster, table)]
    fifo, prio = speedups(rows, table)
    assert (fifo["scheduling"], fifo["ratio"], fifo["loop_ratio"]) == ("fifo", pytest.approx(1.3), 1.36)
    assert (prio["scheduling"], prio["ratio"], prio["loop_ratio"]) == ("priority", pytest.approx(1.4), 1.32)
