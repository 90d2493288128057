"""bench.crossval's training-graph part: judging each run's median iteration and the speed-up (the runs
themselves: tests/ns3/test_graph_sim_dilation.py for the simulator's twin, bench.crossval for BMv2), and the
graph helpers the simulator's dilated twin uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.crossval_training_graph import judge, rows
from gradswitch.experiment.crossval import MIN_REPETITIONS
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, JobGraph, RankGraph, world_group
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from tests.crossval_store import reps, store


def test_median_iterations_and_the_speed_up_within_tolerance(tmp_path: Path) -> None:
    s = store(tmp_path, {"ring": {"bmv2": reps(0.160, 0.158, 0.9, 0.159, bound=(2,)), "ns3": reps(0.158)},
                         "nr": {"bmv2": reps(0.120, 0.123, 0.119), "ns3": reps(0.118)}})
    f = {x.what: x for x in judge(s, "ring", "nr", MIN_REPETITIONS)}
    ring = f["training graph ring: iteration (s)"]
    assert ring.bmv2 == pytest.approx(0.159) and ring.ns3 == pytest.approx(0.158) and ring.within is True
    speed_up = f["training graph speed-up: NetReduce / ring (samples/s)"]
    assert speed_up.bmv2 == pytest.approx(0.159 / 0.120) and speed_up.ns3 == pytest.approx(0.158 / 0.118)
    assert speed_up.within is True
    [row] = [r for r in rows(s, ["ring"])]
    assert row["bmv2"]["usable"] == 3 and row["bmv2"]["spread_s"] == (0.158, 0.160)


def test_a_run_far_off_or_short_of_usable_repetitions(tmp_path: Path) -> None:
    s = store(tmp_path, {"ring": {"bmv2": reps(0.16, 0.16, 0.16), "ns3": reps(0.20)},  # 25 % off
                         "nr": {"bmv2": reps(0.12, 0.12, bound=(0,)), "ns3": reps(0.12)}})
    f = {x.what: x for x in judge(s, "ring", "nr", MIN_REPETITIONS)}
    assert f["training graph ring: iteration (s)"].within is False
    assert f["training graph nr: iteration (s)"].within is None  # one usable BMv2 repetition: not judged
    assert f["training graph speed-up: NetReduce / ring (samples/s)"].within is None


def test_a_dilated_graph_computes_longer_and_its_run_reads_back_undilated() -> None:
    group = world_group(2)
    graph = JobGraph("g", tuple(RankGraph(r, (ComputeNode(0, "fwd", 0.01),
                                              CollectiveNode(1, "ar", CollectiveKind.ALL_REDUCE, group.name, 64, (0,))))
                                for r in range(2)), (group,))
    slow = graph.dilated(4.0)
    assert [n.duration_s for n in slow.ranks[0].nodes if isinstance(n, ComputeNode)] == [0.04]
    assert slow.ranks[0].nodes[1] == graph.ranks[0].nodes[1]  # communication as it was
    run = GraphRun((NodeTiming(0, 0, "compute", 0.0, 0.04), NodeTiming(0, 1, "collective", 0.04, 0.08)))
    assert [(n.start_s, n.end_s) for n in run.undilated(4.0).nodes] == [(0.0, 0.01), (0.01, 0.02)]


def test_a_bmv2_repetition_is_judged_against_the_ideal_link_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph's own report judges a graph with computation by its CPU alone (half idle: not machine-bound); given
    the job's ideal link load, a BMv2 repetition is judged as the training loop's runs are: its busiest link at
    50 % against an ideal's 90 % (under 0.8 of it) is machine-bound."""
    from bench import crossval_training_graph
    from gradswitch.experiment.graph_run import graph_job, graph_spec, summarize
    from gradswitch.topology.generators import build_topology
    from tests.graphs import one_collective

    graph = one_collective(CollectiveKind.ALL_REDUCE, 2, 1_000_000, compute_s=1.0)
    run = GraphRun((NodeTiming(0, 1, "compute", 0, 1, None, None, 0, None),
                    NodeTiming(1, 1, "compute", 0, 1, None, None, 0, None),
                    NodeTiming(0, 2, "collective", 1.0, 1.3, CollectiveKind.ALL_REDUCE, "world", 1_000_000, True),
                    NodeTiming(1, 2, "collective", 1.0, 1.3, CollectiveKind.ALL_REDUCE, "world", 1_000_000, True)))
    topo = build_topology("rack", hosts=2, bw_mbps=8.0)
    job = graph_job(topo, graph_spec(graph, bw_mbps=8.0), graph)[0]
    report = summarize(job, run, ["h1", "h2"], 8.0, {"h1->s1": {"sent_bytes": 10, "load": 0.5}}, 0.5, (), 1.0)
    monkeypatch.setattr(crossval_training_graph, "iteration_times", lambda g, r: (1.3, 1.3))
    assert report.machine_bound is False
    alone = crossval_training_graph.repetition(1, report, graph, 1)
    assert alone.machine_bound is False and alone.job_s == pytest.approx(1.3)
    judged = crossval_training_graph.repetition(1, report, graph, 1, ideal_load=0.9)
    assert judged.machine_bound is True and "busiest link 50%" in (judged.reason or "")
    assert crossval_training_graph.repetition(1, report, graph, 1, ideal_load=0.6).machine_bound is False
