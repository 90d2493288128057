"""A training graph's run as the training loop reports it (gradswitch/workload/graph_iterations.py), on a run whose
every time is given here, and the rules of `engine = graph` for a model's training (gradswitch/experiment/spec.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.spec import spec_from_dict
from gradswitch.workload.generators import training_graph, training_job
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, JobGraph, RankGraph, world_group
from gradswitch.workload.graph_iterations import iteration_start, rank_bounds, rank_events, rank_iterations
from gradswitch.workload.graph_timing import GraphRun, NodeStart, NodeTiming
from gradswitch.workload.records import CheckKind
from gradswitch.workload.timeline import EventKind

GROUP = world_group(2)


def two_iterations() -> JobGraph:
    """Per iteration: forward, backward, one all-reduce; iteration 1's forward waits for iteration 0's all-reduce."""
    nodes = (ComputeNode(0, "it0.fwd.l", 1.0, ()), ComputeNode(1, "it0.bwd.l", 2.0, (0,)),
             CollectiveNode(2, "it0.allreduce.0", CollectiveKind.ALL_REDUCE, GROUP.name, 64, (1,)),
             ComputeNode(3, "it1.fwd.l", 1.0, (1, 2)), ComputeNode(4, "it1.bwd.l", 2.0, (3,)),
             CollectiveNode(5, "it1.allreduce.0", CollectiveKind.ALL_REDUCE, GROUP.name, 64, (4,)))
    return JobGraph("two", tuple(RankGraph(r, nodes) for r in range(2)), (GROUP,))


def timing(rank: int, node: int, start: float, end: float, checked: bool | None = None) -> NodeTiming:
    kind = "collective" if node in (2, 5) else "compute"
    return NodeTiming(rank, node, kind, start, end, CollectiveKind.ALL_REDUCE if kind == "collective" else None,
                      GROUP.name if kind == "collective" else None, 64 if kind == "collective" else 0,
                      checked if kind == "collective" else None)


def run(rank1_late: float = 0.0, rank0_wrong: bool = False) -> GraphRun:
    # rank 0: fwd 0-1, bwd 1-3, all-reduce 3-4.5; iteration 1 from 4.5: fwd -5.5, bwd -7.5, all-reduce -8
    out = [timing(0, 0, 0, 1), timing(0, 1, 1, 3), timing(0, 2, 3, 4.5, True), timing(0, 3, 4.5, 5.5),
           timing(0, 4, 5.5, 7.5), timing(0, 5, 7.5, 8.0, not rank0_wrong)]
    d = rank1_late
    out += [timing(1, 0, d, 1 + d), timing(1, 1, 1 + d, 3 + d), timing(1, 2, 3 + d, 4.5, True),
            timing(1, 3, 4.5, 5.5), timing(1, 4, 5.5, 7.5), timing(1, 5, 7.5, 8.0, True)]
    return GraphRun(tuple(out))


def test_each_rank_iteration_runs_from_its_own_forward_to_the_next_and_the_last_to_what_a_next_would_wait_for() -> None:
    g = two_iterations()
    assert rank_bounds(g, run(), 0) == [(0.0, 4.5), (4.5, 8.0)]
    assert rank_bounds(g, run(rank1_late=0.5), 1) == [(0.5, 4.5), (4.5, 8.0)]


def test_iterations_carry_computation_communication_and_their_overlap_as_the_loop_measures_them() -> None:
    [first, second] = rank_iterations(two_iterations(), run(), 0, CheckKind.DIGEST)
    assert (first.index, first.start, first.end, first.time_s) == (0, 0.0, 4.5, 4.5)
    assert first.extra["compute_s"] == 3.0 and first.extra["comm_s"] == 1.5 and first.extra["exposed_comm_s"] == 1.5
    assert first.extra["overlap"] == 0.0 and first.correct and first.check == CheckKind.DIGEST
    assert second.time_s == 3.5 and second.extra["exposed_comm_s"] == 0.5


def test_an_iteration_whose_all_reduce_did_not_hold_is_not_correct() -> None:
    [first, second] = rank_iterations(two_iterations(), run(rank0_wrong=True), 0, CheckKind.EXACT)
    assert first.correct and not second.correct


def test_an_unfinished_last_iteration_is_left_out() -> None:
    g = two_iterations()
    cut = GraphRun(tuple(t for t in run().nodes if not (t.rank == 0 and t.node_id == 5)))
    assert rank_bounds(g, cut, 0) == [(0.0, 4.5)]
    assert [r.index for r in rank_iterations(g, cut, 0, CheckKind.EXACT)] == [0]


def test_the_timeline_names_layers_and_ops_as_the_loop_does() -> None:
    events = rank_events(two_iterations(), run(), 0, in_flight=2)
    assert [(e.iteration, e.kind, e.name) for e in events[:3]] == [
        (0, EventKind.FORWARD, "l"), (0, EventKind.BACKWARD, "l"), (0, EventKind.OP, "op 0")]


def test_a_generated_training_graph_gives_one_record_per_iteration() -> None:
    g = training_graph(training_job("resnet50", 2, iterations=3))
    t, timings = 0.0, []
    for rank in g.ranks:  # every node run in id order, one after another, 1 ms each
        t = 0.0
        for n in rank.nodes:
            kind = "collective" if isinstance(n, CollectiveNode) else "compute"
            timings.append(NodeTiming(rank.rank, n.id, kind, t, t + 0.001, checked=True if kind == "collective" else
                                      None))
            t += 0.001
    records = rank_iterations(g, GraphRun(tuple(timings)), 1, CheckKind.EXACT)
    assert [r.index for r in records] == [0, 1, 2] and all(r.correct for r in records)
    assert records[-1].end == pytest.approx(t)  # the last iteration: its last all-reduce's end


@pytest.mark.parametrize(("kw", "says"), [
    ({}, None),
    ({"backend": "bmv2"}, None),
    ({"emulate": None}, None),  # a model's all-reduces in a row (gradswitch/workload/generators/plain.py)
    ({"emulate": None, "backend": "bmv2"}, None),
    ({"emulate": None, "float_mode": "exponent", "dtype": "float32"}, None),
    ({"float_mode": "exponent", "dtype": "float32"}, None),  # the plan's codes' all-reduces too
    ({"emulate": None, "backend": "bmv2", "faults": ["slow-worker:1@2,rate=2"]}, None),
    ({"jobs": 2}, None),
])
def test_engine_graph_runs_a_models_training_on_either_backend(kw: dict[str, Any], says: str | None) -> None:
    raw = {"workload": "resnet50", "engine": "graph", "backend": "ns3", "workers": 4, "bw_mbps": 20.0,
           "emulate": {"link_gbps": 10, "device": "v100", "batch": 32}, **kw}
    problems = spec_from_dict({k: v for k, v in raw.items() if v is not None}).problems()
    if says is None:
        assert problems == []
    else:
        assert [p for p in problems if says in p], problems


def test_several_jobs_are_graph_jobs_on_hosts_and_ids_of_their_own() -> None:
    """jobs = 2 on the graph engine: each job's graph on its own workers (as the loop places them), its NetReduce
    all-reduce job numbered after both jobs' ids; the simulator refuses graphs that share a host or an id."""
    from dataclasses import replace as with_

    from gradswitch.experiment.graph_as_loop import training_graph_jobs
    from gradswitch.sim.graph_run import PlacedGraph, run_graphs
    from gradswitch.sim.run import SimError
    from gradswitch.sim.sim_settings import SimSettings

    s = spec_from_dict({"workload": "resnet50", "engine": "graph", "backend": "ns3", "workers": 4, "jobs": 2,
                        "algo": "netreduce", "bw_mbps": 20.0, "iterations": 2, "warmup": 1,
                        "emulate": {"link_gbps": 10, "device": "v100", "batch": 32}})
    assert s.problems() == []
    one, two = training_graph_jobs(s, s.topology())
    assert (one.job.job.job_id, two.job.job.job_id) == (1, 2)
    assert not {n.host for n in one.job.job.nodes} & {n.host for n in two.job.job.nodes}
    assert (one.job.in_network, two.job.in_network) == ({CollectiveKind.ALL_REDUCE: 3}, {CollectiveKind.ALL_REDUCE: 6})
    same_hosts = PlacedGraph(two.graph, with_(two.job.job, nodes=one.job.job.nodes), two.job.in_network)
    with pytest.raises(SimError, match="share a host"):
        run_graphs([PlacedGraph(one.graph, one.job.job, one.job.in_network), same_hosts], s.topology(),
                   SimSettings(), Path("/nonexistent"))
    met = PlacedGraph(two.graph, two.job.job, {CollectiveKind.ALL_REDUCE: 1})
    with pytest.raises(SimError, match="meet"):
        run_graphs([PlacedGraph(one.graph, one.job.job, {}), met], s.topology(), SimSettings(), Path("/nonexistent"))


@pytest.mark.parametrize("fault", ["slow-worker:1@2,factor=3", "worker-crash:1@2"])
def test_a_workers_fault_on_the_graph_engine_runs_wherever_the_loop_runs_it(fault: str) -> None:
    """A model's training, a run without emulate and train-digits, on either backend the loop runs them on."""
    raw = {"workload": "resnet50", "engine": "graph", "workers": 4, "bw_mbps": 20.0,
           "emulate": {"link_gbps": 10, "device": "v100", "batch": 32}, "faults": [fault]}
    assert spec_from_dict(raw).problems() == []
    assert spec_from_dict({**raw, "backend": "ns3"}).problems() == []
    plain = {"engine": "graph", "workers": 4, "bw_mbps": 20.0, "faults": [fault]}
    assert spec_from_dict(plain).problems() == []
    assert spec_from_dict({**plain, "backend": "ns3"}).problems() == []
    assert spec_from_dict({"workload": "train-digits", "dtype": "float32", "engine": "graph", "workers": 4,
                           "faults": [fault]}).problems() == []


def test_crash_on_the_graph_engine_runs_on_either_backend() -> None:
    for raw in ({"workload": "resnet50", "engine": "graph", "workers": 4, "bw_mbps": 20.0, "iterations": 4,
                 "emulate": {"link_gbps": 10, "device": "v100", "batch": 32}, "crash": {"node": 1, "after": 1}},
                {"engine": "graph", "workers": 4, "bw_mbps": 20.0, "iterations": 4, "crash": {"node": 1, "after": 1}}):
        assert spec_from_dict({**raw, "backend": "ns3"}).problems() == []
        assert spec_from_dict(raw).problems() == []
    digits = {"workload": "train-digits", "dtype": "float32", "engine": "graph", "workers": 4,
              "crash": {"node": 1, "after": 1}}
    assert spec_from_dict(digits).problems() == []
    # where the loop refuses it, so does the graph: the crashing node must be one of the job's
    assert [p for p in spec_from_dict({**digits, "crash": {"node": 9, "after": 1}}).problems()
            if "crash node 9: no such node" in p]


def test_a_rank_that_stopped_as_its_next_forward_started_ended_the_iteration_before() -> None:
    """A rank killed as iteration 1's forward starts (a crash after iteration 0): that node started, never ended;
    iteration 0 ended at its start, as the loop's worker ends an iteration as the next forward starts."""
    g = two_iterations()
    cut = GraphRun(tuple(t for t in run().nodes if not (t.rank == 0 and t.node_id >= 3)), (NodeStart(0, 3, 4.5),))
    assert rank_bounds(g, cut, 0) == [(0.0, 4.5)]
    assert [r.index for r in rank_iterations(g, cut, 0, CheckKind.EXACT)] == [0]
    assert iteration_start(g.ranks[0], 1) == 3 and iteration_start(g.ranks[0], 2) is None
    assert GraphRun.from_dict(cut.to_dict()) == cut


def test_progress_counts_an_iteration_once_every_node_of_it_and_before_it_ended() -> None:
    from gradswitch.workload.graph_iterations import IterationProgress

    progress = IterationProgress(two_iterations().ranks[0])
    assert [progress.ended(n) for n in (0, 1, 3)] == [False, False, False] and progress.done == 0
    assert progress.ended(2) and progress.done == 1  # iteration 0's all-reduce: iteration 0 done
    assert not progress.ended(4) and progress.ended(5) and progress.done == 2


@pytest.mark.parametrize(("node", "after", "graph_node"), [(1, 0, "it1.fwd"), (1, 1, None), (0, 0, "it1.fwd")])
def test_a_crash_on_a_graph_job_names_the_forward_its_rank_dies_at(node: int, after: int,
                                                                   graph_node: str | None) -> None:
    """jobs[].crash.graph_node: the crashing rank's first forward of iteration after + 1 (none after the last)."""
    from dataclasses import replace as with_

    from gradswitch.experiment.graph_as_loop import training_graph_jobs
    from gradswitch.sim.sim_config import graph_job_json
    from gradswitch.sim.sim_settings import SimSettings
    from gradswitch.workload.job import Crash

    s = spec_from_dict({"workload": "resnet50", "engine": "graph", "backend": "ns3", "workers": 2, "bw_mbps": 20.0,
                        "iterations": 2, "scale": 0.01, "emulate": {"link_gbps": 10, "device": "v100", "batch": 32}})
    [tg] = training_graph_jobs(s, s.topology())
    crash = graph_job_json(tg.graph, with_(tg.job.job, crash=Crash(node, after)), SimSettings())["crash"]
    assert (crash["node"], crash["after"]) == (node, after)
    if graph_node is None:
        assert "graph_node" not in crash
    else:
        named = {n.id: n.name for n in tg.graph.ranks[node].nodes}[crash["graph_node"]]
        first = next(n.name for n in tg.graph.ranks[node].nodes if n.name.startswith(graph_node + "."))
        assert named == first


def test_zero_filled_packets_are_judged_against_the_loss_bound_as_the_loop_judges_them() -> None:
    """DLCP dropping: an iteration's nodes report their zero-filled packets and the squared error they left against
    the squared norm checked; the iteration carries both (zero_filled_packets, relative_error) and is correct while
    that error is at most max_relative_error, only where the job drops (as gs-job-node.cc and
    gradswitch/workload/encoding.py IterationCheck.correct judge the loop's)."""
    from dataclasses import replace

    from gradswitch.workload.dlcp import DlcpPolicy

    lossy = GraphRun(tuple(replace(t, zero_filled=3, error2=4.0, norm2=100.0) if (t.rank, t.node_id) == (0, 5) else t
                           for t in run().nodes))
    g = two_iterations()
    within = DlcpPolicy(drop=True, max_relative_error=0.25)
    [first, second] = rank_iterations(g, lossy, 0, CheckKind.DIGEST, dlcp=within)
    assert first.correct and first.extra["zero_filled_packets"] == 0.0 and first.extra["relative_error"] == 0.0
    assert second.extra["zero_filled_packets"] == 3.0 and second.extra["relative_error"] == pytest.approx(0.2)
    assert second.correct  # 0.2 <= 0.25
    [_, over] = rank_iterations(g, lossy, 0, CheckKind.DIGEST, dlcp=DlcpPolicy(drop=True, max_relative_error=0.1))
    assert not over.correct and over.extra["relative_error"] == pytest.approx(0.2)
    [_, exact] = rank_iterations(g, lossy, 0, CheckKind.DIGEST)  # no dropping: any error is wrong
    assert not exact.correct


@pytest.mark.parametrize("backend", ["ns3", "bmv2"])
def test_engine_graph_takes_dlcp_dropping_in_a_models_training_and_train_digits(backend: str) -> None:
    dlcp = {"drop": True, "loss_budget": 0.2}
    model = spec_from_dict({"workload": "resnet50", "engine": "graph", "backend": backend, "workers": 4,
                            "bw_mbps": 20.0, "transport": "sr", "emulate": {"link_gbps": 10, "batch": 32},
                            "dlcp": dlcp})
    assert model.problems() == []
    digits = spec_from_dict({"workload": "train-digits", "engine": "graph", "backend": "bmv2", "workers": 4,
                             "transport": "sr", "dtype": "float32", "dlcp": dlcp})
    assert digits.problems() == []
