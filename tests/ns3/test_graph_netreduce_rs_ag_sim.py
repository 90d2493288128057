"""NetReduce reduce-scatter and all-gather in the simulator's switches (docs/netreduce.md "Reduce-scatter and
all-gather", docs/simulator.md "The graph engine"): with algo = netreduce the graph engine hands a world group's
reduce-scatters and all-gathers to the switches, each type on a NetReduce switch job of its own, as
gradswitch/hosts/collectives/in_network.py does on BMv2.

On the rack and the 2x2 leaf-spine, 4 ranks at 10 Gb/s: a 4 MiB reduce-scatter and an all-gather of 1 MiB shards
are exact (every node's check: the values a rank must get whole and exact, every other copy trimmed), every cell
summed once at the top of the tree, nothing resent. Each is within 5 % of a hand-computed bound of the in-network
operation's link-rate time: S/B for both (reduce-scatter: every rank sends its whole buffer; all-gather: every
rank sends the other ranks' messages as zeros, whole, as on BMv2); the what-if of placeholders on switches that
could grow them (SimSettings.gather_placeholders and grow_placeholders) brings the rack's all-gather to (N-1) s/B
with 8 credits, and waits for credits with the job's 4. Placeholders on switches that cannot grow them (as
netreduce.p4) are held when they would complete a cell and resent whole: exact, and slower. Under 2 % loss on
every rank's link both stay exact. Two MPI
ranks give one process's node times to the tick. A 16-rank fat tree sums in its edges, pods and a core, exact. On
an oversubscribed leaf-spine (one spine) the leaves aggregate: one copy of the buffer crosses a leaf's uplink each
way, not one per rank behind it, and the times of ring and NetReduce keep the ratio of the bytes each puts on the
spine's links. `gradswitch experiment --backend ns3 --algo netreduce` with a reduce-scatter trace runs it in the
switches. A wrong sum is caught by its owner's check."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.sim.graph_run import GraphSimResult, GraphTransport, config, job_config, placement, run_graph
from gradswitch.sim.run import SimError, simulate
from gradswitch.sim.sim_settings import CheckMode, SimSettings
from gradswitch.topology.generators import fattree, leafspine, rack
from gradswitch.topology.model import Topology
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, RankGraph, world_group
from tests.graphs import trace_figures

pytestmark = pytest.mark.ns3

K = CollectiveKind
N = 4
SIZE = 4 << 20  # a reduce-scatter's buffer S; an all-gather's output (shards of S / N)
MBPS = 10_000
RATE = MBPS * 1e6 / 8  # bytes per second
NR = GraphTransport(mtu=NETREDUCE_MTU, window=64)
JOBS = {K.ALL_REDUCE: 2, K.REDUCE_SCATTER: 3, K.ALL_GATHER: 4}  # graph_job's: the graph's job 1 + 1, + 2, + 3
MESSAGE = 16 << 10  # a NetReduce message (gradswitch.protocol.netreduce MESSAGE_ELEMENTS int32)
PACKETS = MESSAGE // NETREDUCE_MTU
GROWN = "grown"  # an all-gather on switches that could grow a placeholder (SimSettings.grow_placeholders)


def one(kind: CollectiveKind, nbytes: int, ranks: int = N) -> JobGraph:
    """One world collective of `nbytes` (all-gather: a rank's shard) on every rank."""
    nodes = tuple(RankGraph(r, (CollectiveNode(0, str(kind), kind, "world", nbytes),)) for r in range(ranks))
    return JobGraph(f"{kind}", nodes, (world_group(ranks),))


def graph_bytes(kind: CollectiveKind, ranks: int = N, size: int = SIZE) -> int:
    return size // ranks if kind == K.ALL_GATHER else size


def run(kind: CollectiveKind, topo: Topology, out: Path, netreduce: bool = True, ranks: int = N,
        size: int = SIZE, credits: int | None = None, **settings: Any) -> GraphSimResult:
    """The collective on the topology's first hosts, through the switches or on ring; `credits`: the NetReduce
    jobs' (None: the job's default, 4)."""
    graph = one(kind, graph_bytes(kind, ranks, size), ranks)
    job = job_config(graph, placement(graph, topo), topo, NR)
    return run_graph(graph, topo, SimSettings(check=CheckMode.EXACT, **settings), out_dir=out,
                     job=job if credits is None else replace(job, credits=credits),
                     in_network={kind: JOBS[kind]} if netreduce else None)


def in_network_bound_s(kind: CollectiveKind, hierarchical: bool, ranks: int = N, size: int = SIZE,
                       grown: bool = False) -> float:
    """The in-network operation's link-rate time (docs/netreduce.md's table): reduce-scatter S/B, every rank's
    whole buffer up its link; all-gather S/B too, every rank sending the other ranks' messages as zeros, whole,
    and on a leaf-spine each leaf's partial sums go up whole (netreduce_scatter.p4: copies between switches stay
    whole). With placeholders on a rack's switch that could grow them (`grown`), all-gather's is (N-1) s/B:
    every rank receives every other shard, and sends only its own."""
    if kind == K.ALL_GATHER and grown and not hierarchical:
        return (ranks - 1) * (size // ranks) / RATE
    return size / RATE


def times(result: GraphSimResult) -> list[float]:
    return [n.end_s - n.start_s for n in result.run.nodes]


def events(result: GraphSimResult, job: int) -> dict[str, dict[str, int]]:
    return {name: sw["netreduce"][str(job)] for name, sw in result.sim.raw["switches"].items()
            if sw.get("netreduce", {}).get(str(job))}


@pytest.fixture(scope="module", params=["rack", "leafspine"])
def fabric(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """On one fabric: a reduce-scatter and an all-gather through the switches (the job's 4 credits, and 8, the P4
    program's most), on ring, and the all-gather on switches that could grow a placeholder (`GROWN`)."""
    topo = rack(N, MBPS) if request.param == "rack" else leafspine(2, 2, 2, MBPS)
    tmp = tmp_path_factory.mktemp(f"rs-ag-{request.param}")
    out: dict[Any, Any] = {"name": request.param, "topo": topo}
    for kind in (K.REDUCE_SCATTER, K.ALL_GATHER):
        out[kind] = run(kind, topo, tmp / f"{kind}-nr")
        out[(kind, 8)] = run(kind, topo, tmp / f"{kind}-nr8", credits=8)
        out[(kind, "ring")] = run(kind, topo, tmp / f"{kind}-ring", netreduce=False)
    grown = {"gather_placeholders": True, "grow_placeholders": True}
    out[GROWN] = run(K.ALL_GATHER, topo, tmp / "ag-grown", **grown)
    out[(GROWN, 8)] = run(K.ALL_GATHER, topo, tmp / "ag-grown8", credits=8, **grown)
    return out


def requester(result: GraphSimResult, counter: str) -> int:
    """A counter of the ranks' requesters, summed (retransmitted, naks, timeouts)."""
    return sum(int(n["stats"]["requester"].get(counter, 0)) for n in result.sim.raw["jobs"][0]["nodes"])


@pytest.mark.parametrize("kind", [K.REDUCE_SCATTER, K.ALL_GATHER, GROWN])
def test_it_runs_in_the_switches_exact_every_cell_once(fabric, kind):
    result: GraphSimResult = fabric[kind]
    grown = kind == GROWN
    kind = K.ALL_GATHER if grown else kind
    assert result.ok() and result.check == CheckMode.EXACT
    assert [n.checked for n in result.run.nodes] == [True] * N
    messages = SIZE // MESSAGE  # every rank sends every message: its data (or, all-gather, a placeholder)
    for node in result.sim.raw["jobs"][0]["nodes"]:
        assert node["netreduce_jobs"] == {str(JOBS[kind]): node["netreduce"]}
        assert node["netreduce"]["messages"] == messages
    seen = events(result, JOBS[kind])
    assert len(seen) == (1 if fabric["name"] == "rack" else 3)  # the rack's switch; two leaves and a spine
    tops = [e for e in seen.values() if "partial-up" not in e]
    assert len(tops) == 1 and tops[0]["completion"] == messages * PACKETS  # every cell once, at the top
    placeholders = sum(e.get("placeholder", 0) for e in seen.values())
    # the what-if: every rank sends a placeholder for each packet of the messages it does not own, each taken as
    # zeros; else none (all-gather: zeros, whole; reduce-scatter: its values)
    assert placeholders == (messages * PACKETS * (N - 1) if grown else 0)
    # none held, none resent, nothing refused
    assert not any(k in e for e in seen.values() for k in ("malformed", "no-context", "duplicate", "placeholder-last"))
    assert requester(result, "retransmitted") == 0
    # the copies not for the rank came trimmed and were taken as zeros, every one: reduce-scatter's N - 1 of
    # every N messages, all-gather's the rank's own
    for node in result.sim.raw["jobs"][0]["nodes"]:
        zero = node["stats"]["responder"].get("zero_filled", 0)
        assert zero == (messages * PACKETS * (N - 1) // N if kind == K.REDUCE_SCATTER else messages * PACKETS // N)


@pytest.mark.parametrize("kind", [K.REDUCE_SCATTER, K.ALL_GATHER, GROWN])
@pytest.mark.parametrize("credits", [4, 8])
def test_its_time_is_within_5_percent_of_its_in_network_bound(fabric, kind, credits):
    """With the job's 4 credits and with 8 (the P4 program's most) every rank's time is within 5 % of the bound,
    but for the what-if's all-gather on the rack with 4: a message's values come from its owner alone, its credit
    returns once its copy has crossed the next rank's downlink behind the round's N - 2 other copies, and it waits
    for credits, about a quarter over its bound."""
    result: GraphSimResult = fabric[kind if credits == 4 else (kind, 8)]
    assert result.ok()
    grown = kind == GROWN
    bound = in_network_bound_s(K.ALL_GATHER if grown else kind, fabric["name"] != "rack", grown=grown)
    waits = grown and credits == 4 and fabric["name"] == "rack"
    for t in times(result):
        assert (1.15 * bound <= t <= 1.35 * bound) if waits else (bound <= t <= 1.05 * bound), (t / bound, waits)


def test_against_the_ring_on_a_fabric_that_is_not_oversubscribed(fabric):
    """Reduce-scatter: the ring's bound is (N-1)/N S/B, NetReduce's S/B: the ring is N/(N-1) faster, as on
    BMv2; all-gather too (each rank sends S). With placeholders on switches that could grow them, all-gather on
    the rack would be at (N-1) s/B as the ring (with 8 credits), a tie; on the leaf-spine the leaves' uplinks
    carry S either way, the ring's (N-1)/N S: the ring again N/(N-1) faster."""
    for kind in (K.REDUCE_SCATTER, K.ALL_GATHER, GROWN):
        ring = fabric[(K.ALL_GATHER if kind == GROWN else kind, "ring")]
        assert ring.ok()
        ratio = max(times(fabric[(kind, 8)])) / max(times(ring))
        tie = kind == GROWN and fabric["name"] == "rack"
        assert ratio == pytest.approx(1.0 if tie else N / (N - 1), rel=0.05), (kind, ratio)


@pytest.mark.parametrize("kind", [K.REDUCE_SCATTER, K.ALL_GATHER])
def test_two_percent_loss_on_every_link_is_recovered_exactly(tmp_path, kind):
    """2 % of the packets into and out of every rank's link lost (the configuration's `loss`): the senders'
    RC retransmissions recover them, a retransmission for a complete cell is answered on its connection alone,
    trimmed or whole as that receiver's copy was; every output still exact."""
    result = run(kind, leafspine(2, 2, 2, MBPS), tmp_path, size=1 << 20, loss_pct=2.0)
    assert result.ok() and [n.checked for n in result.run.nodes] == [True] * N
    lost = sum(sw["drops"].get("fault-injected", 0) for sw in result.sim.raw["switches"].values())
    assert lost > 0
    seen = events(result, JOBS[kind])
    assert sum(e.get("retransmitted-result", 0) for e in seen.values()) > 0
    tops = [e for e in seen.values() if "partial-up" not in e]
    assert [t["completion"] for t in tops] == [(1 << 20) // NETREDUCE_MTU]


@pytest.mark.ns3_mpi
def test_two_mpi_ranks_give_one_processs_times_to_the_tick(tmp_path):
    """A reduce-scatter, then an all-gather of its shards, then an all-reduce, each in the switches on its own
    job, the leaves and spines on different MPI ranks."""
    topo = leafspine(4, 2, 2, MBPS)
    ranks = 8
    nodes = tuple(RankGraph(r, (CollectiveNode(0, "rs", K.REDUCE_SCATTER, "world", 1 << 20),
                                CollectiveNode(1, "ag", K.ALL_GATHER, "world", (1 << 20) // ranks, (0,)),
                                CollectiveNode(2, "ar", K.ALL_REDUCE, "world", 256 << 10, (1,))))
                  for r in range(ranks))
    graph = JobGraph("rs-ag-ar", nodes, (world_group(ranks),))
    single = run_graph(graph, topo, out_dir=tmp_path / "one", transport=NR, in_network=JOBS)
    two = run_graph(graph, topo, out_dir=tmp_path / "two", transport=NR, in_network=JOBS, mpi_ranks=2)
    assert single.ok() and two.ok()
    assert two.sim.mpi is not None and two.sim.mpi.ranks == 2
    key = lambda n: (n.rank, n.node_id)  # noqa: E731
    assert sorted(two.run.nodes, key=key) == sorted(single.run.nodes, key=key)
    assert all(n.checked is True for n in single.run.nodes)
    for node in single.sim.raw["jobs"][0]["nodes"]:
        assert set(node["netreduce_jobs"]) == {"2", "3", "4"}


def test_a_fat_tree_sums_in_its_edges_pods_and_a_core_exact(tmp_path):
    """16 ranks on a k = 4 fat tree: a reduce-scatter of 1 MiB, then an all-gather of its shards, each summed by
    every edge switch, one aggregation switch per pod and one core (gs-topology.h), exact."""
    ranks = 16
    nodes = tuple(RankGraph(r, (CollectiveNode(0, "rs", K.REDUCE_SCATTER, "world", 1 << 20),
                                CollectiveNode(1, "ag", K.ALL_GATHER, "world", (1 << 20) // ranks, (0,))))
                  for r in range(ranks))
    result = run_graph(JobGraph("fat", nodes, (world_group(ranks),)), fattree(ranks, bw_mbps=MBPS),
                       SimSettings(check=CheckMode.EXACT), out_dir=tmp_path, transport=NR, in_network=JOBS)
    assert result.ok() and [n.checked for n in result.run.nodes] == [True] * 2 * ranks
    for kind in (K.REDUCE_SCATTER, K.ALL_GATHER):
        seen = events(result, JOBS[kind])
        assert len(seen) == 8 + 4 + 1  # every edge, an aggregation switch in each pod, a core
        tops = [e for e in seen.values() if "partial-up" not in e]
        assert [t["completion"] for t in tops] == [(1 << 20) // NETREDUCE_MTU]


def uplink_bytes(result: GraphSimResult, spine: str = "spine1") -> tuple[int, int]:
    """What the leaves sent up to the spine and what it sent down, in bytes on the wire."""
    ports = result.sim.raw["switches"][spine]["ports"]
    return sum(p["rx_bytes"] for p in ports.values()), sum(p["tx_bytes"] for p in ports.values())


@pytest.mark.parametrize("kind", [K.REDUCE_SCATTER, K.ALL_GATHER])
def test_on_an_oversubscribed_leaf_spine_the_leaves_aggregate(tmp_path, kind):
    """8 ranks, four a leaf, one spine whose links run at half the hosts' rate (8:1 at each leaf). Each leaf
    sends one copy of the buffer up (its partial sums, whole) and gets one down: 2 S on the spine's links, not
    one copy per rank behind a leaf (8 S unaggregated); the ring's two crossings carry 2 (N-1)/N S. Both are
    bound by the spine's links, so NetReduce's time over the ring's is the ratio of those bytes, N/(N-1)."""
    ranks = 8
    topo = leafspine(2, 1, 4, MBPS, MBPS / 2)
    nr = run(kind, topo, tmp_path / "nr", ranks=ranks)
    ring = run(kind, topo, tmp_path / "ring", netreduce=False, ranks=ranks)
    assert nr.ok() and ring.ok()
    up, down = uplink_bytes(nr)
    assert up == pytest.approx(2 * SIZE, rel=0.03) and down == pytest.approx(2 * SIZE, rel=0.03)
    ring_up, _ = uplink_bytes(ring)
    assert ring_up == pytest.approx(2 * (ranks - 1) / ranks * SIZE, rel=0.03)
    ratio = max(times(nr)) / max(times(ring))
    assert ratio == pytest.approx(ranks / (ranks - 1), rel=0.08), ratio
    assert requester(nr, "retransmitted") == 0


def test_where_a_link_between_switches_sets_the_pace_a_placeholder_may_come_last_and_is_held(tmp_path):
    """The oversubscribed leaf-spine of the test above, its all-gather with placeholders on switches that cannot
    grow them (as netreduce.p4; gradswitch/hosts/netreduce_gather.py's `placeholders`): the spine's links set the pace,
    the ranks wait for credits in step and placeholders often reach a leaf last; the switch holds each
    (placeholder-last), its sender resends it whole after a NAK or a timeout, go-back-N: exact, but many times
    the time of every rank sending the others' messages whole (the default)."""
    ranks = 8
    topo = leafspine(2, 1, 4, MBPS, MBPS / 2)
    graph = one(K.ALL_GATHER, graph_bytes(K.ALL_GATHER, ranks), ranks)
    job = job_config(graph, placement(graph, topo), topo, NR)
    settings = SimSettings(check=CheckMode.EXACT)
    doc, _ = config(graph, topo, settings, job=job, in_network={K.ALL_GATHER: JOBS[K.ALL_GATHER]})
    whole = simulate(doc, tmp_path / "whole")
    doc["jobs"][0]["graph"]["netreduce"]["placeholders"] = True
    held = simulate(doc, tmp_path / "held")
    for raw in (whole, held):
        assert [n["graph"][0][3] for n in raw["jobs"][0]["nodes"]] == [True] * ranks  # every output exact

    def counts(raw: dict[str, Any], event: str) -> int:
        return sum(sw.get("netreduce", {}).get(str(JOBS[K.ALL_GATHER]), {}).get(event, 0)
                   for sw in raw["switches"].values())

    def resent(raw: dict[str, Any]) -> int:
        return sum(n["stats"]["requester"].get("retransmitted", 0) for n in raw["jobs"][0]["nodes"])

    def slowest(raw: dict[str, Any]) -> float:
        return max(float(n["graph"][0][2]) - float(n["graph"][0][1]) for n in raw["jobs"][0]["nodes"])

    assert counts(whole, "placeholder") == counts(whole, "placeholder-last") == resent(whole) == 0
    assert counts(held, "placeholder-last") > 0 and resent(held) > counts(held, "placeholder-last")
    assert slowest(held) > 5 * slowest(whole), (slowest(held), slowest(whole))


def test_an_experiment_hands_a_reduce_scatter_trace_to_the_switches(tmp_path):
    """`gradswitch export-et` then `gradswitch experiment --backend ns3 --algo netreduce --workload-et`: the
    trace's world reduce-scatter runs on the graph's reduce-scatter switch job, reported as netreduce, exact;
    with `--loss 2` still exact, the report's resent packets those of every rank's queue pairs (the switch job's
    included), as the BMv2 report counts them."""
    prefix = tmp_path / "et" / "rs"
    made = subprocess.run([sys.executable, "-m", "gradswitch.cli.main", "export-et", "--collective", "reduce_scatter",
                           "--workers", "4", "--size", "1MiB", "--out", str(prefix)],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert made.returncode == 0, made.stderr
    done = subprocess.run([sys.executable, "-m", "gradswitch.cli.main", "experiment", "--backend", "ns3", "--bw",
                           str(MBPS), "--out", str(tmp_path / "run"), "--workload-et", str(prefix), "--topo", "rack",
                           "--algo", "netreduce"], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checks: every output exact" in done.stdout
    report = trace_figures(tmp_path / "run" / "results.json")
    (c,) = report["collectives"]
    assert c["algorithm"] == "netreduce" and c["collective"] == "reduce_scatter"
    assert c["bound_s"] == pytest.approx((1 << 20) / RATE)  # the in-network reduce-scatter's bound, S/B
    sim = json.loads((tmp_path / "run" / "sim" / "sim-results.json").read_text())
    assert sim["switches"]["s1"]["netreduce"][str(JOBS[K.REDUCE_SCATTER])]["completion"] == (1 << 20) // NETREDUCE_MTU
    assert report["resent_packets"] == 0
    lossy = subprocess.run([sys.executable, "-m", "gradswitch.cli.main", "experiment", "--backend", "ns3", "--bw",
                            str(MBPS), "--out", str(tmp_path / "lossy"), "--workload-et", str(prefix), "--topo", "rack",
                            "--algo", "netreduce", "--loss", "2"], capture_output=True, text=True, timeout=300,
                           cwd=REPO_ROOT)
    assert lossy.returncode == 0, lossy.stdout + lossy.stderr
    assert "checks: every output exact" in lossy.stdout
    report = trace_figures(tmp_path / "lossy" / "results.json")
    sim = json.loads((tmp_path / "lossy" / "sim" / "sim-results.json").read_text())
    resent = sum(n["stats"]["requester"].get("retransmitted", 0) for n in sim["jobs"][0]["nodes"])
    assert report["resent_packets"] == resent > 0


def test_what_the_switches_cannot_run_is_refused_in_one_line(tmp_path):
    g = one(K.ALL_GATHER, 1 << 16)
    topo = rack(N, MBPS)
    with pytest.raises(SimError, match=r"each in-network collective type needs a switch job of its own"):
        config(g, topo, SimSettings(), transport=NR, in_network={K.ALL_GATHER: 3, K.REDUCE_SCATTER: 3})
    with pytest.raises(SimError, match=r"the switches run .*, not all_to_all$"):
        config(g, topo, SimSettings(), transport=NR, in_network={K.ALL_TO_ALL: 3})
    doc, _ = config(g, topo, SimSettings(), transport=NR, in_network={K.ALL_GATHER: 4})
    assert doc["jobs"][0]["graph"]["netreduce"] == {"all_gather_job_id": 4, "placeholders": False,
                                                    "grow_placeholders": False}
    doc["jobs"][0]["credits"] = 9
    with pytest.raises(SimError) as refused:
        simulate(doc, tmp_path / "credits")
    assert "a reduce-scatter's or all-gather's switch job takes at most 8" in str(refused.value)
    doc["jobs"][0]["credits"] = 4
    doc["jobs"][0]["graph"]["netreduce"] = {}
    with pytest.raises(SimError) as refused:
        simulate(doc, tmp_path / "none")
    assert "jobs[0].graph.netreduce: names no switch job" in str(refused.value)


@pytest.mark.parametrize("mode", [CheckMode.EXACT, CheckMode.DIGEST])
def test_a_wrong_sum_in_the_switch_is_caught_by_its_owners_check(tmp_path, mode):
    """The switch adds one contribution of a reduce-scatter twice (the configuration's switch faults, for
    tests): the cell's sum goes whole to its owner alone, whose node's check fails; every other rank got that
    copy trimmed, and its own shard right."""
    graph = one(K.REDUCE_SCATTER, 1 << 20)
    doc, _ = config(graph, rack(N, MBPS), SimSettings(check=mode), transport=NR,
                    in_network={K.REDUCE_SCATTER: JOBS[K.REDUCE_SCATTER]})
    doc["switch"]["faults"] = {"netreduce_double_add": 1}
    raw = simulate(doc, tmp_path)
    checked = [n["graph"][0][3] for n in raw["jobs"][0]["nodes"]]
    assert sorted(checked) == [False, True, True, True]
    # the first message's first packet, the first to reach the switch, is in rank 0's shard
    assert checked[0] is False
