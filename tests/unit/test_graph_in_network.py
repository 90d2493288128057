"""Which of a graph's collectives the switches run (algo = netreduce), on which NetReduce job, in which
order a rank starts them, and how the job file and the report carry it; the runs themselves are on BMv2
(tests/mininet/test_graph_bmv2.py) and on the simulator (tests/ns3/test_graph_netreduce_sim.py)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from gradswitch.control.netreduce_jobs import place_job
from gradswitch.experiment.graph_run import aggregation_spine_of, graph_job, graph_spec, summarize
from gradswitch.experiment.spec import Backend, ExperimentError
from gradswitch.hosts.collectives.in_network import (
    HOST_ALGORITHM,
    NETREDUCE,
    InNetworkJob,
    algorithm,
    in_network_jobs,
    job_order,
)
from gradswitch.hosts.comm import Wait
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.hosts.netreduce import NetReduceWorker
from gradswitch.protocol.netreduce import JobLayout
from gradswitch.topology.generators import build_topology
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    JobGraph,
    ProcessGroup,
    RankGraph,
    world_group,
)
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.job import Algorithm

K = CollectiveKind


def mixed(ranks: int = 4) -> JobGraph:
    """World all-reduce, reduce-scatter, all-gather, all-to-all and broadcast, a pair's all-reduce, and a
    second world all-reduce; the first world all-reduce depends on a computation, the second does not."""
    pair = ProcessGroup("pair", (0, 1))
    out = []
    for r in range(ranks):
        nodes: list[ComputeNode | CollectiveNode] = [
            ComputeNode(1, "fwd", 0.001),
            CollectiveNode(2, "ar", K.ALL_REDUCE, "world", 4096, (1,)),
            CollectiveNode(3, "rs", K.REDUCE_SCATTER, "world", 4096),
            CollectiveNode(4, "ag", K.ALL_GATHER, "world", 1024),
            CollectiveNode(5, "a2a", K.ALL_TO_ALL, "world", 4096),
            CollectiveNode(6, "bc", K.BROADCAST, "world", 4096, (), 1),
            CollectiveNode(8, "ar2", K.ALL_REDUCE, "world", 4096),
        ]
        if r in pair.ranks:
            nodes.append(CollectiveNode(7, "pair-ar", K.ALL_REDUCE, "pair", 4096))
        out.append(RankGraph(r, tuple(nodes), f"t.{r}.et"))
    return JobGraph("mixed", tuple(out), (world_group(ranks), pair))


def test_world_reductions_and_gathers_in_the_switches_one_job_each() -> None:
    g = mixed()
    jobs = in_network_jobs(g, 1)
    assert jobs == {K.ALL_REDUCE: 2, K.REDUCE_SCATTER: 3, K.ALL_GATHER: 4}
    assert algorithm(g, "world", K.ALL_REDUCE, jobs) == NETREDUCE
    assert algorithm(g, "world", K.ALL_GATHER, jobs) == NETREDUCE
    assert algorithm(g, "pair", K.ALL_REDUCE, jobs) == "ring"  # a sub-group stays on the hosts
    assert algorithm(g, "world", K.ALL_TO_ALL, jobs) == "pairwise"
    assert algorithm(g, "world", K.BROADCAST, jobs) == "chain"
    assert algorithm(g, "world", K.ALL_REDUCE, {}) == "ring"  # algo = ring: everything on the hosts
    assert set(HOST_ALGORITHM) == set(CollectiveKind)
    # only the kinds the graph has get a job
    only_ag = JobGraph("ag", tuple(RankGraph(r, (CollectiveNode(1, "ag", K.ALL_GATHER, "world", 64),), "x")
                                   for r in range(2)), (world_group(2),))
    assert in_network_jobs(only_ag, 5) == {K.ALL_GATHER: 8}
    # several graphs: ids from `first`, a place for every type, so two graphs' ids never meet
    assert in_network_jobs(g, 1, 3) == {K.ALL_REDUCE: 3, K.REDUCE_SCATTER: 4, K.ALL_GATHER: 5}
    assert in_network_jobs(only_ag, 2, 6) == {K.ALL_GATHER: 8}


def test_a_group_of_every_rank_out_of_order_stays_on_the_hosts() -> None:
    """NetReduce's shards are owned in worker order: a world group listed in another order is not its."""
    shuffled = ProcessGroup("w", (1, 0, 2))
    g = JobGraph("s", tuple(RankGraph(r, (CollectiveNode(1, "rs", K.REDUCE_SCATTER, "w", 64),), "x")
                            for r in range(3)), (shuffled,))
    assert in_network_jobs(g, 1) == {}


def test_start_order_per_job_is_topological_and_alike_on_every_rank() -> None:
    g = mixed()
    jobs = in_network_jobs(g, 1)
    orders = [job_order(g, r, jobs) for r in range(4)]
    assert all(o == orders[0] for o in orders)
    assert orders[0][2] == 0 and orders[0][8] == 1  # the two world all-reduces, in topological order
    assert orders[0][3] == 0 and orders[0][4] == 0  # reduce-scatter's and all-gather's own jobs
    assert 7 not in orders[0] and 5 not in orders[0]


class FakeRequester:
    """A queue pair's sending half, idle or with writes unacknowledged."""

    unacknowledged = True

    def idle(self) -> bool:
        return not self.unacknowledged


class FakeWorker:
    """Stands for a NetReduceWorker: hands out message numbers as reduce_op starts, as messages_op does."""

    def __init__(self, quorum: int | None = None) -> None:
        self.k = 0
        self.gate = False
        self.layout = JobLayout(2, 4, 2, quorum=quorum)
        self.last_contributors = [(0, 1, 2)]
        self.requester = FakeRequester()
        self.comm = SimpleNamespace(qps={1: SimpleNamespace(requester=self.requester)})

    def reduce_op(self, iteration: int, unit: int, seq: int, data: Int32Array, mark: int
                  ) -> Generator[Wait, None, Int32Array]:
        first = self.k
        self.k += 1
        yield lambda: self.gate
        return np.full(len(data), first, dtype=np.int32)


def test_a_later_operation_waits_for_the_earlier_to_take_its_numbers() -> None:
    fake = FakeWorker()
    job = InNetworkJob(cast(NetReduceWorker, fake))
    data = np.zeros(3, dtype=np.int32)
    second = job.run(1, K.ALL_REDUCE, data)
    wait = next(second)  # ready first, yet second in the order: it waits, taking no number
    assert fake.k == 0 and not wait()
    first = job.run(0, K.ALL_REDUCE, data)
    next(first)
    assert fake.k == 1 and job.started == 1 and wait()
    next(second)
    assert fake.k == 2
    fake.gate = True
    for gen, k in ((first, 0), (second, 1)):
        with pytest.raises(StopIteration) as done:
            gen.send(None)
        assert list(done.value.value) == [k] * 3


def test_job_file_carries_the_switch_jobs_and_the_spec_sets_them() -> None:
    topo = build_topology("rack", hosts=4, bw_mbps=8.0)
    g = mixed()
    spec = graph_spec(g, bw_mbps=8.0, algo=Algorithm.NETREDUCE)
    job, _ = graph_job(topo, spec, g)
    assert job.in_network == {K.ALL_REDUCE: 2, K.REDUCE_SCATTER: 3, K.ALL_GATHER: 4}
    assert GraphJob.from_json(job.to_json()) == job
    ring, _ = graph_job(topo, graph_spec(g, bw_mbps=8.0), g)
    assert ring.in_network == {}
    legacy = ring.to_json().replace(',\n "in_network": {}', "")
    assert "in_network" not in legacy and GraphJob.from_json(legacy) == ring  # a job file from before
    # the simulator's switches run the same three, as the same switch jobs
    sim, _ = graph_job(topo, spec.but(backend=Backend.NS3), g)
    assert sim.in_network == {K.ALL_REDUCE: 2, K.REDUCE_SCATTER: 3, K.ALL_GATHER: 4}


def test_the_all_reduce_switch_job_aggregates_on_its_graph_jobs_spine_as_the_loops_job() -> None:
    """On the 2x2 leaf-spine, a graph's all-reduce switch job (2) aggregates where the loop's NetReduce job 1 does
    (spine1: `(job - 1)` mod the spines), not where its own id would (spine2); its reduce-scatter and all-gather jobs
    on their own ids' spines; a second graph job's all-reduce on that job's spine (spine2), whatever its id."""
    topo = build_topology("leafspine", leaves=2, spines=2, hosts_per_leaf=4, bw_mbps=8.0)
    g = mixed()
    job, _ = graph_job(topo, graph_spec(g, bw_mbps=8.0, algo=Algorithm.NETREDUCE), g)
    hosts = tuple(n.host for n in job.job.workers)
    assert len({topo.attachment(h)[0] for h in hosts}) == 2  # its ranks on both leaves: a spine aggregates
    assert job.job.job_id == 1 and job.in_network[K.ALL_REDUCE] == 2
    loop = place_job(topo, 1, hosts, 4, []).aggregation_switch
    assert loop == "spine1" and place_job(topo, 2, hosts, 4, []).aggregation_switch == "spine2"
    assert aggregation_spine_of(topo, job, K.ALL_REDUCE) == loop
    assert aggregation_spine_of(topo, job, K.REDUCE_SCATTER) is None  # plan_job's default: its own id's
    assert aggregation_spine_of(topo, job, K.ALL_GATHER) is None
    # as the control plane installs it (the spine it is given)
    placed = place_job(topo, 2, hosts, 4, [], aggregation_spine_of(topo, job, K.ALL_REDUCE))
    assert placed.aggregation_switch == "spine1"
    second = replace(job, job=replace(job.job, job_id=2), in_network={K.ALL_REDUCE: 6})
    assert aggregation_spine_of(topo, second, K.ALL_REDUCE) == "spine2"
    # one switch under every rank: it aggregates them alone, no spine to choose
    rack = build_topology("rack", hosts=4, bw_mbps=8.0)
    on_rack, _ = graph_job(rack, graph_spec(g, bw_mbps=8.0, algo=Algorithm.NETREDUCE), g)
    assert aggregation_spine_of(rack, on_rack, K.ALL_REDUCE) is None


def test_too_many_ranks_for_an_in_network_reduce_scatter_refused() -> None:
    ranks = 32  # NetReduce on BMv2 takes 32 workers; reduce-scatter's owner field holds 31
    g = JobGraph("big", tuple(RankGraph(r, (CollectiveNode(1, "rs", K.REDUCE_SCATTER, "world", 4096),), "x")
                              for r in range(ranks)), (world_group(ranks),))
    topo = build_topology("rack", hosts=ranks, bw_mbps=8.0)
    with pytest.raises(ExperimentError, match=r"the switches cannot run its reduce_scatter: .*algo = ring"):
        graph_job(topo, graph_spec(g, bw_mbps=8.0, algo=Algorithm.NETREDUCE), g)
    # the simulator's switch model takes any number of members, owners too
    sim = graph_spec(g, bw_mbps=8.0, algo=Algorithm.NETREDUCE).but(backend=Backend.NS3)
    assert graph_job(topo, sim, g)[0].in_network == {K.REDUCE_SCATTER: 3}
    ranks = 40
    g = JobGraph("big", tuple(RankGraph(r, (CollectiveNode(1, "ar", K.ALL_REDUCE, "world", 4096),), "x")
                              for r in range(ranks)), (world_group(ranks),))
    topo = build_topology("rack", hosts=ranks, bw_mbps=8.0)
    assert graph_job(topo, sim.but(workers=ranks), g)[0].in_network == {K.ALL_REDUCE: 2}  # BMv2: 32 at most


def test_report_names_each_algorithm_and_bounds_netreduce_all_reduce_at_s_over_b() -> None:
    topo = build_topology("rack", hosts=4, bw_mbps=8.0)
    g = mixed()
    job, _ = graph_job(topo, graph_spec(g, bw_mbps=8.0, algo=Algorithm.NETREDUCE), g, dilation=1.0)
    nodes = []
    for r in range(4):
        nodes.append(NodeTiming(r, 1, "compute", 0.0, 0.001, None, None, 0, None))
        for n in g.ranks[r].nodes:
            if isinstance(n, CollectiveNode):
                nodes.append(NodeTiming(r, n.id, "collective", 0.0, 1.0, n.collective, n.group, n.nbytes, True))
    report = summarize(job, GraphRun(tuple(nodes)), ["h1", "h2", "h3", "h4"], 8.0, {}, None, (), 1.0)
    rate = 8e6 / 8
    by = {(c.group, c.collective): c for c in report.collectives}
    assert len(report.collectives) == 7
    assert by[("world", "all_reduce")].algorithm == NETREDUCE
    assert by[("world", "all_reduce")].bound_s == pytest.approx(4096 / rate)  # S/B, not 2 (N-1)/N S/B
    assert by[("world", "reduce_scatter")].algorithm == NETREDUCE
    assert by[("world", "reduce_scatter")].bound_s == pytest.approx(4096 / rate)  # S/B: every buffer whole up
    assert by[("world", "all_gather")].algorithm == NETREDUCE
    assert by[("pair", "all_reduce")].algorithm == "ring"
    assert by[("pair", "all_reduce")].bound_s == pytest.approx(4096 / rate)  # 2 (N-1)/N S/B at N = 2
    assert by[("world", "all_to_all")].algorithm == "pairwise"
    assert by[("world", "broadcast")].algorithm == "chain"
    assert report.section()["collectives"][0]["algorithm"] in (NETREDUCE, "ring", "pairwise", "chain")
    # on the simulator the same: the all-reduce and the reduce-scatter in the switches at S/B, the all-gather at
    # (N-1) s/B
    sim, _ = graph_job(topo, graph_spec(g, bw_mbps=8.0, algo=Algorithm.NETREDUCE).but(backend=Backend.NS3), g,
                       dilation=1.0)
    on_sim = {(c.group, c.collective): c for c in summarize(sim, GraphRun(tuple(nodes)), ["h1", "h2", "h3", "h4"], 8.0,
                                                            {}, None, (), 1.0).collectives}
    assert on_sim[("world", "all_reduce")].algorithm == NETREDUCE
    assert on_sim[("world", "all_reduce")].bound_s == pytest.approx(4096 / rate)
    assert on_sim[("world", "reduce_scatter")].algorithm == NETREDUCE
    assert on_sim[("world", "reduce_scatter")].bound_s == pytest.approx(4096 / rate)
    assert on_sim[("world", "all_gather")].algorithm == NETREDUCE


def test_a_k_of_n_operation_ends_once_its_writes_are_acknowledged_as_the_loop_drains() -> None:
    """k of N: the sums are in, but the operation ends only when every write its worker posted is acknowledged (or
    settled), as the loop's worker drains after each iteration; N of N ends with its sums, as before."""
    data = np.zeros(3, dtype=np.int32)
    for quorum, waits in ((3, True), (None, False)):
        fake = FakeWorker(quorum)
        fake.gate = True
        job = InNetworkJob(cast(NetReduceWorker, fake))
        op = job.run(0, K.ALL_REDUCE, data)
        assert next(op)()  # its sums are in
        if waits:
            drained = op.send(None)
            assert not drained()
            fake.requester.unacknowledged = False
            assert drained()
        with pytest.raises(StopIteration) as done:
            op.send(None)
        assert list(done.value.value) == [0] * 3
        assert job.contributors == ({0: ((0, 1, 2),)} if waits else {})  # kept for the runtime, by place
