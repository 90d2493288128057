"""train-digits on the hosts' graph engine through BMv2 (engine = graph, gradswitch/experiment/digits_graph.py):
4 workers on a rack at 20 Mb/s, a few iterations, the graph's all-reduces on the hosts' ring and in the switches
(NetReduce), each carrying the MLP's real gradients. Every sum exact on every rank, and the model at the end the
iteration loop's (gradswitch/hosts/digits_job.py), digest for digest, with the same seed and settings: the same
gradients, the same sums, the same SGD steps; the accuracy per iteration the loop's too."""

from __future__ import annotations

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
            graph[algo] = run_digits_graph_on(net, spec.but(engine=Engine.GRAPH, name=f"graph-{algo}"),
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
