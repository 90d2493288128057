"""The hosts' graph engine on the real RoCE transport, ranks as threads on an in-memory network
(tests/memlink.py): every collective and send/recv exact, on a subset group, concurrently on two
groups, under loss, and a wrong output caught."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gradswitch.hosts.graph_job import GraphJob, read_timing
from gradswitch.hosts.graph_main import run_node
from gradswitch.protocol.polling import wait_until
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, RankGraph, validate, world_group
from gradswitch.workload.graph_timing import GraphRun
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role
from tests.graphs import one_collective, send_recv, two_groups
from tests.memlink import MemoryHub


def job_of(graph: JobGraph, dilation: float = 1.0, seed: int = 5) -> GraphJob:
    nodes = tuple(Node(i, Role.WORKER, f"h{i + 1}", f"10.0.1.{i + 1}") for i in range(graph.world_size))
    cfg = JobConfig(algo=Algorithm.RING, nodes=nodes, iterations=1, mtu=256, window=16, rto=0.01,
                    iteration_timeout=60.0, start_timeout=10.0, seed=seed)
    return GraphJob(cfg, graph, dilation)


def run_graph_threads(job: GraphJob, run_dir: Path, hub: MemoryHub | None = None,
                      jobs: dict[int, GraphJob] | None = None) -> tuple[dict[int, Any], GraphRun]:
    """Every node (rank or parameter server) a thread running gradswitch.hosts.graph_main.run_node; `jobs`: another job
    file for some ranks."""
    validate(job.graph)
    jobs = jobs or {}
    hub = hub or MemoryHub(seed=3)
    links = {n.node_id: hub.link(n.ip) for n in job.job.nodes}
    results: dict[int, Any] = {}

    def rank(r: int) -> None:
        results[r] = dict(run_node(jobs.get(r, job), r, run_dir, links[r]))

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in links]
    for t in threads:
        t.start()
    wait_until(lambda: all((run_dir / f"ready-{r}").exists() for r in links) or len(results) == len(links), 20,
               what="the ranks to be ready")
    (run_dir / "go").write_text(str(time.monotonic()))
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a rank hung"
    nodes = tuple(n for r in links if (run_dir / f"graph-{r}.json").exists() for n in read_timing(run_dir, r).nodes)
    return results, GraphRun(nodes)


def assert_exact(results: dict[int, Any], run: GraphRun) -> None:
    assert all(r["ok"] for r in results.values()), [r.get("error") for r in results.values()]
    comm = [n for n in run.nodes if n.kind not in ("compute", "send")]
    assert comm and all(n.checked is True for n in comm)
    assert all(n.checked is None for n in run.nodes if n.kind == "send")  # its receiver checks


@pytest.mark.parametrize("kind", list(CollectiveKind))
@pytest.mark.parametrize("ranks,nbytes", [(4, 40_000), (3, 10)])
def test_every_collective_exact(tmp_path: Path, kind: CollectiveKind, ranks: int, nbytes: int) -> None:
    """Sizes that divide unevenly (10 bytes over 3 ranks: chunks of 1 and 0 elements) included."""
    results, run = run_graph_threads(job_of(one_collective(kind, ranks, nbytes, root=ranks - 1)), tmp_path)
    assert_exact(results, run)
    assert len(run.collectives()) == 1 and run.collectives()[0].checked is True


def test_send_recv_exact(tmp_path: Path) -> None:
    results, run = run_graph_threads(job_of(send_recv(4, 30_000)), tmp_path)
    assert_exact(results, run)
    assert sorted(n.kind for n in run.nodes) == ["recv"] * 4 + ["send"] * 4


def test_two_groups_at_once(tmp_path: Path) -> None:
    """Even and odd ranks' all-reduce and all-gather run at the same time on four groups' worth of
    operations sharing queue pairs; each is exact, and the world all-reduce starts after both."""
    results, run = run_graph_threads(job_of(two_groups(4, 20_000)), tmp_path)
    assert_exact(results, run)
    by = {(n.rank, n.node_id): n for n in run.nodes}
    for r in range(4):
        assert by[(r, 4)].start_s >= max(by[(r, 2)].end_s, by[(r, 3)].end_s)
        assert by[(r, 2)].start_s >= by[(r, 1)].end_s
        # the group's all-reduce and all-gather overlapped in time (both started before either ended)
        assert max(by[(r, 2)].start_s, by[(r, 3)].start_s) < min(by[(r, 2)].end_s, by[(r, 3)].end_s)
    assert {c.group for c in run.collectives()} == {"even", "odd", "world"}


def test_exact_under_loss(tmp_path: Path) -> None:
    hub = MemoryHub(loss=0.02, seed=11)
    results, run = run_graph_threads(job_of(two_groups(4, 40_000)), tmp_path, hub)
    assert hub.dropped > 0
    assert_exact(results, run)


def test_compute_is_dilated(tmp_path: Path) -> None:
    """A 50 ms computation at dilation 2 takes 100 ms of the clock and is reported as 50 ms."""
    results, run = run_graph_threads(job_of(one_collective(CollectiveKind.ALL_REDUCE, 2, 4000, compute_s=0.05), 2.0),
                                     tmp_path)
    assert_exact(results, run)
    comp = [n for n in run.nodes if n.kind == "compute"]
    assert all(n.duration_s == pytest.approx(0.05, rel=1e-6) for n in comp)
    coll = [n for n in run.nodes if n.kind == "collective"]
    assert all(c.start_s >= 0.05 - 1e-6 for c in coll)


def test_collectives_of_one_group_at_once(tmp_path: Path) -> None:
    """Three collectives of the world group with no dependency between them run at the same time."""
    kinds = (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_TO_ALL)
    ranks = tuple(RankGraph(r, tuple(CollectiveNode(i, str(k), k, "world", 20_000) for i, k in enumerate(kinds)))
                  for r in range(3))
    results, run = run_graph_threads(job_of(JobGraph("three", ranks, (world_group(3),))), tmp_path)
    assert_exact(results, run)
    for r in range(3):
        mine = [n for n in run.nodes if n.rank == r]
        assert max(n.start_s for n in mine) < min(n.end_s for n in mine)


def test_a_wrong_output_is_caught(tmp_path: Path) -> None:
    """Rank 1 draws its input with another seed than the others expect: every member's all-reduce is wrong,
    and the ranks say which node and how many elements."""
    graph = one_collective(CollectiveKind.ALL_REDUCE, 3, 4000)
    results, run = run_graph_threads(job_of(graph), tmp_path, jobs={1: job_of(graph, seed=6)})
    assert [r["ok"] for r in results.values()] == [False] * 3
    assert all(r.get("check_failed") for r in results.values())
    assert "node 2 (all_reduce, c/world/0): 1000 of 1000 elements wrong" in results[0]["error"]
    assert [n.checked for n in run.nodes] == [False] * 3
