"""The hosts' graph engine on BMv2 (gradswitch/experiment/graph_run.py): 4 ranks on the rack at 8 Mb/s,
one graph per collective type and one of send/recv, every output exact and each time within a stated
factor of its link-rate bound; and two process groups running collectives at the same time, clean and
with 2 % loss; and with algo = netreduce, the world group's all-reduce, reduce-scatter and all-gather in the
switches (one NetReduce job each), exact clean and under 2 % loss, beside collectives the hosts run.

8 Mb/s: bench.crossval's rate, where a ring on this 2-core machine keeps its links busy (at 20 Mb/s it was
machine-bound); a run the machine limited says nothing about the algorithm, so, as bench.crossval does,
each graph is judged on the first of a few runs the links limited."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradswitch.experiment.graph_experiment import run_graph
from gradswitch.experiment.graph_run import GraphRunReport
from gradswitch.experiment.testbed import Testbed
from gradswitch.hosts.collectives.in_network import NETREDUCE
from gradswitch.net.network import NetworkOptions
from gradswitch.topology.generators import leafspine, rack
from gradswitch.workload.graph import IN_NETWORK, CollectiveKind, JobGraph
from gradswitch.workload.job import Algorithm
from tests.graphs import in_network_and_hosts, one_collective, send_recv, two_groups

pytestmark = pytest.mark.mininet

BW_MBPS = 8.0
NBYTES = 1 << 20  # the buffer S (all-gather: a shard of S/4); at 256 KiB fixed costs left the links 70 % loaded
ATTEMPTS = 5  # runs until one the links limited: CI met three in a row with the CPU 12-15 % idle (41 % alone)
# Time over the link-rate bound each collective may take here. Measured on this 2-core machine in four runs
# (1 MiB, 4 ranks, 8 Mb/s): all-reduce 1.04; reduce-scatter 1.06-1.07; all-gather 1.03-1.04; all-to-all
# 1.06-1.07; broadcast 1.05-1.08; send/recv 1.04-1.06 (headers, acknowledgements, a chain's fill). 1.25 leaves
# room for a busier machine, and still fails a schedule that moves a third more than it must (one chunk too many
# per member at N = 4) or a broadcast that is not pipelined (3x along a chain of 4).
FACTOR: dict[str, float] = dict.fromkeys(
    ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "send_recv"], 1.25)


def link_bound(net: Testbed, graph: JobGraph, run_dir: Path, algo: Algorithm = Algorithm.RING) -> GraphRunReport:
    """The first of ATTEMPTS runs that the links, not the machine, limited (each exact)."""
    reasons = []
    for attempt in range(ATTEMPTS):
        report = run_graph(net, graph, run_dir / f"{graph.name}-{attempt}", bw_mbps=BW_MBPS, algo=algo)
        assert report.checked, report.errors
        if not report.machine_bound:
            return report
        reasons.append(report.machine_bound_reason)
    pytest.fail(f"{graph.name}: every run was machine-bound (is something else using the CPU?): {reasons}")


def test_every_collective_exact_and_near_its_bound(tmp_path: Path) -> None:
    graphs = [one_collective(kind, 4, NBYTES // 4 if kind == CollectiveKind.ALL_GATHER else NBYTES, root=2)
              for kind in CollectiveKind] + [send_recv(4, NBYTES)]
    seen = {}
    with Testbed(rack(hosts=4, bw_mbps=BW_MBPS), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for graph in graphs:
            report = link_bound(net, graph, tmp_path)
            (kind,) = report.by_kind
            seen[kind.kind] = kind.worst_ratio
            print(f"{graph.name}: {kind.time_s:.3f} s, bound {kind.bound_s:.3f} s, x{kind.worst_ratio:.2f}, "
                  f"busiest link {report.busiest_link_load}, CPU idle {report.cpu_idle}")
            assert all(n.checked for n in report.run.nodes if n.kind not in ("compute", "send"))
            assert report.hosts == ("h1", "h2", "h3", "h4")
    assert set(seen) == set(FACTOR)
    over = {k: round(r, 2) for k, r in seen.items() if not 1.0 <= r <= FACTOR[k]}
    assert not over, f"time over bound outside [1, factor]: {over} (factors {FACTOR})"


def test_two_groups_at_once_and_under_loss(tmp_path: Path) -> None:
    """Even and odd ranks each run an all-reduce and an all-gather at the same time (four collectives on
    two groups in flight), then a world all-reduce after both: all exact, overlapping as the graph allows;
    then the same graph with the switches dropping 2 % of the RoCE packets on every rank's link, exact."""
    graph = two_groups(4, NBYTES)
    with Testbed(rack(hosts=4, bw_mbps=BW_MBPS), NetworkOptions(run_dir=tmp_path / "net")) as net:
        report = run_graph(net, graph, tmp_path / "clean", bw_mbps=BW_MBPS)
        lossy = run_graph(net, graph, tmp_path / "lossy", bw_mbps=BW_MBPS, loss_pct=2.0)
    assert report.checked, report.errors
    by = {(n.rank, n.node_id): n for n in report.run.nodes}
    for r in range(4):
        ar, ag, world = by[(r, 2)], by[(r, 3)], by[(r, 4)]
        assert max(ar.start_s, ag.start_s) < min(ar.end_s, ag.end_s), (r, ar, ag)
        assert world.start_s >= max(ar.end_s, ag.end_s)
    groups = {c.group for c in report.collectives}
    assert groups == {"even", "odd", "world"} and set(report.exposed_by_group_s) == groups
    assert lossy.checked, lossy.errors
    assert lossy.resent_packets > 0, "2 % loss, yet nothing was resent"


# NetReduce's time over the report's in-network bound (gradswitch/workload/collective_bounds.py: S/B for all three;
# all-gather's ranks send the other ranks' messages as zeros, whole), measured here (1 MiB, 4 ranks, 8 Mb/s, clean, not
# machine-bound): all-reduce 1.03-1.07, reduce-scatter 1.03, all-gather 1.02, nothing resent (with placeholders, which
# the switch holds when one would complete its cell, all-gather took 3.3x, 3,731 packets resent: docs/netreduce.md
# "All-gather"). The factors leave room for a busier machine.
NETREDUCE_FACTOR = {"all_reduce": 1.25, "reduce_scatter": 1.25, "all_gather": 1.25}


def test_netreduce_collectives_exact_and_against_their_bounds(tmp_path: Path) -> None:
    """Each of all-reduce, reduce-scatter and all-gather of the world group in the switches: exact, the report
    naming NetReduce, each time within its factor of its bound; then each under 2 % loss, exact."""
    graphs = [one_collective(kind, 4, NBYTES // 4 if kind == CollectiveKind.ALL_GATHER else NBYTES)
              for kind in IN_NETWORK]
    seen = {}
    with Testbed(rack(hosts=4, bw_mbps=BW_MBPS), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for graph in graphs:
            report = link_bound(net, graph, tmp_path, Algorithm.NETREDUCE)
            (kind,) = report.by_kind
            seen[kind.kind] = kind.worst_ratio
            print(f"netreduce {graph.name}: {kind.time_s:.3f} s, bound {kind.bound_s:.3f} s, x{kind.worst_ratio:.2f}, "
                  f"resent {report.resent_packets}, busiest link {report.busiest_link_load}, CPU {report.cpu_idle}")
            assert [c.algorithm for c in report.collectives] == [NETREDUCE]
        lossy = [run_graph(net, g, tmp_path / f"lossy-{g.name}", bw_mbps=BW_MBPS, algo=Algorithm.NETREDUCE,
                           loss_pct=2.0) for g in graphs]
    assert set(seen) == set(NETREDUCE_FACTOR)
    over = {k: round(r, 2) for k, r in seen.items() if not 1.0 <= r <= NETREDUCE_FACTOR[k]}
    assert not over, f"time over bound outside [1, factor]: {over} (factors {NETREDUCE_FACTOR})"
    for report in lossy:
        print(f"netreduce {report.graph} at 2 % loss: {report.job_s:.3f} s, resent {report.resent_packets}")
        assert report.checked, report.errors
        assert all(n.checked for n in report.run.nodes if n.kind != "compute")
        assert report.resent_packets > 0, f"{report.graph}: 2 % loss, yet nothing was resent"


def test_netreduce_beside_the_hosts_algorithms(tmp_path: Path) -> None:
    """Three switch jobs and the hosts' rings in flight at once, then an all-to-all on the hosts and a second
    in-network all-reduce on the first's job: every output exact, each collective's algorithm reported."""
    graph = in_network_and_hosts(4, NBYTES // 4)
    with Testbed(rack(hosts=4, bw_mbps=BW_MBPS), NetworkOptions(run_dir=tmp_path / "net")) as net:
        report = run_graph(net, graph, tmp_path / "mixed", bw_mbps=BW_MBPS, algo=Algorithm.NETREDUCE)
    assert report.checked, report.errors
    algos = {(c.group, c.collective, c.index): c.algorithm for c in report.collectives}
    assert algos == {("world", "all_reduce", 0): NETREDUCE, ("world", "reduce_scatter", 1): NETREDUCE,
                     ("world", "all_gather", 2): NETREDUCE, ("pair0", "all_reduce", 0): "ring",
                     ("pair1", "all_reduce", 0): "ring", ("world", "all_to_all", 3): "pairwise",
                     ("world", "all_reduce", 4): NETREDUCE}
    by = {(n.rank, n.node_id): n for n in report.run.nodes}
    for r in range(4):  # the switch jobs and the pair's ring overlap
        ar, pair = by[(r, 2)], by[(r, 5)]
        assert max(ar.start_s, pair.start_s) < min(ar.end_s, pair.end_s), (r, ar, pair)


def test_netreduce_on_a_leaf_spine_exact(tmp_path: Path) -> None:
    """The same three on a 2x2 leaf-spine, two ranks a leaf: each aggregated (or replicated) in two levels,
    leaves then a spine, exact (times here only on the rack: at this size the machine sets them)."""
    graphs = [one_collective(kind, 4, NBYTES // 16 if kind == CollectiveKind.ALL_GATHER else NBYTES // 4)
              for kind in IN_NETWORK]
    with Testbed(leafspine(2, 2, 2, BW_MBPS), NetworkOptions(run_dir=tmp_path / "net")) as net:
        reports = [run_graph(net, g, tmp_path / g.name, bw_mbps=BW_MBPS, algo=Algorithm.NETREDUCE) for g in graphs]
    for report in reports:
        assert report.checked, report.errors
        assert [c.algorithm for c in report.collectives] == [NETREDUCE]
        assert len({net_leaf(h) for h in report.hosts}) == 2


def net_leaf(host: str) -> str:
    return leafspine(2, 2, 2, BW_MBPS).attachment(host)[0]
