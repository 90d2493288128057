"""A graph's in-network all-reduces fall back to the hosts' ring when their switch is lost, and return when it is
back (gradswitch/hosts/fallback.py through gradswitch/hosts/graph_main.py), ranks as threads on the real RoCE
transport against the Python switch model: the switch made to drop every contribution, the signal written as the
run's watch writes it (gradswitch/experiment/netreduce_watch.py), its cells cleared, the return signalled. Every
node's output exact; the paths as the ranks report them, agreed. The same on BMv2 and ns-3, against the loop:
tests/mininet/test_faults_bmv2.py, tests/ns3/test_netreduce_fallback_sim.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from gradswitch.hosts.fallback import PathSignal, all_announced, write_signal
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.protocol.netreduce import MTU, JobLayout
from gradswitch.protocol.polling import wait_until
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, JobGraph, RankGraph, world_group
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role
from tests.unit.test_graph_engine_hosts import assert_exact, run_graph_threads
from tests.unit.test_netreduce_fallback import LosableSwitch, progress

K = CollectiveKind
WORKERS = 4
ITERATIONS = 12
NR_JOB = 2  # the graph's job 1 + 1 (gradswitch/hosts/collectives/in_network.py in_network_jobs)


def training_like(ranks: int, iterations: int) -> JobGraph:
    """Per iteration a computation, then two world all-reduces in flight at once (sizes not a multiple of a NetReduce
    message), the next iteration's computation after both; node names as the training generator's, so each
    all-reduce's iteration is known (gradswitch/workload/graph_iterations.py)."""
    out = []
    for r in range(ranks):
        nodes: list[ComputeNode | CollectiveNode] = []
        for i in range(iterations):
            base = 3 * i
            after = (base - 2, base - 1) if i else ()
            nodes += [ComputeNode(base, f"it{i}.fwd.layer", 1e-4, after),
                      CollectiveNode(base + 1, f"it{i}.allreduce.a", K.ALL_REDUCE, "world", 40_004, (base,)),
                      CollectiveNode(base + 2, f"it{i}.allreduce.b", K.ALL_REDUCE, "world", 9_000, (base,))]
        out.append(RankGraph(r, tuple(nodes)))
    return JobGraph("fallback", tuple(out), (world_group(ranks),))


def job() -> GraphJob:
    nodes = tuple(Node(i, Role.WORKER, f"h{i + 1}", f"10.0.1.{i + 1}") for i in range(WORKERS))
    cfg = JobConfig(algo=Algorithm.RING, nodes=nodes, iterations=1, mtu=MTU, window=16, rto=0.05, credits=2,
                    iteration_timeout=60.0, start_timeout=10.0, seed=5)
    return GraphJob(cfg, training_like(WORKERS, ITERATIONS), 1.0, {K.ALL_REDUCE: NR_JOB})


def test_a_lost_switch_sends_the_graphs_all_reduces_to_ring_and_back(tmp_path: Path) -> None:
    g = job()
    hub = LosableSwitch(JobLayout(NR_JOB, WORKERS, 2), [n.ip for n in g.job.nodes], seed=5)
    errors: list[BaseException] = []

    def control() -> None:  # what the run's watch does on the controller's health events
        try:
            wait_until(lambda: progress(tmp_path, WORKERS) >= 2, 60, 0.005, "2 iterations")
            hub.lost = True
            write_signal(tmp_path, NR_JOB, PathSignal(1, "s1", "switch-down s1"))
            wait_until(lambda: all_announced(tmp_path, NR_JOB, 1, WORKERS), 30, 0.005, "the fallback's announcements")
            wait_until(lambda: progress(tmp_path, WORKERS) >= 5, 60, 0.005, "5 iterations")
            hub.restart()
            write_signal(tmp_path, NR_JOB, PathSignal(2, "s1", "switch-up s1"))
        except BaseException as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=control, daemon=True)
    t.start()
    results, run = run_graph_threads(g, tmp_path, hub)
    t.join(timeout=60)
    assert not errors, (errors, [r.get("error") for r in results.values()])
    assert_exact(results, run)
    assert len(run.collectives()) == 2 * ITERATIONS
    reports: list[dict[str, Any]] = [r["fallback"] for r in results.values()]
    assert len(reports) == WORKERS
    for fb in reports:
        assert [c["path"] for c in fb["changes"]] == ["ring", "switch"], fb
    # every rank agreed on where each path started; ring ran the reductions between (some redone for the others)
    assert len({tuple(c["from_reduction"] for c in fb["changes"]) for fb in reports}) == 1
    ring_from, switch_from = (c["from_reduction"] for c in reports[0]["changes"])
    assert ring_from < switch_from < 2 * ITERATIONS
    for fb in reports:
        assert fb["by_ring"] + fb["redone_for_others"] == switch_from - ring_from
        assert fb["by_switch"] + fb["by_ring"] == 2 * ITERATIONS
        # each reduction's iteration is the node's: the ring's by iteration within the ones the loss reached
        assert all(2 <= int(i) < ITERATIONS for i in fb["ring_by_iteration"]), fb["ring_by_iteration"]
    assert hub.events["completion"] > 0  # the switch summed, before and after
