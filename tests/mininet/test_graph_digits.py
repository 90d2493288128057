"""train-digits on the hosts' graph engine through BMv2 (engine = graph: gradswitch/experiment/runner.py run_on with the
ranks running the digits graph, gradswitch.hosts.graph_main, payload train-digits): the same spec on the iteration loop
(gradswitch/hosts/digits_job.py) and on the graph engine, on one network, trains the same model: every worker's
parameter digest at the end the loop's, the accuracy per iteration the loop's, every sum exact, and both write the
loop's results.json. On a rack at 20 Mb/s, a few iterations: the graph's all-reduces on the hosts' ring and in the
switches (NetReduce), fixed point and block exponents (float_mode = exponent: each iteration's exponent codes first);
and two jobs at once whose parameter servers share one host (jobs = 2, algo = ps, colocate_servers = true), each job's
model the loop's job's. The graph reduces as the loop does (one all-reduce per tensor, with block exponents its codes
first: gradswitch.workload.generators.digits_reductions), so both put the same bytes on the wire: exactly, when
neither run resent a packet (a retransmission, or a duplicate's acknowledgement, adds a packet of its own).
NetReduce k of N (3 of 4, a deadline) and the straggler case on both engines: each tensor's sum exact against the
workers it names, results.json's contributors and gradient error per iteration as the loop's.

Each pair's wire is printed (pytest -s) for the record."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.report import format_table
from gradswitch.experiment.spec import Engine, spec_from_dict
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from tests.results import assert_same_wire, run_on

pytestmark = pytest.mark.mininet

ITERATIONS = 4
SPEC: dict[str, Any] = {"workers": 4, "topo": "rack", "workload": "train-digits", "dtype": "float32",
                        "iterations": ITERATIONS, "bw_mbps": 20.0, "seed": 7}


def digests(out: Path, job: int) -> dict[int, str]:
    """Each worker's parameter digest at the end (its result-<id>.json), by node id."""
    found = {}
    for path in sorted((out / "run" / f"job{job}").glob("result-*.json")):
        result = json.loads(path.read_text())
        if result["role"] == "worker":
            found[int(result["node_id"])] = result["model_digest"]
    return found


def assert_exact(report: dict[str, Any], jobs: int = 1) -> None:
    assert report["ok"], report["errors"]
    assert report["check"] == "exact" and len(report["iterations"]) == ITERATIONS
    assert all(it["correct"] and it["wrong_elements"] == 0 for it in report["iterations"])
    assert set(report["jobs"]) == {str(j) for j in range(1, jobs + 1)}
    assert all(j["outcome"] == "ok" and j["iterations_done"] == ITERATIONS for j in report["jobs"].values())


def test_the_graph_engine_trains_the_loops_model_through_bmv2(tmp_path: Path) -> None:
    runs = {f"{algo}-{mode}": spec_from_dict({**SPEC, "algo": algo, "float_mode": mode})
            for algo, mode in (("ring", "fixed"), ("netreduce", "fixed"), ("netreduce", "exponent"))}
    reports: dict[tuple[str, str], dict[str, Any]] = {}
    with Testbed(topology_for(runs["ring-fixed"]), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for name, spec in runs.items():
            for engine in ("loop", "graph"):
                run = spec_from_dict({**SPEC, "algo": str(spec.algorithm.algo),
                                      "float_mode": str(spec.workload.float_mode),
                                      "engine": engine, "name": f"{name}-{engine}"})
                reports[(name, engine)] = run_on(net, run, tmp_path / f"{name}-{engine}", progress=False)
    for name in runs:
        loop, graph = reports[(name, "loop")], reports[(name, "graph")]
        for report in (loop, graph):
            assert_exact(report)
        # the graph's job file beside the spec's; the ranks' results hold the loop's records
        assert (tmp_path / f"{name}-graph" / "graph" / "job1.json").exists()
        assert "graph" not in graph  # a training run: the loop's figures only, no graphs' section
        (digest,) = set(digests(tmp_path / f"{name}-loop", 1).values())  # every worker's model the same
        assert digests(tmp_path / f"{name}-graph", 1) == {r: digest for r in range(4)}, name
        # the loop's accuracy and loss per iteration (the worst worker's model), its learning figures
        for key in ("accuracy", "loss"):
            assert [it[key] for it in graph["iterations"]] == [it[key] for it in loop["iterations"]], (name, key)
        assert graph["headline_extra"]["final_accuracy"] == loop["headline_extra"]["final_accuracy"]
        assert graph["iterations"][-1]["train_s"] > 0
        assert_same_wire(loop, graph, name)
    assert reports[("ring-fixed", "loop")]["iterations"][-1]["accuracy"] > \
        reports[("ring-fixed", "loop")]["iterations"][0]["accuracy"]  # it learns
    # block exponents train another model than fixed point (the codes' all-reduce ran: not the fixed point's sums)
    assert set(digests(tmp_path / "netreduce-exponent-graph", 1).values()) != \
        set(digests(tmp_path / "netreduce-fixed-graph", 1).values())
    graph_job = json.loads((tmp_path / "netreduce-exponent-graph" / "graph" / "job1.json").read_text())
    names = [n["name"] for n in graph_job["graph"]["ranks"][0]["nodes"]]
    assert names[:3] == ["it0.gradient", "it0.exponents.fc2.bias", "it0.all_reduce.fc2.bias"]


def test_two_jobs_whose_servers_share_a_host_train_the_loops_models_on_the_graph_engine(tmp_path: Path) -> None:
    base = {**SPEC, "workers": 3, "algo": "ps", "servers": 1, "jobs": 2, "colocate_servers": True}
    specs = {engine: spec_from_dict({**base, "engine": engine, "name": engine}) for engine in ("loop", "graph")}
    assert specs["graph"].problems() == []
    reports = {}
    with Testbed(topology_for(specs["loop"]), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for engine, spec in specs.items():
            reports[engine] = run_on(net, spec, tmp_path / engine, progress=False)
    for report in reports.values():
        assert_exact(report, jobs=2)
    jobs = [json.loads((tmp_path / "graph" / "graph" / f"job{j}.json").read_text())["job"] for j in (1, 2)]
    servers = {node["host"] for job in jobs for node in job["nodes"] if node["role"] == "server"}
    workers = [{node["host"] for node in job["nodes"] if node["role"] == "worker"} for job in jobs]
    assert len(servers) == 1 and not workers[0] & workers[1] and not servers & (workers[0] | workers[1])
    for job in (1, 2):
        (digest,) = set(digests(tmp_path / "loop", job).values())
        assert digests(tmp_path / "graph", job) == {r: digest for r in range(3)}, job
    assert [it["accuracy"] for it in reports["graph"]["iterations"]] == \
        [it["accuracy"] for it in reports["loop"]["iterations"]]
    assert_same_wire(reports["loop"], reports["graph"], "ps-two-jobs")



def late_packets(report: dict[str, Any]) -> int:
    """The packets the switches left out of a sum that had left without them (k of N), over the run's NetReduce jobs
    (the loop's job; the graph's in-network jobs)."""
    return sum(part["events"].get("late", 0) + part["events"].get("late-answered", 0)
               for job in report["switches"]["netreduce"].values() for part in job["switches"].values())


def posted(out: Path) -> dict[int, int]:
    """The messages each worker posted on its NetReduce job (its result's `netreduce` counters), by node id."""
    found = {}
    for path in sorted((out / "run" / "job1").glob("result-*.json")):
        result = json.loads(path.read_text())
        found[int(result["node_id"])] = int(result["netreduce"]["messages"])
    return found


def run_exact(tmp_path: Path, base: dict[str, Any], runs: dict[str, dict[str, Any]], iterations: int
              ) -> dict[str, Any]:
    """Each of `runs` on one network of `base`'s topology, in order: every one ok, every iteration exact against the
    workers its sums name, every worker's model the same at the end; their reports by name."""
    with Testbed(topology_for(spec_from_dict(base)), NetworkOptions(run_dir=tmp_path / "net")) as net:
        reports = {name: run_on(net, spec_from_dict({**raw, "name": name}), tmp_path / name, progress=False)
                   for name, raw in runs.items()}
    for name, report in reports.items():
        assert report["ok"], (name, report["errors"])
        its = report["iterations"]
        assert len(its) == iterations and all(it["correct"] and it["wrong_elements"] == 0 for it in its), name
        assert len(set(digests(tmp_path / name, 1).values())) == 1, name  # every worker's model the same
    return reports


def test_k_of_n_on_the_graph_engine_releases_sums_early_and_checks_them_as_the_loop(tmp_path: Path) -> None:
    """NetReduce 3 of 4 (docs/faults.md, "Stragglers: k of N") on both engines through one BMv2 switch: the switch
    emits each cell's sum once 3 workers are in, so the fourth's packet comes late (its receiver already holds the
    sum) and every message's sum names 3 workers. Both engines' runs are ok: every sum checked exact against the
    workers its message names, each element divided by them, every worker's model the same at the end; results.json
    records per iteration the fewest contributors (3) and a gradient error against all 4 above the fixed point's
    rounding, as the loop's; on both engines most iterations' sums left a worker out. A 20 ms deadline alone (N of
    N) on the graph engine: every sum exact against the workers it names, one model on every worker."""
    iterations = 8
    base = {**SPEC, "algo": "netreduce", "iterations": iterations, "netreduce_k": 3}
    deadline = {**base, "netreduce_deadline_ms": 20.0}
    deadline.pop("netreduce_k")
    runs = {"loop-k3": base, "graph-k3": {**base, "engine": "graph"},
            "graph-deadline": {**deadline, "engine": "graph"}}
    reports = run_exact(tmp_path, base, runs, iterations)
    for name, report in reports.items():
        assert all("contributors" in it and "gradient_error" in it for it in report["iterations"]), name
    for name in ("loop-k3", "graph-k3"):
        its = reports[name]["iterations"]
        held = [it["contributors"] for it in its]
        assert min(held) == 3 and held.count(3) >= iterations // 2, (name, held)  # sums that left early
        assert all(it["gradient_error"] > 0.01 for it in its if it["contributors"] < 4), name
        assert late_packets(reports[name]) > 0, name
        assert len(set(posted(tmp_path / name).values())) == 1, (name, posted(tmp_path / name))  # every message
    graph: Any = reports["graph-k3"]
    assert (tmp_path / "graph-k3" / "graph" / "job1.json").exists()  # the graph engine ran it
    assert graph["iterations"][-1]["accuracy"] > graph["iterations"][0]["accuracy"]  # it learns from 3 of 4
    assert "partial sums" in format_table(graph)


def test_k_of_n_with_one_credit_leaves_no_message_unposted_nor_a_sum_misread_on_both_engines(tmp_path: Path) -> None:
    """NetReduce 3 of 4 with credits = 1 (a window of 2 messages) on both engines: a worker left out may find every
    sum of a reduction here while its next message still waits for its credit, and a later message's sum may land
    in the window place of one it has not read (docs/faults.md, "Stragglers: k of N", a late worker's results).
    Every worker posts every message (it would otherwise never post again, left out of every later sum), every sum
    exact against the workers it names, one model on every worker. Each worker's counters printed (pytest -s)."""
    iterations = 12
    base = {**SPEC, "algo": "netreduce", "iterations": iterations, "netreduce_k": 3, "credits": 1}
    runs = {"loop-c1": base, "graph-c1": {**base, "engine": "graph"}}
    reports = run_exact(tmp_path, base, runs, iterations)
    for name, report in reports.items():
        its = report["iterations"]
        counts = posted(tmp_path / name)
        print(name, "messages posted per worker:", counts, "contributors:", [it["contributors"] for it in its])
        assert len(counts) == 4 and len(set(counts.values())) == 1, (name, counts)


def iteration_s(out: Path, rank: int) -> float:
    """A worker's median iteration in a run's results (its result-<rank>.json): from one all-reduce's end to the
    next's (its computation, a slow worker's wait and the all-reduce), the first two left out (warming up), as the
    loop's median is taken."""
    result = json.loads((out / "run" / "job1" / f"result-{rank}.json").read_text())
    ends = [float(it["end"]) for it in result["iterations"]]
    return float(statistics.median(b - a for a, b in itertools.pairwise(ends[2:])))


def test_a_slow_worker_left_out_by_k_of_n_on_the_graph_engine_as_by_the_loop(tmp_path: Path) -> None:
    """The straggler case the docs use (docs/faults.md, "Stragglers: k of N"; bench/stragglers.py) on both engines:
    worker 3's computation 3000x as long (slow-worker, its minibatch's gradient timed warm, then waited), NetReduce
    3 of 4. On the graph engine the fast workers' iteration is near their own without a slow worker, far from N of
    4's with it (every worker at the slow worker's pace), as tests/mininet/test_stragglers.py judges the loop, and no
    slower than the loop's 3 of 4 (with slack: the machine sets both paces); the slow worker is left out of most sums
    on both engines (it stops computing once its next sum is here, as the loop's does); every sum exact against the
    workers it names, one model on every worker."""
    from bench.stragglers import spec_for
    from tests.mininet.test_stragglers import FACTOR, median_iteration_s

    iterations = 12
    specs = {c: spec_for(c, 1, iterations, FACTOR)
             for c in ("netreduce 3 of N", "netreduce N of N", "netreduce N of N, no slow worker")}
    k_of_n = specs["netreduce 3 of N"]
    names = {c: f"graph-{i}" for i, c in enumerate(specs)}
    with Testbed(topology_for(k_of_n), NetworkOptions(run_dir=tmp_path / "net")) as net:
        loop = run_on(net, k_of_n, tmp_path / "loop-k3", progress=False)
        graph = {c: run_on(net, s.but(engine=Engine.GRAPH, name=names[c]), tmp_path / names[c], progress=False)
                 for c, s in specs.items()}
    assert loop["ok"], loop["errors"]
    for c, report in graph.items():
        assert report["ok"], (c, report["errors"])
        assert all(it["correct"] and it["wrong_elements"] == 0 for it in report["iterations"]), c
        assert len(set(digests(tmp_path / names[c], 1).values())) == 1, c
    loop_s = median_iteration_s(loop)
    out = {c: tmp_path / name for c, name in names.items()}
    graph_s = statistics.median(iteration_s(out["netreduce 3 of N"], r) for r in range(3))  # the fast workers'
    slow_s = iteration_s(out["netreduce N of N"], 0)  # every worker at the slow worker's pace
    fast_s = iteration_s(out["netreduce N of N, no slow worker"], 0)
    assert graph_s - fast_s < 0.3 * (slow_s - fast_s), (fast_s, graph_s, slow_s)
    assert graph_s < 1.5 * loop_s + 0.02, (graph_s, loop_s)
    for report in (graph["netreduce 3 of N"], loop):
        held = [it["contributors"] for it in report["iterations"]]
        assert held.count(3) >= iterations // 2, held
    # N of N: every sum holds all 4
    assert {it["contributors"] for it in graph["netreduce N of N"]["iterations"]} == {4.0}
