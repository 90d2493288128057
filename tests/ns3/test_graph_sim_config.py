"""The graph section of the simulator's configuration (gradswitch/sim/sim_config.py graph_json,
gradswitch/sim/graph_run.py):
what it carries of gradswitch.workload.graph's model, the check it chooses, its NetReduce job (algo = netreduce), and
the placements it refuses before the simulator starts. No simulator needed."""

from __future__ import annotations

import pytest

from gradswitch.sim.graph_run import GraphTransport, config, placement
from gradswitch.sim.run import SimError
from gradswitch.sim.sim_config import graph_check_mode, graph_json
from gradswitch.sim.sim_settings import CheckMode, SimSettings
from gradswitch.topology.generators import rack
from gradswitch.workload.broadcast_chain import CHUNK_BYTES, MAX_CHUNKS
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    ProcessGroup,
    RankGraph,
    RecvNode,
    SendNode,
    from_dict,
    to_dict,
    world_group,
)
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role


def graph(nbytes: int = 4096) -> JobGraph:
    groups = (world_group(3), ProcessGroup("pair", (2, 0)))
    r0 = (ComputeNode(5, "fwd", 0.25), CollectiveNode(6, "ag", CollectiveKind.ALL_GATHER, "pair", nbytes, (5,)),
          CollectiveNode(7, "bc", CollectiveKind.BROADCAST, "world", nbytes, (6,), root=2),
          SendNode(8, "s", 1, 3, 100, (7,)))
    r1 = (CollectiveNode(0, "bc", CollectiveKind.BROADCAST, "world", nbytes, (), root=2),
          RecvNode(1, "r", 0, 3, 100, (0,)))
    r2 = (CollectiveNode(0, "ag", CollectiveKind.ALL_GATHER, "pair", nbytes),
          CollectiveNode(1, "bc", CollectiveKind.BROADCAST, "world", nbytes, root=2))
    return JobGraph("g", (RankGraph(0, r0, "g.0.et"), RankGraph(1, r1), RankGraph(2, r2)), groups)


def test_the_graph_section_is_the_plain_form_with_groups_by_index():
    g = graph()
    plain = to_dict(g)
    section = graph_json(g)
    assert section["groups"] == [{"ranks": [0, 1, 2]}, {"ranks": [2, 0]}]
    for r, rank in enumerate(plain["ranks"]):
        for mine, full in zip(section["ranks"][r]["nodes"], rank["nodes"], strict=True):
            if full["kind"] == "collective":
                assert g.groups[mine["group"]].name == full["group"]
            expected = {k: v for k, v in full.items() if k not in ("name", "group")}
            assert {k: v for k, v in mine.items() if k != "group"} == expected
    assert from_dict(plain) == g


def test_a_rank_with_an_earlier_ranks_nodes_names_the_first_rank_with_them():
    """Ranks whose nodes are the same (a data-parallel job's) are given once: each later one is `same_as` the first
    rank with those nodes; the node names, which the section leaves out, do not make two ranks differ."""
    a = (ComputeNode(0, "fwd", 0.25), CollectiveNode(1, "ar", CollectiveKind.ALL_REDUCE, "world", 4096, (0,)))
    b = (ComputeNode(0, "fwd", 0.5), CollectiveNode(1, "ar", CollectiveKind.ALL_REDUCE, "world", 4096, (0,)))
    renamed = (ComputeNode(0, "forward", 0.25), CollectiveNode(1, "all-reduce", CollectiveKind.ALL_REDUCE, "world",
                                                                4096, (0,)))
    c = a[:1] + (CollectiveNode(1, "ar", CollectiveKind.ALL_REDUCE, "world", 4096, (0,), layer_class=1),)
    g = JobGraph("dp", tuple(RankGraph(r, nodes) for r, nodes in enumerate((a, b, renamed, b, c))), (world_group(5),))
    section = graph_json(g)
    assert [r.get("same_as") for r in section["ranks"]] == [None, None, 0, 1, None]
    assert [len(r.get("nodes", ())) for r in section["ranks"]] == [2, 2, 0, 0, 2]
    assert all(len(r) == 1 for r in section["ranks"])
    assert section["ranks"][4]["nodes"][1]["layer_class"] == 1 and section["ranks"][0]["nodes"][1]["layer_class"] == 0


def test_auto_check_is_exact_while_small_and_digest_at_scale():
    assert graph_check_mode(graph(4096), SimSettings()) == CheckMode.EXACT
    assert graph_check_mode(graph(64 << 20), SimSettings()) == CheckMode.DIGEST
    assert graph_check_mode(graph(64 << 20), SimSettings(check=CheckMode.EXACT)) == CheckMode.EXACT


def test_ranks_go_on_the_hosts_in_order_or_as_given():
    assert placement(graph(), rack(4)) == ("h1", "h2", "h3")
    assert placement(graph(), rack(4), ["h4", "h2", "h1"]) == ("h4", "h2", "h1")
    doc, _ = config(graph(), rack(4), SimSettings(), ["h4", "h2", "h1"])
    assert [n["host"] for n in doc["jobs"][0]["nodes"]] == ["h4", "h2", "h1"]
    assert doc["jobs"][0]["algo"] == "graph" and doc["jobs"][0]["iterations"] == 1


@pytest.mark.parametrize(("hosts", "said"), [
    (None, "graph g: 3 ranks but rack has 2 hosts"),
    (["h1"], "graph g: 1 hosts for 3 ranks"),
])
def test_a_placement_that_cannot_be_is_refused(hosts, said):
    with pytest.raises(SimError, match=said):
        placement(graph(), rack(2), hosts)


def test_a_bad_graph_is_refused_before_the_simulator_starts():
    g = graph()
    bad = JobGraph(g.name, (g.ranks[0], RankGraph(1, (RecvNode(1, "r", 0, 3, 100, (9,)),)), g.ranks[2]), g.groups)
    with pytest.raises(GraphError, match=r"rank 1: node 1 \(r\): depends on node 9, which does not exist"):
        config(bad, rack(4), SimSettings())


def test_the_broadcast_chunks_are_the_hosts():
    """Both backends cut a broadcast's buffer alike (the chain's fill is part of its time): the simulator is told
    the one rule the hosts follow."""
    sent = graph_json(graph())
    assert (sent["broadcast_chunk_bytes"], sent["broadcast_max_chunks"]) == (CHUNK_BYTES, MAX_CHUNKS)


def test_a_job_places_the_ranks_and_sets_the_transport():
    """The BMv2 run's job (its workers' hosts, window, seed) is what the simulator runs, servers left out."""
    nodes = tuple(Node(r, Role.WORKER, h, "") for r, h in enumerate(["h3", "h1", "h2"]))
    job = JobConfig(Algorithm.RING, nodes, window=17, seed=5, iterations=4)
    doc, _ = config(graph(), rack(4), SimSettings(), job=job)
    [j] = doc["jobs"]
    assert [n["host"] for n in j["nodes"]] == ["h3", "h1", "h2"]
    assert (j["transport"]["window"], j["seed"], j["iterations"]) == (17, 5, 1)
    with pytest.raises(SimError, match="not both"):
        config(graph(), rack(4), SimSettings(), hosts=["h1", "h2", "h3"], job=job)


def test_a_netreduce_job_is_the_graph_sections_and_what_it_cannot_be_is_refused():
    """algo = netreduce: the graph section names the switch job its world all-reduces run on (absent without); the
    job's credits are the ones the switches and the workers use. A transport of another mtu, a rank sharing a host,
    one rank, or the graph's own id are refused in one line."""
    nr = GraphTransport(mtu=4096)
    doc, cfg = config(graph(), rack(4), SimSettings(), transport=nr, netreduce_job=2)
    [j] = doc["jobs"]
    assert j["graph"]["netreduce"] == {"job_id": 2, "placeholders": False, "grow_placeholders": False}
    assert j["credits"] == cfg.credits and j["job_id"] == 1
    grown = config(graph(), rack(4), SimSettings(gather_placeholders=True, grow_placeholders=True), transport=nr,
                   netreduce_job=2)[0]
    assert grown["jobs"][0]["graph"]["netreduce"] == {"job_id": 2, "placeholders": True, "grow_placeholders": True}
    assert "netreduce" not in config(graph(), rack(4), SimSettings(), transport=nr)[0]["jobs"][0]["graph"]
    with pytest.raises(SimError, match=r"^graph g: NetReduce packets are 4096 bytes, but the transport's mtu is 1024: "
                                       r"give mtu = 4096$"):
        config(graph(), rack(4), SimSettings(), netreduce_job=2)
    with pytest.raises(SimError, match=r"^graph g: NetReduce needs every rank on a host of its own$"):
        config(graph(), rack(4), SimSettings(), ["h1", "h2", "h1"], nr, netreduce_job=2)
    with pytest.raises(SimError, match=r"^graph g: the NetReduce job needs an id of its own, not the graph's job "
                                       r"id 1$"):
        config(graph(), rack(4), SimSettings(), transport=nr, netreduce_job=1)
    one = JobGraph("one", (RankGraph(0, (CollectiveNode(0, "ar", CollectiveKind.ALL_REDUCE, "world", 4),)),),
                   (world_group(1),))
    with pytest.raises(SimError, match=r"^graph one: NetReduce needs at least 2 ranks, not 1$"):
        config(one, rack(4), SimSettings(), transport=nr, netreduce_job=2)
