"""gradswitch/experiment/placed_load.py: the busiest-link load a link-paced run of a communication-only graph
keeps on the paths ECMP gives its flows, worked out by hand from the uplinks the P4 program's hash picks
(gradswitch.control.routing.ecmp_member on each flow's 5-tuple), and what the graph report's machine-bound rule makes
of it."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import pairwise

import pytest

from gradswitch.control.routing import ecmp_member
from gradswitch.experiment.graph_run import GraphRunReport, graph_job, graph_spec, summarize
from gradswitch.experiment.links import shaped_directions
from gradswitch.experiment.placed_load import flow_path, ideal_link_load, placed_traffic
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.protocol.ecmp import LoadBalance
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import qpn, udp_source_port
from gradswitch.topology.generators import leafspine, rack
from gradswitch.topology.model import Topology
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, RankGraph, world_group
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.job import Algorithm
from tests.graphs import one_collective, send_recv, through_results

A2A = CollectiveKind.ALL_TO_ALL
MIB = 1 << 20


def job_on(topo: Topology, graph: JobGraph, algo: Algorithm = Algorithm.RING) -> GraphJob:
    return graph_job(topo, ExperimentSpec.of(workers=graph.world_size, bw_mbps=8.0, iterations=1, algo=algo), graph)[0]


def uplink_by_hand(topo: Topology, job: GraphJob, src: int, dst: int, seed: int) -> str:
    """The spine the source leaf's ECMP group gives the flow src -> dst (its members in port order)."""
    a, b = job.job.nodes[src], job.job.nodes[dst]
    leaf = topo.attachment(a.host)[0]
    spines = [peer for _, peer, _ in topo.switch_neighbors(leaf)]
    member = ecmp_member(a.ip, b.ip, 17, udp_source_port(qpn(a.node_id, b.node_id, job.job.job_id)),
                         CONFIG.ROCE_V2_UDP_PORT, len(spines), seed)
    return f"{leaf}->{spines[member]}"


@pytest.mark.parametrize("seed", range(8))
def test_pairwise_all_to_all_on_a_leaf_spine_by_hand(seed: int) -> None:
    """4 ranks, 2 a leaf (ranks 0, 1 on leaf1): at step k rank p sends a chunk to p + k. A step lasts as long as
    its most loaded link: one chunk on every host link, more where two flows of a leaf share an uplink. Each
    host link carries 3 chunks in all, an uplink the chunks whose flows the hash gave it."""
    topo = leafspine(2, 2, 2, 8.0)
    job = job_on(topo, one_collective(A2A, 4, 4 * 1000))
    chunk = 1000.0
    steps, uplinks = [], Counter[str]()
    for k in (1, 2, 3):
        crossing = Counter(uplink_by_hand(topo, job, p, (p + k) % 4, seed) for p in range(4)
                           if (p < 2) != ((p + k) % 4 < 2))
        uplinks.update(crossing)
        steps.append(max([1, *crossing.values()]))
    busiest = max([3, *uplinks.values()])
    traffic = placed_traffic(job, topo, seed)
    assert traffic is not None
    assert traffic.phased_bytes == sum(steps) * chunk
    assert {link: b for link, b in traffic.bytes_by_link.items() if "spine" in link.split("->")[1]
            and link.startswith("leaf")} == {link: n * chunk for link, n in uplinks.items()}
    assert ideal_link_load(job, topo, ecmp_seed=seed) == pytest.approx(busiest / sum(steps))


def test_some_seed_shares_an_uplink() -> None:
    """The case the model is for occurs: under some seed two flows of a step share an uplink (load under 1)."""
    topo = leafspine(2, 2, 2, 8.0)
    job = job_on(topo, one_collective(A2A, 4, 4000))
    loads = {seed: ideal_link_load(job, topo, ecmp_seed=seed) for seed in range(8)}
    assert any(v is not None and v < 1 for v in loads.values()) and any(v == 1 for v in loads.values())


def test_the_crossval_exchange() -> None:
    """bench.crossval's leaf-spine all-to-all at N = 8 (4 ranks a leaf, seed 0, job 1): steps 1..7 last 1, 2, 2, 2,
    3, 2, 1 chunks (flows sharing an uplink), and leaf1->spine2, spine2->leaf2, leaf2->spine1 and spine1->leaf1
    carry 10 chunks each: 10/13."""
    topo = leafspine(2, 2, 4, 4.0)
    job = job_on(topo, one_collective(A2A, 8, MIB))
    traffic = placed_traffic(job, topo)
    assert traffic is not None
    chunk = MIB / 8
    assert traffic.phased_bytes == 13 * chunk
    assert traffic.busiest_links() == ["leaf1->spine2", "leaf2->spine1", "spine1->leaf1", "spine2->leaf2"]
    assert max(traffic.bytes_by_link.values()) == 10 * chunk
    assert ideal_link_load(job, topo) == pytest.approx(float(Fraction(10, 13)))


def test_paths_follow_the_links() -> None:
    """Every flow's path: the sender's link first, the receiver's last, each hop a shaped link direction."""
    topo = leafspine(2, 2, 4, 4.0)
    job = job_on(topo, one_collective(A2A, 8, MIB))
    from gradswitch.control.routing import compute_routes

    routes, names = compute_routes(topo), {d.name for d in shaped_directions(topo)}
    for a in job.job.nodes:
        for b in job.job.nodes:
            if a != b:
                path = flow_path(topo, routes, a, b, job.job.job_id)
                assert path[0].startswith(f"{a.host}->") and path[-1].endswith(f"->{b.host}")
                assert set(path) <= names and len(path) in (2, 4)
                assert all(x.split("->")[1] == y.split("->")[0] for x, y in pairwise(path))


@pytest.mark.parametrize("kind", [CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER,
                                  CollectiveKind.ALL_GATHER, CollectiveKind.BROADCAST])
def test_pipelined_collectives_keep_a_link_full(kind: CollectiveKind) -> None:
    """A ring or a chain is one phase: its busiest link is busy all along (ranks in ring order, one flow
    crossing each leaf's uplinks)."""
    topo = leafspine(2, 2, 4, 4.0)
    assert ideal_link_load(job_on(topo, one_collective(kind, 8, MIB)), topo) == pytest.approx(1.0)


def test_rack_exchange_keeps_every_link_full() -> None:
    assert ideal_link_load(job_on(rack(8, 4.0), one_collective(A2A, 8, MIB)), rack(8, 4.0)) == pytest.approx(1.0)


def test_collectives_in_sequence_add_their_phases() -> None:
    """An all-to-all then a ring all-reduce: the exchange's 13 chunks, then the ring's 2 x 7 on every link it uses,
    one after another. A host link carries 7 + 14 chunks; the uplink that ECMP gives the ring's crossing of a
    leaf (rank 3 -> 4, rank 7 -> 0) carries the exchange's 10 or 6 chunks there plus 14."""
    ranks = tuple(RankGraph(r, (CollectiveNode(1, "a2a", A2A, "world", MIB),
                                CollectiveNode(2, "ar", CollectiveKind.ALL_REDUCE, "world", MIB, (1,))), f"t.{r}.et")
                  for r in range(8))
    graph = JobGraph("seq", ranks, (world_group(8),))
    topo = leafspine(2, 2, 4, 4.0)
    job = job_on(topo, graph)
    traffic = placed_traffic(job, topo)
    assert traffic is not None
    chunk = MIB / 8
    exchange = {"leaf1->spine2": 10, "leaf2->spine1": 10, "leaf1->spine1": 6, "leaf2->spine2": 6}
    crossing = [uplink_by_hand(topo, job, 3, 4, 0), uplink_by_hand(topo, job, 7, 0, 0)]
    busiest = max([7 + 14, *(exchange[u] + 14 for u in crossing)])
    assert traffic.phased_bytes == (13 + 14) * chunk
    assert traffic.busiest_load == pytest.approx(busiest / 27)


def test_not_this_models_to_say() -> None:
    """Computation, a collective in the switches, flowlets, and a rank's nodes that may overlap (a send and a
    receive at once): None, and the rule keeps 1.0."""
    topo = leafspine(2, 2, 4, 4.0)
    assert ideal_link_load(job_on(topo, one_collective(A2A, 8, MIB, compute_s=0.1)), topo) is None
    in_switch = job_on(topo, one_collective(CollectiveKind.ALL_REDUCE, 8, MIB), Algorithm.NETREDUCE)
    assert in_switch.in_network and ideal_link_load(in_switch, topo) is None
    assert ideal_link_load(job_on(topo, one_collective(A2A, 8, MIB)), topo, LoadBalance.FLOWLET) is None
    assert ideal_link_load(job_on(topo, send_recv(8, MIB)), topo) is None


def node(rank: int, a: float, b: float) -> NodeTiming:
    return NodeTiming(rank, 2, "collective", a, b, A2A, "world", MIB, True)


def test_the_report_judges_against_it() -> None:
    """A communication-only run whose busiest link was 73 % loaded: machine-bound against a full link, not
    against the 77 % its placement allows; the report keeps the ideal through its file."""
    topo = leafspine(2, 2, 4, 4.0)
    graph = one_collective(A2A, 8, MIB)
    job = graph_job(topo, graph_spec(graph, bw_mbps=4.0), graph)[0]
    run = GraphRun(tuple(node(r, 0.0, 3.5) for r in range(8)))
    carried = {"leaf1->spine2": {"sent_bytes": 1_300_000, "load": 0.73}}
    ideal = ideal_link_load(job, topo)
    judged = summarize(job, run, [n.host for n in job.job.nodes], 4.0, carried, 0.4, (), 4.0, 0, ideal)
    plain = summarize(job, run, [n.host for n in job.job.nodes], 4.0, carried, 0.4, (), 4.0)
    assert judged.machine_bound is False and judged.ideal_link_load == pytest.approx(10 / 13)
    assert plain.machine_bound is True and "busiest link 73%" in (plain.machine_bound_reason or "")
    again = through_results(judged, graph)
    assert again.ideal_link_load == judged.ideal_link_load and again.machine_bound is False
    slow = summarize(job, run, [n.host for n in job.job.nodes], 4.0,
                     {"leaf1->spine2": {"sent_bytes": 1_000_000, "load": 0.55}}, 0.4, (), 4.0, 0, ideal)
    assert slow.machine_bound is True and "of the 77%" in (slow.machine_bound_reason or "")


def test_resends_no_link_explains_are_the_machines() -> None:
    """A clean run (no loss injected, no fault) whose ranks sent packets again while no link's queue dropped any:
    the machine lost or held them, machine-bound; with a link's drops, or loss injected, they are the network's."""
    topo = rack(4, 8.0)
    graph = one_collective(CollectiveKind.ALL_REDUCE, 4, MIB)
    job = graph_job(topo, graph_spec(graph, bw_mbps=8.0), graph)[0]
    run = GraphRun(tuple(NodeTiming(r, 2, "collective", 0.0, 1.6, CollectiveKind.ALL_REDUCE, "world", MIB, True)
                         for r in range(4)))
    hosts = [n.host for n in job.job.nodes]

    def report(drops: int, resent: int, lossless: bool) -> GraphRunReport:
        carried = {"h1->s1": {"sent_bytes": 1_600_000, "load": 0.98, "dropped_packets": drops},
                   "s1->h2": {"sent_bytes": 1_500_000, "load": 0.95, "dropped_packets": 0}}
        return summarize(job, run, hosts, 8.0, carried, 0.4, (), 2.0, resent, None, lossless)

    machine = report(0, 150, True)
    assert machine.machine_bound is True and machine.link_drops == 0
    assert "150 packets sent again with none dropped by a link" in (machine.machine_bound_reason or "")
    assert report(3, 150, True).machine_bound is False  # the links dropped: congestion, the network's
    assert report(0, 150, False).machine_bound is False  # loss injected
    assert report(0, 0, True).machine_bound is False
    assert through_results(machine, graph).link_drops == 0
    from gradswitch.experiment.graph_experiment import format_graph_table

    assert "packets sent again: 150, 0 dropped by the links' queues" in format_graph_table(machine, "bmv2")


def test_the_run_table_says_what_the_paths_allow() -> None:
    """What a person reads after the run: the busiest link's load beside what its paths let a link-paced run keep,
    where that is under a full link; nothing added where it is full."""
    from gradswitch.experiment.graph_experiment import format_graph_table

    topo = leafspine(2, 2, 4, 4.0)
    graph = one_collective(A2A, 8, MIB)
    job = graph_job(topo, graph_spec(graph, bw_mbps=4.0), graph)[0]
    run = GraphRun(tuple(node(r, 0.0, 3.5) for r in range(8)))
    carried = {"leaf1->spine2": {"sent_bytes": 1_300_000, "load": 0.73, "dropped_packets": 0}}
    hosts = [n.host for n in job.job.nodes]
    placed = summarize(job, run, hosts, 4.0, carried, 0.4, (), 4.0, 0, ideal_link_load(job, topo))
    assert "73% loaded (a link-paced run keeps 77% on its flows' paths" in format_graph_table(placed, "bmv2")
    full = summarize(job, run, hosts, 4.0, carried, 0.4, (), 4.0, 0, 1.0)
    assert "73% loaded\n" in format_graph_table(full, "bmv2")
