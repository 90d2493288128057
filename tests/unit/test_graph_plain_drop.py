"""DLCP dropping in a run without training on the hosts' graph engine (gradswitch/workload/generators/plain.py: the
job's tensors all-reduced in a row, its data gradswitch/hosts/graph_data.py SyntheticData), on the in-memory network
(tests/memlink.py) with a switch that trims every droppable packet: the plain graph's all-reduces are droppable as
the loop marks its writes, each rank's thresholds of an iteration come from what it contributes in it, receivers
zero-fill within the loss budget, and each iteration is judged by the error its zero-filled packets left against
max_relative_error, as the loop judges it (IterationCheck.correct)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gradswitch.roce.qp import Mode
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.generators import plain_graph
from gradswitch.workload.graph_iterations import rank_iterations
from gradswitch.workload.records import CheckKind
from tests.memlink import MemoryHub
from tests.unit.test_graph_engine_hosts import job_of, run_graph_threads
from tests.unit.test_plain_graph import job

ITERATIONS = 2
# every packet droppable (any layer, any magnitude), a quarter of them may be zero-filled, any error accepted
POLICY = DlcpPolicy(drop=True, loss_budget=0.25, drop_min_layer_class=0, drop_max_magnitude_class=3,
                    max_relative_error=1.0)


def test_a_run_without_training_drops_zero_fills_and_judges_each_iteration_as_the_loop(tmp_path: Path) -> None:
    graph = plain_graph(job(size=48_000), iterations=ITERATIONS)
    gj = job_of(graph)
    gj = replace(gj, job=replace(gj.job, dlcp=POLICY, transport=Mode.SR))
    hub = MemoryHub(seed=3, trim=lambda datagram: True)
    results, run = run_graph_threads(gj, tmp_path, hub)
    assert all(r["ok"] for r in results.values()), [r.get("error") for r in results.values()]
    assert hub.trimmed  # the plain graph's packets were droppable, the switch trimmed them
    assert all(t.checked for t in run.nodes)  # zero-filled values are what the job allows, not a wrong sum
    assert sum(t.zero_filled for t in run.nodes) > 0 and sum(t.error2 for t in run.nodes) > 0
    for rank in range(graph.world_size):
        its = rank_iterations(graph, run, rank, CheckKind.EXACT, dlcp=POLICY)
        assert [it.index for it in its] == list(range(ITERATIONS))
        assert all(it.correct and 0 <= it.extra["relative_error"] <= POLICY.max_relative_error for it in its)
        # a bound under the error it left fails the iteration, as the loop's check does
        strict = rank_iterations(graph, run, rank, CheckKind.EXACT, dlcp=replace(POLICY, max_relative_error=0.0))
        assert [it.correct for it in strict] == [it.extra["relative_error"] == 0 for it in its]
    assert any(it.extra["zero_filled_packets"] > 0 and it.extra["relative_error"] > 0
               for rank in range(graph.world_size)
               for it in rank_iterations(graph, run, rank, CheckKind.EXACT, dlcp=POLICY))


def test_without_dropping_the_plain_graph_is_exact(tmp_path: Path) -> None:
    graph = plain_graph(job(size=48_000), iterations=1)
    gj = job_of(graph)
    gj = replace(gj, job=replace(gj.job, dlcp=replace(POLICY, drop=False), transport=Mode.SR))
    hub = MemoryHub(seed=3, trim=lambda datagram: True)
    results, run = run_graph_threads(gj, tmp_path, hub)
    assert all(r["ok"] for r in results.values()) and not hub.trimmed
    assert all(t.checked and t.zero_filled == 0 and t.error2 == 0 for t in run.nodes)
