"""The graph engine distributed over MPI ranks (docs/simulator.md "Distributed over MPI ranks"): the same
execution graphs on one process and on two MPI ranks give the same node times and checks, to the tick, also
with the world all-reduce in the switches (algo = netreduce)."""

from __future__ import annotations

import pytest

from gradswitch.sim.graph_run import GraphTransport, run_graph
from gradswitch.topology.generators import leafspine
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    JobGraph,
    ProcessGroup,
    RankGraph,
    RecvNode,
    SendNode,
    world_group,
)

pytestmark = [pytest.mark.ns3, pytest.mark.ns3_mpi]


def mixed(ranks: int = 8) -> JobGraph:
    """Per rank: compute, an all-reduce of the world, then an all-to-all in its half and a send to and a
    receive from the rank half the job away, all three at once."""
    half = ranks // 2
    groups = (world_group(ranks), ProcessGroup("lo", tuple(range(half))), ProcessGroup("hi", tuple(range(half, ranks))))
    out = []
    for r in range(ranks):
        peer = (r + half) % ranks
        out.append(RankGraph(r, (
            ComputeNode(0, "fwd", 1e-4 * (1 + r % 3)),
            CollectiveNode(1, "ar", CollectiveKind.ALL_REDUCE, "world", 1 << 20, (0,)),
            CollectiveNode(2, "a2a", CollectiveKind.ALL_TO_ALL, "lo" if r < half else "hi", 256 << 10, (1,)),
            SendNode(3, "send", peer, 5, 64 << 10, (1,)),
            RecvNode(4, "recv", peer, 5, 64 << 10, (1,)),
        )))
    return JobGraph("mixed", tuple(out), groups)


def test_two_ranks_give_one_ranks_answer_exactly(tmp_path):
    topo = leafspine(4, 2, 2, 10_000)
    one = run_graph(mixed(), topo, out_dir=tmp_path / "one", transport=GraphTransport(window=128))
    two = run_graph(mixed(), topo, out_dir=tmp_path / "two", transport=GraphTransport(window=128), mpi_ranks=2)
    assert one.ok() and two.ok()
    assert two.sim.mpi is not None and two.sim.mpi.ranks == 2
    key = lambda n: (n.rank, n.node_id)  # noqa: E731
    assert sorted(two.run.nodes, key=key) == sorted(one.run.nodes, key=key)
    assert all(n.checked is (True if n.kind in ("collective", "recv") else None) for n in one.run.nodes)


def test_netreduce_on_two_ranks_gives_one_ranks_answer_exactly(tmp_path):
    """algo = netreduce: the world all-reduce through the switches (its tree's leaves and spine on different
    ranks, their partial sums and results crossing between them), the rest on the hosts; the same node times and
    checks to the tick on two MPI ranks as on one process."""
    topo = leafspine(4, 2, 2, 10_000)
    transport = GraphTransport(mtu=4096, window=128)
    one = run_graph(mixed(), topo, out_dir=tmp_path / "one", transport=transport, netreduce_job=2)
    two = run_graph(mixed(), topo, out_dir=tmp_path / "two", transport=transport, mpi_ranks=2, netreduce_job=2)
    assert one.ok() and two.ok()
    assert two.sim.mpi is not None and two.sim.mpi.ranks == 2
    key = lambda n: (n.rank, n.node_id)  # noqa: E731
    assert sorted(two.run.nodes, key=key) == sorted(one.run.nodes, key=key)
    assert all(n.checked is (True if n.kind in ("collective", "recv") else None) for n in one.run.nodes)
    # the all-reduce went through the switches: every message of it summed at the tree's top
    tops = [sw["netreduce"]["2"] for sw in two.sim.raw["switches"].values()
            if sw.get("netreduce") and "partial-up" not in sw["netreduce"]["2"]]
    assert [t["completion"] for t in tops] == [(1 << 20) // 4096]
