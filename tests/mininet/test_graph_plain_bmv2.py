"""`engine = graph` on BMv2 for a workload without emulate (gradswitch/workload/generators/plain.py): the basic
synthetic all-reduce, ring on the hosts and NetReduce in the switch, run by the ranks' graph engine
(gradswitch.hosts.graph_main) through the product's run (runner.run_on) beside the loop on one network: every
iteration completes exact, and results.json has the loop's fields (at the top, per iteration, in the headline)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.spec import Engine, spec_from_dict
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.workload import worker_result
from gradswitch.workload.job import job_dir
from tests.results import read, run_on

pytestmark = pytest.mark.mininet


def test_a_synthetic_all_reduce_runs_on_the_graph_engine_through_bmv2_as_the_loop_reports_it(tmp_path: Path) -> None:
    base = spec_from_dict({"workers": 4, "size_bytes": 256 << 10, "iterations": 3, "bw_mbps": 8.0})
    runs = [base.but(algo=algo) for algo in (base.algorithm.algo, spec_from_dict({"algo": "netreduce"}).algorithm.algo)]
    reports = {}
    with Testbed(topology_for(base), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for run in runs:
            for engine in (Engine.LOOP, Engine.GRAPH):
                out = tmp_path / f"{run.algorithm.algo}-{engine}"
                report = run_on(net, run.but(engine=engine), out, progress=False)
                assert report["ok"] and report["outcome"] == "ok", report["errors"]
                assert report["check"] == "exact" and len(report["iterations"]) == 3
                assert all(it["correct"] and it["wrong_elements"] == 0 and it["time_s"] > 0
                           for it in report["iterations"])
                saved = read(out / "results.json")  # written, its format checked
                assert saved["ok"] and saved["iterations"] == report["iterations"]
                reports[(str(run.algorithm.algo), engine)] = report
                # the ranks' graph job beside the spec's job
                assert (out / "graph" / "job1.json").exists() == (engine == Engine.GRAPH)
    for algo in ("ring", "netreduce"):
        loop, graph = reports[(algo, Engine.LOOP)], reports[(algo, Engine.GRAPH)]
        assert set(graph) == set(loop)
        assert set(graph["iterations"][0]) == set(loop["iterations"][0])
        assert set(graph["headline_extra"]) == set(loop["headline_extra"])
        assert set(graph["summary"]) == set(loop["summary"])
        assert graph["step_bytes"] == loop["step_bytes"] and graph["training"] is None
        assert graph["spec"]["engine"] == "graph" and loop["spec"]["engine"] == "loop"


def test_a_parameter_server_all_reduce_of_more_than_4096_keys_runs_on_the_graph_engine_through_bmv2(
        tmp_path: Path) -> None:
    """20 KiB in keys of 4 bytes: 5,120 keys an all-reduce, past the 4,096 steps one operation number holds in the
    writes' immediate data (the rest in a second round, gradswitch/hosts/collectives/ops.py Op.imm): both
    iterations exact, every key served once an iteration."""
    spec = spec_from_dict({"algo": "ps", "workers": 2, "size_bytes": 20 << 10, "ps_key_bytes": 4, "iterations": 2,
                           "bw_mbps": 20.0, "engine": "graph"})
    with Testbed(topology_for(spec), NetworkOptions(run_dir=tmp_path / "net")) as net:
        report = run_on(net, spec, tmp_path / "run", progress=False)
    assert report["ok"] and report["outcome"] == "ok", report["errors"]
    assert report["check"] == "exact" and len(report["iterations"]) == 2
    assert all(it["correct"] and it["wrong_elements"] == 0 for it in report["iterations"])
    server = worker_result.read(job_dir(tmp_path / "run" / "run", 1), 2)  # node 2: after the two ranks
    assert server["role"] == "server" and server["ok"] and server["keys_served"] == 2 * 5120
