"""A worker's faults on the simulator's graph engine (gs-graph-rank.cc) against the training loop's (gs-training.cc),
through the product's run: the same spec with a slow worker (its computation x factor from the fault on), a worker
crash (its node dies at the fault's time) and a crash after an iteration (`crash`: a node dies as its next
iteration's first forward would start) gives, on both engines, the same iterations (each within 1 %, the judgement
on ns-3), the same completed count, outcome and recorded fault in results.json. A ResNet-50 ring (x0.05, one
emulated V100 per worker at 10 Gb/s) on a 2x2 leaf-spine of 4 workers: a few seconds of wall time per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.spec import Engine, ExperimentSpec, spec_from_dict
from gradswitch.topology.faults import parse_fault
from gradswitch.workload.job import Crash
from tests.ns3.helpers import both_engines
from tests.results import Report, run_experiment

pytestmark = pytest.mark.ns3

TOLERANCE = 0.01
CUT_TOLERANCE = 0.03  # measured 1.7 % (slow-worker rate=2000 in iteration 5 of a job without training)
ITERATIONS = 12


def training() -> ExperimentSpec:
    return spec_from_dict({"backend": "ns3", "algo": "ring", "workers": 4, "topo": "leafspine", "bw_mbps": 10_000,
                           "workload": "resnet50", "scale": 0.05, "iterations": ITERATIONS,
                           "emulate": {"device": "v100", "batch": 32}})


def both(spec: ExperimentSpec, out: Path) -> tuple[Report, Report]:
    loop, graph = both_engines(spec, out)  # simulated at once
    return dict(loop), dict(graph)


def agree(loop: Report, graph: Report, cut: int | None = None) -> None:
    """The same run on both engines: iterations (each within 1 %; iteration `cut`, the one a fault cuts in a job
    without training, within CUT_TOLERANCE), outcome, check and every fault's record."""
    assert (graph["ok"], graph["outcome"], graph["check"]) == (loop["ok"], loop["outcome"], loop["check"])
    assert len(graph["iterations"]) == len(loop["iterations"]) > 0
    for g, lp in zip(graph["iterations"], loop["iterations"], strict=True):
        rel = CUT_TOLERANCE if g["index"] == cut else TOLERANCE
        assert g["time_s"] == pytest.approx(lp["time_s"], rel=rel), (g["index"], g["time_s"], lp["time_s"])
    assert sum(it["time_s"] for it in graph["iterations"]) == pytest.approx(
        sum(it["time_s"] for it in loop["iterations"]), rel=TOLERANCE)
    assert [it["end"] for it in graph["iterations"]] == pytest.approx([it["end"] for it in loop["iterations"]],
                                                                     rel=TOLERANCE)
    assert all(it["correct"] for r in (loop, graph) for it in r["iterations"])
    assert graph.get("fault_outcome") == loop.get("fault_outcome")
    assert len(graph.get("faults", [])) == len(loop.get("faults", []))
    for g, lp in zip(graph.get("faults", []), loop.get("faults", []), strict=True):
        same = ("fault", "outcome", "injected_s", "iterations_lost", "fallback", "detail")
        assert {k: g.get(k) for k in same} == {k: lp.get(k) for k in same}
        for k in ("time_to_detect_s", "job_stopped_s"):
            assert (g.get(k) is None) == (lp.get(k) is None)
            if g.get(k) is not None:
                assert g[k] == pytest.approx(lp[k], rel=TOLERANCE, abs=1e-9)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The loop's run without a fault: the loop's iterations before a fault are its own to the last digit."""
    return run_experiment(training().but(engine=Engine.LOOP), tmp_path_factory.mktemp("clean"), progress=False)


def mid_iteration(clean: Report, k: int) -> float:
    """A time inside iteration k of the clean run (a fault then cuts into an iteration, not between two)."""
    it = clean["iterations"][k]
    return round(float(it["start"]) + 0.37 * (float(it["end"]) - float(it["start"])), 6)


def test_a_slow_worker_on_the_graph_engine_runs_at_the_loops_pace(tmp_path: Path, clean: Report) -> None:
    at = mid_iteration(clean, 3)
    spec = training().but(faults=(parse_fault(f"slow-worker:2@{at:g},factor=2"),))
    loop, graph = both(spec, tmp_path)
    agree(loop, graph)
    assert graph["ok"] and len(graph["iterations"]) == ITERATIONS
    [f] = graph["faults"]
    assert (f["outcome"], f["injected_s"]) == ("recovered", at)
    # from the fault on: every iteration slower than the clean run's (the others wait for the worker); before it:
    # the loop's are the clean run's (the fault's time, not earlier), and the graph's agree with them
    for run, rel in ((loop, 1e-9), (graph, TOLERANCE)):
        ratios = [(it["start"] > at, it["end"] < at, it["time_s"] / c["time_s"])
                  for it, c in zip(run["iterations"], clean["iterations"], strict=True)]
        late = [r for after, _, r in ratios if after]
        assert late and min(late) > 1.1
        assert [r for _, before, r in ratios if before] == pytest.approx([1.0] * 3, rel=rel)


def test_a_worker_crash_on_the_graph_engine_stops_the_job_as_the_loop_does(tmp_path: Path, clean: Report) -> None:
    at = mid_iteration(clean, 5)
    spec = training().but(faults=(parse_fault(f"worker-crash:1@{at:g}"),))
    loop, graph = both(spec, tmp_path)
    agree(loop, graph)
    assert graph["fault_outcome"] == "interrupted" and not graph["ok"]
    assert len(graph["iterations"]) == len([it for it in clean["iterations"] if it["end"] <= at]) == 5
    [f] = graph["faults"]
    assert (f["outcome"], f["injected_s"], f["iterations_lost"]) == ("interrupted", at, 1)


def test_a_crash_after_an_iteration_on_the_graph_engine_keeps_what_the_loop_keeps(tmp_path: Path) -> None:
    """Node 1 dies as its iteration 7 would start, the first of the ranks to get there on both engines: the job
    keeps iterations 0..5, those every worker completed (its peers' iteration 6 still had its last all-reduce to
    end). Which rank gets there first is the engines' microseconds: the graph's ranks 0 and 2 start an iteration
    4 us before 1 and 3, the loop's 1 and 3 10 us before 0 and 2, so a crash of node 2 or 3 keeps one iteration
    more on one engine than on the other (measured: node 2 loop 7 / graph 6, node 3 loop 6 / graph 7)."""
    spec = training().but(crash=Crash(node=1, after=6))
    loop, graph = both(spec, tmp_path)
    agree(loop, graph)
    assert graph["outcome"] == loop["outcome"] == "failed" and not graph["ok"]
    assert len(graph["iterations"]) == 6
    errors: dict[str, Any] = graph["errors"]
    assert any("crashed after iteration 6" in e for e in errors.values()), errors
    assert set(errors) == set(loop["errors"])


def test_a_crash_after_the_last_iteration_never_happens_on_either_engine(tmp_path: Path) -> None:
    """The loop's worker crashes as its next iteration starts: after the last there is none, and the graph's rank
    has no next first forward to die at."""
    loop, graph = both(training().but(iterations=3, crash=Crash(node=1, after=2)), tmp_path)
    agree(loop, graph)
    assert graph["ok"] and len(graph["iterations"]) == 3


@pytest.mark.ns3_mpi
@pytest.mark.parametrize("fault", ["slow-worker:2@0.0281,factor=2", "worker-crash:1@0.0431"])
def test_a_workers_fault_on_the_graph_engine_over_two_mpi_ranks_is_one_ranks_run(tmp_path: Path, fault: str) -> None:
    """The topology cut over 2 MPI ranks (as gradswitch/sim/ranks.py cuts it): the graph engine's run is one
    process's to the tick, and the loop's on 2 ranks agrees with it."""
    spec = training().but(faults=(parse_fault(fault),))
    one = run_experiment(spec.but(engine=Engine.GRAPH), tmp_path / "one", progress=False)
    two = run_experiment(spec.but(engine=Engine.GRAPH, ranks=2), tmp_path / "two", progress=False)
    assert [it["time_s"] for it in two["iterations"]] == [it["time_s"] for it in one["iterations"]]
    assert (two["fault_outcome"], two["faults"][0]["detail"]) == (one["fault_outcome"], one["faults"][0]["detail"])
    loop = run_experiment(spec.but(engine=Engine.LOOP, ranks=2), tmp_path / "loop", progress=False)
    agree(loop, two)


def plain() -> ExperimentSpec:
    """A job without training: its all-reduces in a row (the loop's gs-training.cc without `training`, the graph's
    gradswitch/workload/generators/plain.py), 1 MiB a step."""
    return spec_from_dict({"backend": "ns3", "algo": "ring", "workers": 4, "topo": "leafspine", "bw_mbps": 10_000,
                           "size_bytes": 1 << 20, "iterations": ITERATIONS})


@pytest.fixture(scope="module")
def clean_plain(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return run_experiment(plain(), tmp_path_factory.mktemp("clean-plain"), progress=False)


@pytest.mark.parametrize("fault", ["worker-crash:1@{at:g}", "slow-worker:2@{at:g},rate=2000"])
def test_a_workers_fault_in_a_job_without_training_on_the_graph_engine_is_the_loops(tmp_path: Path, fault: str,
                                                                                    clean_plain: Report) -> None:
    """Without computation a slow worker is its link's rate (`factor` has nothing to stretch, on either engine); a
    killed worker stops the job interrupted, the iterations every worker completed before kept."""
    at = mid_iteration(clean_plain, 5)
    spec = plain().but(faults=(parse_fault(fault.format(at=at)),))
    loop, graph = both(spec, tmp_path)
    # the loop without training drains its writes' acknowledgements after each iteration, the graph's operations end
    # with their outputs (docs/collectives.md): the ranks' iterations lie a little apart, so a fault in mid-iteration
    # cuts its iteration elsewhere; that iteration within 3 %, every other one and the job within 1 %
    agree(loop, graph, cut=5)
    [f] = graph["faults"]
    if fault.startswith("worker-crash"):
        assert graph["fault_outcome"] == "interrupted" and not graph["ok"]
        assert len(graph["iterations"]) == len([it for it in clean_plain["iterations"] if it["end"] <= at]) == 5
    else:
        assert graph["ok"] and len(graph["iterations"]) == ITERATIONS and f["outcome"] == "recovered"
        late = [it["time_s"] / c["time_s"] for it, c in zip(graph["iterations"], clean_plain["iterations"],
                                                            strict=True) if it["start"] > at]
        assert late and min(late) > 1.5  # a ring runs at its slowest link


def test_a_crash_after_an_iteration_in_a_job_without_training_keeps_what_the_loop_keeps(tmp_path: Path) -> None:
    """The graph's rank dies once its iteration's last all-reduce ended and its writes are acknowledged
    (gs-graph-rank.cc), the loop's node after its iteration's drain (gs-job-node.cc): the same iterations kept, the
    same node named."""
    spec = plain().but(crash=Crash(node=1, after=6))
    loop, graph = both(spec, tmp_path)
    agree(loop, graph)
    assert graph["outcome"] == loop["outcome"] == "failed" and not graph["ok"]
    assert len(graph["iterations"]) == 7  # iterations 0..6: every worker completed them before node 1 died
    errors: dict[str, Any] = graph["errors"]
    assert any("crashed after iteration 6" in e for e in errors.values()), errors
    assert errors == loop["errors"]  # the same lines: the crashed node, its peers stopped because of it
    # after the last iteration too (the loop without training's node dies once its writes are acknowledged, as
    # after any other; a training loop's only as a next iteration starts, above)
    loop, graph = both(plain().but(iterations=3, crash=Crash(node=1, after=2)), tmp_path / "last")
    agree(loop, graph)
    assert graph["outcome"] == loop["outcome"] == "failed" and not graph["ok"]
    assert len(graph["iterations"]) == 3
    # the crashed node's line the same; a peer may be named stopped on one engine and not the other: after its last
    # iteration it waits for its acknowledgements, and without the loop's drain after each iteration the ranks reach
    # that wait a little apart (every iteration of every rank kept on both)
    crashed = {k: e for k, e in graph["errors"].items() if e.startswith("crashed after iteration 2")}
    assert crashed and crashed == {k: e for k, e in loop["errors"].items() if e.startswith("crashed after iteration 2")}
    others = [e for r in (loop, graph) for k, e in r["errors"].items() if k not in crashed]
    assert all(e.startswith("stopped: node 1 of job 1 failed: crashed after iteration 2") for e in others), others
