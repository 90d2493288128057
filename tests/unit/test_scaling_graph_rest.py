"""bench.scaling_graph_rest: the scaling study's points re-measured on the graph engine, judged against the loop's
published figures (bench/results/scaling.json) within 1 % and correct as the loop's; the published comparison is
judged by that rule."""

from __future__ import annotations

from typing import Any

from bench import scaling
from bench.common import RESULTS
from bench.scaling_graph_rest import NAME, TOLERANCE, Part, Published, part_runs, published, row
from gradswitch.experiment.spec import Engine
from gradswitch.experiment.tables.reading import engines_of, load


def graph_report(samples_per_s: float, iteration_s: float, correct: bool) -> dict[str, Any]:
    """The parts of a run's results.json bench.scaling.point reads."""
    return {"ok": True, "check": "digest", "summary": {"correct": correct},
            "training": {"samples_per_s_real": samples_per_s, "iteration_s_real": iteration_s},
            "spec": {"topo": "fattree", "k": 8}, "simulator": {"wall_s": 12.0},
            "headline_extra": {"busiest_link_load": 0.7}}


def test_the_parts_are_the_study_runs_not_yet_remeasured() -> None:
    dlcp = part_runs(Part.DLCP)
    assert [s.label for s in dlcp] == ["dlcp-baseline-class", "dlcp-priority"]
    assert not any(s.transport.dlcp.drop for s in dlcp)
    points = part_runs(Part.POINTS)
    assert {(s.network.workers, str(s.algorithm.algo)) for s in points} == {
        (32, "ps"), (64, "ps"), (32, "netreduce"), (64, "netreduce")}
    assert {str(s.network.topo) for s in points if str(s.algorithm.algo) == "netreduce"} == {"leafspine"}
    assert {s.network.bw_mbps for s in part_runs(Part.BANDWIDTH)} == set(scaling.BANDWIDTH_RATES_MBPS)
    assert {s.network.workers for s in part_runs(Part.N128)} == {128}
    every = [s for p in Part for s in part_runs(p)]
    assert all(s.algorithm.engine is Engine.GRAPH for s in every)  # bench.scaling's specs, the default engine


def test_every_run_has_the_loops_published_figures() -> None:
    study = load(RESULTS, "scaling.json")
    for part in Part:
        for spec in part_runs(part):
            loop = published(part, spec, study)
            assert loop is not None and loop.samples_per_s > 0, spec.label
            assert loop.correct is True, spec.label
    ring_10g = published(Part.BANDWIDTH, scaling.bandwidth_spec("vgg16", "ring", 10_000.0), study)
    nr_10g = published(Part.BANDWIDTH, scaling.bandwidth_spec("vgg16", "netreduce-hier", 10_000.0), study)
    assert ring_10g is not None and nr_10g is not None and ring_10g.iteration_s is not None
    assert nr_10g.iteration_s is None  # the sweep keeps ring's iteration alone
    (row_10g,) = [r for r in study["bandwidth"] if r["model"] == "vgg16" and r["rate_mbps"] == 10_000.0]
    assert nr_10g.samples_per_s / ring_10g.samples_per_s == row_10g["ratio"]


def test_a_run_agrees_within_the_tolerance_and_correct_as_the_loops() -> None:
    spec = scaling.scaling_spec("resnet50", 32, "ps")
    loop = Published(samples_per_s=1000.0, iteration_s=1.0, correct=True, wall_s=10.0)
    same = row(Part.POINTS, spec, graph_report(1000.0 * (1 + TOLERANCE / 2), 1 / (1 + TOLERANCE / 2), True), loop)
    assert same.agrees and same.within_tolerance and same.samples_over_loop > 1
    assert same.sim_wall_s == 12.0 and same.sim_wall_s_loop == 10.0
    slow = row(Part.POINTS, spec, graph_report(1000.0 * (1 - 2 * TOLERANCE), 1 / (1 - 2 * TOLERANCE), True), loop)
    assert not slow.agrees and not slow.within_tolerance
    wrong = row(Part.POINTS, spec, graph_report(1000.0, 1.0, False), loop)
    assert wrong.within_tolerance and not wrong.agrees
    assert same.job2_jct_s is None and same.samples_over_loop_today is None


def test_a_dlcp_run_keeps_the_second_jobs_completion_and_todays_loop() -> None:
    (spec, _) = part_runs(Part.DLCP)
    loop = Published(samples_per_s=1000.0, iteration_s=1.0, correct=True, wall_s=10.0, job2_jct_s=4.5)
    graph = {**graph_report(1230.0, 1 / 1.23, True), "jobs": {"1": {"jct_s": 2.7}, "2": {"jct_s": 4.47}}}
    today = graph_report(1200.0, 1 / 1.2, True)
    r = row(Part.DLCP, spec, graph, loop, today)
    assert not r.agrees and r.job2_jct_s == 4.47 and r.job2_jct_s_loop == 4.5
    assert r.samples_per_s_loop_today == 1200.0 and r.samples_over_loop_today == 1230.0 / 1200.0
    assert r.correct_loop_today is True
    assert r.jct_s_by_job == {"1": 2.7, "2": 4.47} and r.jct_s_by_job_loop_today == {}


def test_the_published_comparison_is_judged_by_its_rule() -> None:
    path = RESULTS / f"{NAME}.json"
    data = load(RESULTS, path.name)
    assert engines_of(data, path) == (Engine.GRAPH, Engine.LOOP)
    rows = data["rows"]
    assert rows and data["summary"]["runs"] == len(rows)
    for r in rows:
        assert r["samples_over_loop"] == r["samples_per_s"] / r["samples_per_s_loop"]
        within = abs(r["samples_over_loop"] - 1) <= data["summary"]["tolerance"] and (
            r["iteration_over_loop"] is None or abs(r["iteration_over_loop"] - 1) <= data["summary"]["tolerance"])
        assert r["within_tolerance"] == within, r["run"]
        assert r["agrees"] == (within and r["correct"] is True and r["correct_loop"] is True), r["run"]
        assert r["engine"] == "graph" and r["machine_bound"] is False
    assert data["summary"]["agree"] == sum(r["agrees"] for r in rows)
    assert data["summary"]["misses"] == [r["run"] for r in rows if not r["agrees"]]
