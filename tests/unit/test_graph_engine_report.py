"""graph_run's pure parts: the job the ranks get (placement, transport sizing, deadline) and the report
of a finished run (bounds at the emulated rate, per type, exposed communication per rank and group,
transfers matched, the busiest link, the bottleneck), computed by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gradswitch.experiment.graph_run import (
    SEND_RECV,
    graph_job,
    graph_spec,
    rate_bytes_per_s,
    serial_estimate_s,
    summarize,
)
from gradswitch.experiment.spec import ExperimentError
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.topology.generators import build_topology
from gradswitch.topology.model import Topology
from gradswitch.workload.graph import CollectiveKind, GraphError, JobGraph
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from tests.graphs import one_collective, send_recv, two_groups

AR = CollectiveKind.ALL_REDUCE


def job_on(topo: Topology, graph: JobGraph, dilation: float = 1.0) -> GraphJob:
    return graph_job(topo, graph_spec(graph, bw_mbps=8.0), graph, dilation=dilation)[0]


def test_job_placed_and_sized() -> None:
    topo = build_topology("leafspine", leaves=2, spines=2, hosts_per_leaf=2, bw_mbps=8.0)
    job = job_on(topo, two_groups(4, 1000), 2.0)
    hosts = [n.host for n in job.job.nodes]
    # leaves first (neighbours share a leaf), as an experiment's ring is placed
    leaf = {h: topo.attachment(h)[0] for h in hosts}
    assert leaf[hosts[0]] == leaf[hosts[1]] and leaf[hosts[2]] == leaf[hosts[3]] != leaf[hosts[0]]
    assert [n.node_id for n in job.job.nodes] == [0, 1, 2, 3] and job.dilation == 2.0
    single = job_on(topo, one_collective(AR, 4, 1000))
    assert job.job.window == max(1, single.job.window // 2)  # each rank is in two groups: "odd"/"even" and world
    assert GraphJob.from_json(job.to_json()) == job
    a2a = job_on(topo, one_collective(CollectiveKind.ALL_TO_ALL, 4, 1000))
    assert a2a.job.window == job.job.window  # two pairwise senders may write into a rank at once


def test_job_refused_before_anything_starts() -> None:
    topo = build_topology("rack", hosts=3, bw_mbps=8.0)
    with pytest.raises(ExperimentError, match="4 ranks, but the network has 3 hosts"):
        job_on(topo, one_collective(AR, 4, 1000))
    g = one_collective(AR, 2, 1000)
    with pytest.raises(ExperimentError, match="2 ranks, but workers = 3; set workers = 2"):
        graph_job(topo, graph_spec(g, bw_mbps=8.0).but(workers=3), g)
    with pytest.raises(ExperimentError, match="bw_mbps is not set"):
        graph_job(topo, graph_spec(g, bw_mbps=8.0).but(bw_mbps=None), g)
    bad = one_collective(AR, 2, 1000)
    bad = type(bad)(bad.name, bad.ranks, ())
    with pytest.raises(GraphError, match="process group 'world' is not defined"):
        job_on(topo, bad)


def test_serial_estimate_by_hand() -> None:
    """4 ranks all-reduce 1 MB at 8 Mb/s (1 MB/s): 2 x 3/4 x 1 s = 1.5 s, after 0.1 s of compute x D 3."""
    g = one_collective(AR, 4, 1_000_000, compute_s=0.1)
    assert serial_estimate_s(g, 8.0, 3.0) == pytest.approx(1.8)


def node(rank: int, nid: int, kind: str, a: float, b: float, group: str | None = "world",
         coll: CollectiveKind | None = AR, nbytes: int = 1_000_000, checked: bool | None = True) -> NodeTiming:
    return NodeTiming(rank, nid, kind, a, b, coll if kind == "collective" else None,
                      group if kind == "collective" else None, nbytes, checked)


def test_report_by_hand() -> None:
    """Two ranks: compute 0-1 s, then an all-reduce of 1 MB from 1 s to 1.25 / 1.3 s, at 8 Mb/s and D = 2
    (the emulated rate 2 MB/s: bound 2 x 1/2 x 1 MB / 2 MB/s = 0.5 s). Exposed: 0.25 and 0.3 s."""
    g = one_collective(AR, 2, 1_000_000, compute_s=1.0)
    run = GraphRun((node(0, 1, "compute", 0, 1), node(1, 1, "compute", 0, 1),
                    node(0, 2, "collective", 1.0, 1.25), node(1, 2, "collective", 1.0, 1.3)))
    job = job_on(build_topology("rack", hosts=2, bw_mbps=8.0), g, 2.0)
    carried = {"h1->s1": {"sent_bytes": 900, "load": 0.5}, "s1->h2": {"sent_bytes": 1200, "load": 0.7}}
    r = summarize(job, run, ["h1", "h2"], 8.0, carried, 0.5, (), 3.0)
    assert rate_bytes_per_s(8.0, 2.0) == 2e6
    (c,) = r.collectives
    assert (c.group, c.collective, c.members) == ("world", "all_reduce", 2) and c.bound_s == pytest.approx(0.5)
    assert c.time_s == pytest.approx(0.3) and c.checked is True and r.checked
    assert r.by_kind[0].kind == "all_reduce" and r.by_kind[0].worst_ratio == pytest.approx(0.6)
    assert r.exposed_s == {0: pytest.approx(0.25), 1: pytest.approx(0.3)}
    assert r.exposed_by_group_s == {"world": pytest.approx(0.3)}
    assert (r.busiest_link, r.busiest_link_bytes, r.busiest_link_load) == ("s1->h2", 1200, 0.7)
    assert r.machine_bound is False  # computation: only the CPU is judged, and it was half idle
    assert json.loads(json.dumps(r.section()))["collectives"][0]["time_s"] == pytest.approx(0.3)
    from gradswitch.experiment.graph_experiment import format_graph_table

    row = next(line for line in format_graph_table(r, "bmv2").splitlines() if line.startswith("all_reduce "))
    assert row.split()[:3] == ["all_reduce", "ring", "1"]  # the type, the algorithm that ran it, how many
    switched = replace(r, collectives=tuple(replace(x, algorithm="netreduce") for x in r.collectives))
    assert "all_reduce      netreduce" in format_graph_table(switched, "ns3")


def test_report_machine_bound_and_wrong() -> None:
    """Communication only: a busiest link at 50 % means the machine, not the links, set the pace; a wrong
    output makes the report unchecked."""
    g = one_collective(AR, 2, 1000)
    run = GraphRun((node(0, 2, "collective", 0, 1), node(1, 2, "collective", 0, 1, checked=False)))
    job = job_on(build_topology("rack", hosts=2, bw_mbps=8.0), g)
    r = summarize(job, run, ["h1", "h2"], 8.0, {"h1->s1": {"sent_bytes": 10, "load": 0.5}}, 0.5,
                  ("rank 1 on h2: 3 wrong",), 1.0)
    assert r.machine_bound is True and "busiest link 50%" in (r.machine_bound_reason or "")
    assert not r.checked and r.collectives[0].checked is False


def test_transfers_matched() -> None:
    """Rank r sends 1 MB to r+1: each transfer from the send's start to the later end; bound S/B."""
    g = send_recv(2, 1_000_000)
    run = GraphRun((NodeTiming(0, 1, "send", 0, 0.6, nbytes=1_000_000, checked=None),
                    NodeTiming(0, 2, "recv", 0, 0.5, nbytes=1_000_000, checked=True),
                    NodeTiming(1, 1, "send", 0, 0.5, nbytes=1_000_000, checked=None),
                    NodeTiming(1, 2, "recv", 0, 0.7, nbytes=1_000_000, checked=True)))
    job = job_on(build_topology("rack", hosts=2, bw_mbps=8.0), g)
    r = summarize(job, run, ["h1", "h2"], 8.0, {}, None, (), 1.0)
    assert [(t.src, t.dst, t.end_s) for t in r.transfers] == [(0, 1, 0.7), (1, 0, 0.5)]
    assert r.transfers[0].bound_s == pytest.approx(1.0) and r.checked and r.transfers[0].checked is True
    (k,) = r.by_kind
    assert (k.kind, k.count) == (SEND_RECV, 2)
    assert [k.time_s, k.bound_s, k.worst_ratio] == pytest.approx([1.2, 2.0, 0.7])
    assert r.machine_bound is None
