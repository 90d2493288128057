"""Faults fired during BMv2 runs (`faults` in a spec, `--fault` on the command line): a worker killed mid-run ends
the run within the transport's deadline, naming the fault first and keeping every iteration completed before it,
each exact; a leaf-spine ring rides through a spine link going down (the controller reroutes); nothing is left
behind (switch processes, veths, the management fence)."""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import pytest

from gradswitch.experiment.placement import job_config, place, topology_for
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.experiment.supervisor import stop_deadline_s
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.fence import fence_tables, table_name
from gradswitch.net.network import NetworkOptions
from gradswitch.topology.faults import FaultKind
from tests.mininet.test_network import leftovers
from tests.results import read, run_experiment, run_on

pytestmark = pytest.mark.mininet

# 1 MiB per step at 20 Mb/s: about 0.5-0.9 s an iteration on this machine, several before a fault at 3 s.
BASE = {"size_bytes": 1 << 20, "bw_mbps": 20.0, "workers": 4, "algo": "ring"}


def assert_nothing_left(out_dir, topo: str) -> None:
    names = ["s1", "h1", "h2", "h3", "h4"] if topo == "rack" else ["leaf1", "leaf2", "spine1", "spine2",
                                                                   "h1", "h2", "h3", "h4"]
    assert leftovers(out_dir / "net", names) == []
    assert table_name(out_dir / "net") not in fence_tables()


def test_a_killed_worker_ends_the_run_within_the_deadline_naming_it_and_keeps_what_was_completed(tmp_path):
    spec = spec_from_dict({**BASE, "topo": "rack", "iterations": 40, "faults": ["worker-crash:1@3"]})
    out = tmp_path / "run"
    started = time.monotonic()
    report = run_experiment(spec, out, progress=False)
    elapsed = time.monotonic() - started
    written = read(out / "results.json")  # what was returned is what was written
    assert (written["faults"], written["iterations"], written["errors"]) == (report["faults"], report["iterations"],
                                                                            report["errors"])

    (fault,) = report["faults"]
    assert fault["label"] == "worker-crash:1@3" and fault["outcome"] == "interrupted"
    assert fault["injected_s"] == pytest.approx(3.0, abs=0.5)
    assert 0 <= fault["time_to_detect_s"] < 1.0  # the runner saw the process gone within a few polls
    # Every node of the job gone within the deadline the transport's retry limits give.
    deadline = stop_deadline_s([spec_job(spec)])
    assert fault["job_stopped_s"] - fault["injected_s"] <= deadline, (fault, deadline)
    assert report["fault_outcome"] == "interrupted" and report["outcome"] == "failed" and not report["ok"]

    # The fault first in the errors, then what followed: the killed worker and the others, each naming it.
    who = list(report["errors"])
    assert who[0] == "fault worker-crash:1@3" and "killed worker 1 on h2" in report["errors"][who[0]]
    assert "was killed (SIGKILL)" in report["errors"]["worker 1 (h2)"]
    survivors = [w for w in who[1:] if "h2" not in w]
    assert len(survivors) == 3 and all("worker 1 on h2" in report["errors"][w] for w in survivors), report["errors"]

    # The iterations completed before it are kept, each exact, and the count says so.
    kept = report["iterations"]
    assert len(kept) > 0 and report["summary"]["iterations_done"] == len(kept) < 40
    assert all(it["correct"] and it["wrong_elements"] == 0 and it["check"] == "exact" for it in kept)
    assert all(it["reported_by"] == 3 for it in kept)  # the killed worker left no records; its peers did
    assert fault["iterations_lost"] == 40 - len(kept) and report["summary"]["correct"] is True
    assert elapsed < 120

    table = (out / "table.txt").read_text().splitlines()
    assert table[1].startswith("  fault worker-crash:1@3: interrupted: injected at")  # first, under the run's name
    assert f"{len(kept)}/40" in table[2] and "all exact" in table[2]
    assert_nothing_left(out, "rack")


def spec_job(spec):
    topo = topology_for(spec)
    return job_config(spec, 1, place(spec, topo).jobs[0], topo)


def test_a_leafspine_ring_rides_through_a_spine_link_going_down(tmp_path):
    spec = spec_from_dict({**BASE, "topo": "leafspine", "iterations": 12, "faults": ["link-down:leaf1-spine1@2"]})
    out = tmp_path / "run"
    report = run_experiment(spec, out, progress=False)
    assert report["ok"], report["errors"]
    assert report["summary"]["iterations_done"] == 12
    assert all(it["correct"] and it["wrong_elements"] == 0 for it in report["iterations"])
    (fault,) = report["faults"]
    assert fault["fault"]["kind"] == str(FaultKind.LINK_DOWN) and fault["outcome"] == "recovered", fault
    # The controller noticed the port and rerouted around it (its health events), both within a second.
    assert 0 <= fault["time_to_detect_s"] <= fault["time_to_recover_s"] < 1.0, fault
    assert any("link-down:leaf1-spine1@2" in it.get("faults", []) for it in report["iterations"])
    assert report["fault_outcome"] == "recovered"
    assert_nothing_left(out, "leafspine")


def test_a_spine_crash_in_a_leafspine_netreduce_run_falls_back_to_ring_with_exact_sums(tmp_path):
    """On the default engine, the graph's: its all-reduces are NetReduce job 2, aggregated on spine1, the spine of the
    graph's job 1 (as the loop's job 1, `(job - 1)` mod the spines)."""
    spec = spec_from_dict({**BASE, "algo": "netreduce", "topo": "leafspine", "iterations": 20,
                           "faults": ["switch-crash:spine1@3"]})
    out = tmp_path / "run"
    report = run_experiment(spec, out, progress=False)
    assert report["ok"], report["errors"]
    assert report["summary"]["iterations_done"] == 20
    assert all(it["correct"] and it["wrong_elements"] == 0 and it["check"] == "exact" for it in report["iterations"])
    (fault,) = report["faults"]
    assert fault["outcome"] == "recovered" and fault["fallback"] == "ring", fault
    assert 0 <= fault["time_to_detect_s"] <= fault["time_to_recover_s"] < 2.0, fault
    assert "never returned to it" in fault["detail"]  # spine1 stayed down
    assert "spine1" not in report["switches"]  # a dead switch is not read
    table = (out / "table.txt").read_text().splitlines()
    assert "fell back to ring" in table[1]
    assert_nothing_left(out, "leafspine")


def test_a_worker_whose_link_is_cut_slows_the_ring_from_the_fault_on(tmp_path):
    spec = spec_from_dict({**BASE, "topo": "rack", "iterations": 8, "faults": ["slow-worker:2@2,rate=8"]})
    out = tmp_path / "run"
    report = run_experiment(spec, out, progress=False)
    assert report["ok"], report["errors"]
    assert all(it["correct"] and it["wrong_elements"] == 0 for it in report["iterations"])
    (fault,) = report["faults"]
    assert fault["outcome"] == "recovered" and "ran with the slow worker" in fault["detail"], fault
    before = [it["time_s"] for it in report["iterations"] if not it.get("faults")]
    during = [it["time_s"] for it in report["iterations"] if it.get("faults") == ["slow-worker:2@2,rate=8"]]
    # A ring runs at its slowest link (the first iteration it hit was partly before it: the median).
    assert before and len(during) >= 2 and statistics.median(during) > 1.5 * max(before), (before, during)
    assert_nothing_left(out, "rack")


@pytest.mark.parametrize("engine", ["loop", "graph"])
def test_a_killed_worker_of_an_emulated_training_run_keeps_the_iterations_completed_before(tmp_path, engine):
    """The training loop (emulated computation, per-layer reductions in flight) keeps what it completed too, and so
    does the graph engine running the same job (engine = graph: the killed rank's progress file, the others' nodes
    ended before they stopped)."""
    spec = spec_from_dict({"algo": "ring", "workers": 3, "topo": "rack", "workload": "vgg16", "scale": 0.0005,
                           "bw_mbps": 20.0, "iterations": 40, "warmup": 1, "sync": "layer", "engine": engine,
                           "emulate": {"link_gbps": 10.0, "batch": 16}, "faults": ["worker-crash:2@4"]})
    out = tmp_path / "run"
    report = run_experiment(spec, out, progress=False)
    (fault,) = report["faults"]
    assert fault["outcome"] == "interrupted" and report["fault_outcome"] == "interrupted"
    kept = report["iterations"]
    assert 0 < len(kept) < 40, report["summary"]
    assert all(it["correct"] and it["check"] == "exact" and it["reported_by"] == 2 for it in kept)
    assert [it["index"] for it in kept] == list(range(len(kept)))  # every iteration before the fault, in order
    assert fault["iterations_lost"] == 40 - len(kept)
    assert_nothing_left(out, "rack")


def test_a_slow_worker_stretches_a_training_graphs_iterations_from_the_fault_on(tmp_path):
    """slow-worker with a factor on the graph engine (engine = graph): the rank's computations from the fault on take
    `factor` times as long on the clock (gradswitch/hosts/graph_engine.py reads the factor as each starts), so the
    job's iterations after it are slower than before it, every one exact."""
    spec = spec_from_dict({"algo": "ring", "workers": 3, "topo": "rack", "workload": "resnet50", "scale": 0.008,
                           "bw_mbps": 20.0, "iterations": 12, "warmup": 1, "engine": "graph",
                           "emulate": {"link_gbps": 10.0, "batch": 32}, "faults": ["slow-worker:1@2,factor=3"]})
    report = run_experiment(spec, tmp_path / "run", progress=False)
    assert report["ok"], report["errors"]
    (fault,) = report["faults"]
    assert fault["injected"] is True
    its = report["iterations"]
    assert len(its) == 12 and all(it["correct"] and it["check"] == "exact" for it in its)
    before = [it["time_s"] for it in its[1:] if not it.get("faults") and it["end"] - its[0]["start"] < 2.0]
    after = [it["time_s"] for it in its[-4:]]
    assert before and min(after) > 1.5 * max(before), (before, after)



def test_a_netreduce_training_graph_falls_back_to_ring_when_its_spine_crashes_as_the_loop_does(tmp_path):
    """A NetReduce training run (ResNet-50, 4 workers on a 2x2 leaf-spine) whose aggregation spine is killed
    mid-run and restarted, on the graph engine and on the loop, on one network: on both the workers fall back to
    ring (the control plane's signal, gradswitch/hosts/fallback.py), every iteration completes exact, and the
    fault is recorded recovered with `fallback = "ring"`. The graph's all-reduces are NetReduce job 2 (the graph's
    own job id + 1), which aggregates on spine1, its graph's job 1's spine, as the loop's job 1: one fault for both."""
    iterations = 12
    base: dict[str, Any] = {"algo": "netreduce", "workers": 4, "topo": "leafspine", "workload": "resnet50",
                            "scale": 0.008, "bw_mbps": 20.0, "iterations": iterations, "warmup": 1,
                            "emulate": {"link_gbps": 10.0, "batch": 32}}
    outcomes: dict[str, tuple[int, str, str | None]] = {}
    first = spec_from_dict(base)
    with Testbed(topology_for(first), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for engine, spine in (("graph", "spine1"), ("loop", "spine1")):
            spec = spec_from_dict({**base, "engine": engine, "faults": [f"switch-crash:{spine}@2,restart=3"]})
            out = tmp_path / engine
            report = run_on(net, spec, out, progress=False)
            assert report["ok"], (engine, report["errors"])
            its = report["iterations"]
            assert len(its) == iterations, (engine, report["summary"])
            assert all(it["correct"] and it["check"] == "exact" and it["wrong_elements"] == 0 for it in its), engine
            (fault,) = report["faults"]
            assert fault["injected"] is True and fault["outcome"] == "recovered", (engine, fault)
            assert fault["fallback"] == "ring" and fault["iterations_lost"] == 0, (engine, fault)
            workers = [json.loads(p.read_text()) for p in sorted((out / "run" / "job1").glob("result-*.json"))]
            assert len(workers) == 4
            changes = [w["fallback"]["changes"] for w in workers]
            assert all(c and c[0]["path"] == "ring" and c[0]["switch"] == spine for c in changes), (engine, changes)
            assert len({c[0]["from_reduction"] for c in changes}) == 1  # agreed: one first reduction by ring
            assert all(w["fallback"]["by_ring"] + w["fallback"]["redone_for_others"] > 0 for w in workers)
            outcomes[engine] = (len(its), fault["outcome"], fault["fallback"])
    assert outcomes["graph"] == outcomes["loop"], outcomes


def assert_same_stop(loop: dict[str, Any], graph: dict[str, Any], name: str) -> None:
    """One fault's run on both engines: the same outcome, the same nodes named in the errors, the iterations kept in
    order, each exact; the fault's record (if any) with the same outcome."""
    assert (graph["ok"], graph["outcome"]) == (loop["ok"], loop["outcome"]), (name, loop["errors"], graph["errors"])
    assert set(graph["errors"]) == set(loop["errors"]), (name, loop["errors"], graph["errors"])
    for report in (loop, graph):
        kept = report["iterations"]
        assert [it["index"] for it in kept] == list(range(len(kept))), name
        assert all(it["correct"] and it["check"] == "exact" and it["wrong_elements"] == 0 for it in kept), name
        assert report["summary"]["iterations_done"] == len(kept), name
    assert [f["outcome"] for f in graph.get("faults", [])] == [f["outcome"] for f in loop.get("faults", [])], name
    assert graph.get("fault_outcome") == loop.get("fault_outcome"), name


def test_a_crash_and_a_killed_worker_on_the_graph_engine_keep_what_the_loop_keeps(tmp_path):
    """`crash` (a node exits after an iteration) and `worker-crash` (a worker's process killed at a time) on the graph
    engine (gradswitch/hosts/graph_main.py: the rank exits with the loop's status once iteration `after` has ended,
    before or after its progress file says so as the loop's worker of that workload does; a killed rank's progress
    file) against the loop, on one rack at 20 Mb/s: train-digits (real gradients, every sum exact, the same model:
    the accuracy of every iteration kept is the loop's), a job without training (its all-reduces in a row) and a
    model's training with emulated computation. A crash after iteration k keeps the same iterations on both engines
    (every one whose every worker completed it) and names the same node; a killed worker's run stops interrupted on
    both, its iterations (as many as the wall clock let run) in order and exact; a slow worker's link (a job without
    training has no computation to stretch) slows the ring from the fault on, on both."""
    digits: dict[str, Any] = {"workers": 4, "topo": "rack", "workload": "train-digits", "dtype": "float32",
                              "bw_mbps": 20.0, "seed": 7, "algo": "ring"}
    plain: dict[str, Any] = {"workers": 4, "topo": "rack", "size_bytes": 64 << 10, "bw_mbps": 20.0, "algo": "ring"}
    training: dict[str, Any] = {"algo": "ring", "workers": 4, "topo": "rack", "workload": "resnet50", "scale": 0.008,
                                "bw_mbps": 20.0, "warmup": 1, "emulate": {"link_gbps": 10.0, "batch": 32}}
    runs: dict[str, dict[str, Any]] = {
        "digits-crash": {**digits, "iterations": 5, "crash": {"node": 1, "after": 2}},
        "plain-crash": {**plain, "iterations": 6, "crash": {"node": 2, "after": 3}},
        "training-crash": {**training, "iterations": 5, "crash": {"node": 1, "after": 2}},
        "digits-killed": {**digits, "iterations": 40, "faults": ["worker-crash:1@1.5"]},
        "plain-killed": {**plain, "iterations": 100, "faults": ["worker-crash:3@1.5"]},
        "plain-slow": {**plain, "iterations": 24, "faults": ["slow-worker:2@0.8,rate=4"]},  # its link put back after
    }
    reports: dict[tuple[str, str], dict[str, Any]] = {}
    with Testbed(topology_for(spec_from_dict(plain)), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for name, raw in runs.items():
            for engine in ("loop", "graph"):
                spec = spec_from_dict({**raw, "engine": engine, "name": f"{name}-{engine}"})
                assert spec.problems() == [], (name, engine)
                reports[(name, engine)] = run_on(net, spec, tmp_path / f"{name}-{engine}", progress=False)
    for name, raw in runs.items():
        loop, graph = reports[(name, "loop")], reports[(name, "graph")]
        print(f"{name}: kept loop {len(loop['iterations'])} graph {len(graph['iterations'])}; errors "
              f"{sorted(loop['errors'])} / {sorted(graph['errors'])}")
        assert_same_stop(loop, graph, name)
        if name == "plain-slow":  # a ring at its slowest link from the fault on, on both engines
            for report in (loop, graph):
                assert report["ok"] and len(report["iterations"]) == raw["iterations"], (name, report["errors"])
                (fault,) = report["faults"]
                assert fault["outcome"] == "recovered" and "ran with the slow worker" in fault["detail"], fault
                before = [it["time_s"] for it in report["iterations"] if not it.get("faults")]
                during = [it["time_s"] for it in report["iterations"] if it.get("faults")]
                assert before and len(during) >= 2 and statistics.median(during) > 1.5 * statistics.median(before)
            continue
        assert not graph["ok"] and graph["outcome"] == "failed", name
        if "crash" in raw:  # a crash after iteration k: what every worker completed, on both engines
            node = raw["crash"]["node"]
            assert len(graph["iterations"]) == len(loop["iterations"]), name
            assert 0 < len(graph["iterations"]) <= raw["crash"]["after"] + 1, name
            for report in (loop, graph):
                [crashed] = [k for k in report["errors"] if k.startswith(f"worker {node} ")]
                assert "exited with status 3" in report["errors"][crashed], report["errors"]
        else:
            (fault,) = graph["faults"]
            assert fault["outcome"] == "interrupted" and 0 < len(graph["iterations"]) < raw["iterations"], fault
            assert all(f["detail"].startswith("killed worker") for r in (loop, graph) for f in r["faults"])
            assert fault["iterations_lost"] == raw["iterations"] - len(graph["iterations"])
            assert all(it["reported_by"] == 3 for it in graph["iterations"])
        if raw.get("workload") == "train-digits":  # the same model, iteration by iteration
            common = min(len(loop["iterations"]), len(graph["iterations"]))
            assert common > 0
            assert [it["accuracy"] for it in graph["iterations"][:common]] == \
                [it["accuracy"] for it in loop["iterations"][:common]], name
