"""train-digits on the hosts' graph engine through BMv2 (engine = graph, gradswitch/experiment/digits_graph.py):
4 workers on a rack at 20 Mb/s, a few iterations, the graph's all-reduces on the hosts' ring and in the switches
(NetReduce), each carrying the MLP's real gradients. Every sum exact on every rank, and the model at the end the
iteration loop's (gradswitch/hosts/digits_job.py), digest for digest, with the same seed and settings: the same
gradients, the same sums, the same SGD steps; the accuracy per iteration the loop's too."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.digits_graph import run_digits_graph_on
from gradswitch.experiment.graph_run import GraphRunReport
from gradswitch.experiment.spec import Engine, spec_from_dict
from gradswitch.experiment.testbed import Testbed
from gradswitch.hosts.collectives.in_network import NETREDUCE
from gradswitch.net.network import NetworkOptions
from gradswitch.topology.generators import rack
from tests.results import run_on

pytestmark = pytest.mark.mininet

ITERATIONS = 5
SPEC: dict[str, Any] = {"workers": 4, "topo": "rack", "workload": "train-digits", "dtype": "float32",
                        "iterations": ITERATIONS, "bw_mbps": 20.0, "seed": 7}


def loop_digests(report: dict[str, Any]) -> set[str]:
    return {node["model_digest"] for node in report["extra"].values() if "model_digest" in node}


def assert_exact(report: GraphRunReport) -> None:
    assert report.checked, report.errors
    assert len(report.collectives) == ITERATIONS and all(c.checked is True for c in report.collectives)
    assert all(n.checked is True for n in report.run.nodes if n.kind == "collective")
    assert report.training is not None and len(report.training.accuracy) == ITERATIONS


def test_the_graph_engine_trains_the_loops_model_through_bmv2(tmp_path: Path) -> None:
    loop: dict[str, dict[str, Any]] = {}
    graph: dict[str, GraphRunReport] = {}
    with Testbed(rack(hosts=4, bw_mbps=SPEC["bw_mbps"]), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for algo in ("ring", "netreduce"):
            spec = spec_from_dict({**SPEC, "algo": algo, "name": f"loop-{algo}"})
            loop[algo] = run_on(net, spec, tmp_path / f"loop-{algo}")
            graph[algo] = run_digits_graph_on(net, replace(spec, engine=Engine.GRAPH, name=f"graph-{algo}"),
                                              tmp_path / f"graph-{algo}")
    for algo in ("ring", "netreduce"):
        assert loop[algo]["ok"], loop[algo]["errors"]
        assert all(it["wrong_elements"] == 0 for it in loop[algo]["iterations"])
        assert_exact(graph[algo])
    assert {c.algorithm for c in graph["netreduce"].collectives} == {NETREDUCE}  # the switches summed them
    assert {c.algorithm for c in graph["ring"].collectives} == {"ring"}
    (digest,) = loop_digests(loop["ring"])  # every worker's model the same
    assert loop_digests(loop["netreduce"]) == {digest}
    for algo in ("ring", "netreduce"):
        training = graph[algo].training
        assert training is not None
        assert set(training.model_digests) == {0, 1, 2, 3} and training.model_digest == digest, (algo, training)
        # the loop's accuracy per iteration (its report: the worst worker's), the same model after each step
        assert list(training.accuracy) == [it["accuracy"] for it in loop[algo]["iterations"]]
    assert training is not None and training.accuracy[-1] > training.accuracy[0]  # it learns


def test_k_of_n_on_the_graph_engine_releases_sums_early_and_checks_them_as_the_loop(tmp_path: Path) -> None:
    """NetReduce 3 of 4 (docs/faults.md, "Stragglers: k of N") on both engines through one BMv2 switch: the switch
    emits each cell's sum once 3 workers are in, so the fourth's packet comes late (its receiver already holds the
    sum) and every message's sum names 3 workers. Both engines' runs are ok: every sum checked exact against the
    workers its message names, each element divided by them, every rank's model the same at the end; each iteration
    records its fewest contributors (3) and a gradient error against all 4 above the fixed point's rounding; on both
    engines most iterations' sums left a worker out. A 20 ms deadline alone (N of N) on the graph engine: every sum
    exact against the workers it names, one model on every rank."""
    iterations = 8
    base = {**SPEC, "algo": "netreduce", "iterations": iterations, "netreduce_k": 3}
    with Testbed(rack(hosts=4, bw_mbps=SPEC["bw_mbps"]), NetworkOptions(run_dir=tmp_path / "net")) as net:
        loop = run_on(net, spec_from_dict({**base, "name": "loop-k3"}), tmp_path / "loop-k3")
        graph = run_digits_graph_on(net, spec_from_dict({**base, "engine": "graph", "name": "graph-k3"}),
                                    tmp_path / "graph-k3")
        deadline = {**base, "engine": "graph", "name": "graph-deadline", "netreduce_deadline_ms": 20.0}
        deadline.pop("netreduce_k")
        closed = run_digits_graph_on(net, spec_from_dict(deadline), tmp_path / "graph-deadline")
    assert loop["ok"], loop["errors"]
    held_loop = [it["contributors"] for it in loop["iterations"]]
    assert held_loop.count(3) >= iterations // 2, held_loop  # the loop's sums leave one worker out
    events = loop["switches"]["netreduce"]["1"]["switches"]["s1"]["events"]
    assert events["late"] + events["late-answered"] > 0
    assert graph.checked, graph.errors  # every sum exact against the workers it names
    assert len(graph.collectives) == iterations and {c.algorithm for c in graph.collectives} == {NETREDUCE}
    training = graph.training
    assert training is not None and training.model_digest is not None  # every rank's model the same
    assert len(training.contributors) == iterations and min(training.contributors) == 3
    assert training.contributors.count(3) >= iterations // 2, training.contributors  # sums that left early
    assert all(e > 0.01 for c, e in zip(training.contributors, training.gradient_error, strict=True) if c < 4)
    assert training.accuracy[-1] > training.accuracy[0]  # it learns from 3 of 4
    assert closed.checked, closed.errors
    assert closed.training is not None and len(closed.training.contributors) == iterations
    assert closed.training.model_digest is not None


def iteration_s(graph: GraphRunReport, rank: int) -> float:
    """A rank's median iteration on the graph engine: from one all-reduce's end to the next's (its computation, a
    slow worker's wait and the all-reduce), the first two left out (warming up), as the loop's median is taken."""
    ends = sorted(n.end_s for n in graph.run.nodes if n.rank == rank and n.kind == "collective")
    return float(statistics.median(b - a for a, b in itertools.pairwise(ends[2:])))


def test_a_slow_worker_left_out_by_k_of_n_on_the_graph_engine_as_by_the_loop(tmp_path: Path) -> None:
    """The straggler case the docs use (docs/faults.md, "Stragglers: k of N"; bench/stragglers.py) on both engines:
    worker 3's computation 3000x as long (slow-worker, its minibatch's gradient timed warm, then waited), NetReduce
    3 of 4. On the graph engine the fast ranks' iteration is near their own without a slow worker, far from N of 4's
    with it (every rank at the slow worker's pace), as tests/mininet/test_stragglers.py judges the loop, and no slower
    than the loop's 3 of 4 (with slack: the machine sets both paces); the slow worker is left out of most sums on
    both engines (it stops computing once its next sum is here, as the loop's does); every sum exact against the
    workers it names, one model on every rank."""
    from bench.stragglers import spec_for
    from tests.mininet.test_stragglers import FACTOR, median_iteration_s

    iterations = 12
    specs = {c: spec_for(c, 1, iterations, FACTOR)
             for c in ("netreduce 3 of N", "netreduce N of N", "netreduce N of N, no slow worker")}
    k_of_n = specs["netreduce 3 of N"]
    with Testbed(rack(hosts=4, bw_mbps=k_of_n.bw_mbps or 20.0), NetworkOptions(run_dir=tmp_path / "net")) as net:
        loop = run_on(net, k_of_n, tmp_path / "loop-k3", progress=False)
        graph = {c: run_digits_graph_on(net, replace(s, engine=Engine.GRAPH, name=f"graph-{i}"),
                                        tmp_path / f"graph-{i}") for i, (c, s) in enumerate(specs.items())}
    assert loop["ok"], loop["errors"]
    for report in graph.values():
        assert report.checked, report.errors
        assert report.training is not None and report.training.model_digest is not None
    loop_s = median_iteration_s(loop)
    graph_s = statistics.median(iteration_s(graph["netreduce 3 of N"], r) for r in range(3))  # the fast ranks'
    slow_s = iteration_s(graph["netreduce N of N"], 0)  # every rank at the slow worker's pace
    fast_s = iteration_s(graph["netreduce N of N, no slow worker"], 0)
    assert graph_s - fast_s < 0.3 * (slow_s - fast_s), (fast_s, graph_s, slow_s)
    assert graph_s < 1.5 * loop_s + 0.02, (graph_s, loop_s)
    training = graph["netreduce 3 of N"].training
    assert training is not None
    assert training.contributors.count(3) >= iterations // 2, training.contributors
    held_loop = [it["contributors"] for it in loop["iterations"]]
    assert held_loop.count(3) >= iterations // 2, held_loop
    waits = graph["netreduce N of N"].training
    assert waits is not None and not waits.contributors  # N of N: every sum holds all 4
