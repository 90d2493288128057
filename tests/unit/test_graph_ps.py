"""A graph's all-reduces through parameter servers (algo = ps: gradswitch/hosts/collectives/ps.py,
gradswitch/hosts/graph_ps_server.py)
on the hosts' graph engine, ranks and servers as threads on an in-memory network (tests/memlink.py): exact for sizes
that cut into uneven keys, with several operations in flight beside the hosts' own algorithms, and under loss; the
keys' layout by hand; and the busiest-link load a link-paced run keeps (gradswitch/experiment/placed_load.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gradswitch.experiment.graph_run import graph_job, graph_spec, serial_estimate_s
from gradswitch.experiment.placed_load import ideal_link_load
from gradswitch.experiment.placement import min_rto
from gradswitch.hosts.collectives.ops import ops_of
from gradswitch.hosts.collectives.ps import PsKey, layout, runs_on_servers
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.hosts.graph_ps_server import server_ops
from gradswitch.topology.generators import rack
from gradswitch.workload.graph import CollectiveKind, JobGraph
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role
from tests.graphs import in_network_and_hosts, one_collective
from tests.memlink import MemoryHub
from tests.unit.test_graph_engine_hosts import assert_exact, run_graph_threads

AR = CollectiveKind.ALL_REDUCE


def ps_job(graph: JobGraph, servers: int, key_bytes: int) -> GraphJob:
    ranks = graph.world_size
    nodes = [Node(i, Role.WORKER, f"h{i + 1}", f"10.0.1.{i + 1}") for i in range(ranks)]
    nodes += [Node(ranks + j, Role.SERVER, f"ps{j + 1}", f"10.0.2.{j + 1}") for j in range(servers)]
    cfg = JobConfig(algo=Algorithm.PS, nodes=tuple(nodes), iterations=1, mtu=256, window=16, rto=0.01,
                    iteration_timeout=60.0, start_timeout=10.0, seed=5, ps_key_bytes=key_bytes)
    return GraphJob(cfg, graph)


def test_keys_are_dealt_round_robin_from_the_operations_k() -> None:
    """10 elements in keys of 3 over servers 7 and 8: 4 keys, the last short, the k-th all-reduce's first on server
    k mod 2; each server's member block holds its keys back to back."""
    (op,) = ops_of(one_collective(AR, 3, 40), 0).values()
    assert op.sequence == 0
    plan = layout(replace(op, sequence=1), (7, 8), 12)
    first, other = 8, 7
    assert plan.keys == (PsKey(0, 0, 3, first, 0), PsKey(1, 3, 6, other, 0), PsKey(2, 6, 9, first, 12),
                         PsKey(3, 9, 10, other, 12))
    assert plan.block == {first: 24, other: 16}


def test_more_keys_than_a_numbers_steps_go_in_rounds_numbered_after_every_operation() -> None:
    """Immediate data hold 12 bits of step: the first 4,096 keys under the operation's number (the wire of an
    operation within that, as ever), the rest in rounds of 4,096, round r under r x numbers + number, after every
    operation's own number; past what 20 bits of number hold, refused in one line with the smallest key that does."""
    (op,) = ops_of(one_collective(AR, 3, 40), 0).values()
    assert (op.number, op.numbers) == (1, 2)  # one operation: number 1; its rounds from 2 + 1 on
    assert [op.imm(s) for s in (0, 4095)] == [1 << 12, 1 << 12 | 4095]
    assert [op.imm(s) for s in (4096, 4097, 2 * 4096)] == [3 << 12, 3 << 12 | 1, 5 << 12]
    assert len(layout(replace(op, elements=6273), (7,), 4).keys) == 6273
    imms = {op.imm(k.index) for k in layout(replace(op, elements=3 * 4096 + 5), (7, 8), 4).keys}
    assert len(imms) == 3 * 4096 + 5 and {i >> 12 for i in imms} == {1, 3, 5, 7}  # rounds 0-3: 1 + 2r
    crowded = replace(op, number=1000, numbers=1 << 19)  # half a million operations: one round more fits
    assert crowded.most_steps() == 2 * 4096
    with pytest.raises(ValueError, match=r"^c/world/0: 32772 bytes make 8193 keys of ps_key_bytes = 4; this "
                                         r"operation can number at most 8192 \(immediate data of 32 bits, beside the "
                                         r"graph's 524287 operations\): raise ps_key_bytes to at least 8$"):
        layout(replace(crowded, elements=8193), (7,), 4)


@pytest.mark.parametrize(("ranks", "nbytes", "servers", "key_bytes"), [(3, 10, 1, 4), (4, 40_000, 2, 4096),
                                                                         (4, 40_000, 3, 1 << 20), (2, 20_000, 2, 4)])
def test_an_all_reduce_through_servers_is_exact(tmp_path: Path, ranks: int, nbytes: int, servers: int,
                                                 key_bytes: int) -> None:
    """Uneven keys (10 bytes in keys of one value), many keys over two servers, one key for three servers (two
    idle), and 5,000 keys (past 4,096: the rest in a second round of immediate data): every rank's sum exact, every
    key served once."""
    job = ps_job(one_collective(AR, ranks, nbytes), servers, key_bytes)
    results, run = run_graph_threads(job, tmp_path)
    assert_exact(results, run)
    (op,) = ops_of(job.graph, 0).values()
    keys = layout(op, tuple(range(ranks, ranks + servers)), key_bytes).keys
    served = {nid: r["keys_served"] for nid, r in results.items() if r["role"] == "server"}
    assert sum(served.values()) == len(keys) and len(served) == servers
    assert served == {s: sum(1 for k in keys if k.server == s) for s in served}


def test_servers_beside_the_hosts_algorithms_and_under_loss(tmp_path: Path) -> None:
    """Two world all-reduces through two servers while pairs' rings, a reduce-scatter, an all-gather and an
    all-to-all run on the hosts, 3 % of packets lost: every output exact, something resent."""
    graph = in_network_and_hosts(4, 20_000)
    job = ps_job(graph, 2, 2048)
    assert [runs_on_servers(graph, n, (4, 5)) for n in graph.ranks[0].nodes] == [
        False, True, False, False, False, False, True]
    assert [op.sequence for op in server_ops(graph, (4, 5))] == [0, 4]  # the world's 1st and 5th collectives
    results, run = run_graph_threads(job, tmp_path, MemoryHub(loss=0.03, seed=11))
    assert_exact(results, run)
    resent = sum(r["stats"]["requester"].get("retransmitted", 0) for r in results.values())
    assert resent > 0


def test_a_link_paced_run_keeps_the_servers_link_out_busy_but_for_one_key() -> None:
    """A 256 KiB all-reduce of 4 ranks through one server in keys of 16 KiB: the server's link carries 4 x 256 KiB
    each way, and its link out waits for the first key's pushes (4 x 16 KiB): 16/17; two servers in keys of 64 KiB
    (two keys each): 512 KiB over 512 + 256 KiB, 2/3. The time estimate takes the servers' bound N S/(P B)."""
    graph = one_collective(AR, 4, 256 << 10)
    topo = rack(hosts=6, bw_mbps=8)
    for servers, key_bytes, load in ((1, 16 << 10, 16 / 17), (2, 64 << 10, 2 / 3)):
        spec = graph_spec(graph, bw_mbps=8, algo=Algorithm.PS, servers=servers, ps_key_bytes=key_bytes)
        job, _ = graph_job(topo, spec, graph)
        assert [n.host for n in job.job.servers] == ["h5", "h6"][:servers]
        assert ideal_link_load(job, topo) == pytest.approx(load)
        # two full queues before a retransmission: a pull behind the server's windows, its ACK behind the pushes
        assert job.job.rto == pytest.approx(min_rto(job.job.window, job.job.mtu, 8, queues=2))
        assert job.job.rto - min_rto(job.job.window, job.job.mtu, 8) == pytest.approx(0.1)  # a 100 ms queue more
    assert serial_estimate_s(graph, 8, 1.0, servers=2) == pytest.approx(4 * (256 << 10) / 2 / 1e6)
    assert serial_estimate_s(graph, 8, 1.0) == pytest.approx(1.5 * (256 << 10) / 1e6)  # the ring's


def test_the_table_names_the_ranks_and_the_servers() -> None:
    """What a person reads first: the ranks and the parameter servers apart (the report's hosts hold both)."""
    from gradswitch.experiment.graph_experiment import placed
    from gradswitch.experiment.graph_run import summarize
    from gradswitch.workload.graph_timing import GraphRun, NodeTiming

    graph = one_collective(AR, 4, 1024)
    job = ps_job(graph, 2, 256)
    run = GraphRun(tuple(NodeTiming(r, 0, "collective", 0.0, 1.0, AR, "world", 1024, True) for r in range(4)))
    report = summarize(job, run, ["h1", "h2", "h3", "h4", "h5", "h6"], 8.0, {}, None, (), 1.0)
    assert placed(report) == "4 ranks and 2 parameter servers"
    assert placed(summarize(ps_job(graph, 1, 256), run, ["h1", "h2", "h3", "h4", "h5"], 8.0, {}, None, (), 1.0)) \
        == "4 ranks and 1 parameter server"
    (c,) = report.collectives
    assert c.algorithm == "ps" and c.bound_s == pytest.approx(4 * 1024 / (2 * 1e6))  # N S/(P B), B = 1 MB/s
