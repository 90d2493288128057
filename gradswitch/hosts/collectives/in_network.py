"""A graph's collectives run by the switches (an experiment's algo = netreduce): which ones, on which NetReduce
job, and the operation a rank runs for each.

In the switches: all-reduce, reduce-scatter and all-gather of the world group (every rank, in rank order, so a
member's position is its NetReduce worker number and a shard's owner its rank): all-reduce as the training path
does (gradswitch/hosts/netreduce.py), reduce-scatter and all-gather through gradswitch/hosts/netreduce_scatter.py and
gradswitch/hosts/netreduce_gather.py. Everything else (all-to-all, broadcast, send/recv, any collective of a smaller
group) stays on the hosts' algorithms (gradswitch/hosts/collectives/ops.py).

One switch job per collective type, each with its own job id, queue pairs and message numbers: a switch job
reads a message's owner one way (reduce-scatter or all-gather, gradswitch.protocol.netreduce.JobLayout), and the hosts'
own algorithms use the graph's job id, whose packets the switches must not aggregate. The ids follow the
graph's: job + 1, + 2, + 3 for all-reduce, reduce-scatter, all-gather (only those the graph has). Where the ranks sit
on several leaves, the all-reduce job aggregates on the spine of the graph's own job id, where the loop's NetReduce
job of that id aggregates (gradswitch/experiment/graph_run.py aggregation_spine_of; the simulator's Topology::Tree
the same); the others on their own ids' spines.

Every rank starts a job's operations in the same order (NetReduce gives message numbers as an operation
starts, and message k must carry the same chunk everywhere): the order of the world group's collectives in
the rank's topological order, the same on every rank (gradswitch.workload.graph.validate). An operation that becomes
ready before an earlier one of its job has started waits for it.

When the all-reduce job's aggregation switch is lost, its workers fall back to the hosts' ring as the training
loop's do (gradswitch/hosts/fallback.py: the control plane's signal, the agreement on the first reduction not
finished, every later one by ring until the switch is back): each all-reduce operation is one reduction of that
job's fallback, numbered in the same start order on every rank. Reduce-scatter and all-gather jobs have none.

On a job of k of N (or with a deadline: JobConfig.netreduce_k, netreduce_deadline_us; docs/faults.md "Stragglers:
k of N") the all-reduce's sums may leave without this rank: its operation keeps which ranks each message's sum holds
(`InNetworkJob.contributors`, by its place, for the rank's data source to check against) and ends, as the loop's
iteration does, once its sums are in and every write it posted is acknowledged (or settled: QuorumRequester). That is
the one end of a graph operation that still waits for acknowledgements (the others end with their output,
gradswitch/hosts/collectives/executor.py): it is the pace of k of N, a rank whose sums left without it settles its
writes before its next operation posts, so the ranks stay within a window of one another (the loop's drain).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from gradswitch.hosts.comm import OpGen, Wait
from gradswitch.hosts.netreduce import NetReduceWorker
from gradswitch.hosts.netreduce_gather import all_gather_op
from gradswitch.hosts.netreduce_scatter import reduce_scatter_op
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import IN_NETWORK, CollectiveKind, CollectiveNode, JobGraph, Node, topological_order

NETREDUCE = "netreduce"  # the algorithm's name in a report
HOST_ALGORITHM: dict[CollectiveKind, str] = {  # what gradswitch/hosts/collectives/ops.py Op.schedule runs
    CollectiveKind.ALL_REDUCE: "ring",
    CollectiveKind.REDUCE_SCATTER: "ring",
    CollectiveKind.ALL_GATHER: "ring",
    CollectiveKind.ALL_TO_ALL: "pairwise",
    CollectiveKind.BROADCAST: "chain",
}


def is_world(graph: JobGraph, group: str) -> bool:
    """The group holds every rank, in rank order."""
    return graph.group(group).ranks == tuple(range(graph.world_size))


def runs_in_network(graph: JobGraph, node: Node, in_network: dict[CollectiveKind, int]) -> bool:
    return isinstance(node, CollectiveNode) and node.collective in in_network and is_world(graph, node.group)


def in_network_jobs(graph: JobGraph, job: int, first: int | None = None) -> dict[CollectiveKind, int]:
    """The NetReduce job of each collective type of `graph` that the switches run, the graph's job being `job`: ids
    from `first` on (default job + 1), one per type of IN_NETWORK in its order, whether the graph has it or not (so
    several graphs' ids, `first` len(IN_NETWORK) apart, never meet)."""
    kinds = {n.collective for r in graph.ranks for n in r.nodes
             if isinstance(n, CollectiveNode) and n.collective in IN_NETWORK and is_world(graph, n.group)}
    start = job + 1 if first is None else first
    return {k: start + i for i, k in enumerate(IN_NETWORK) if k in kinds}


def algorithm(graph: JobGraph, group: str, kind: CollectiveKind, in_network: dict[CollectiveKind, int]) -> str:
    """The algorithm that ran a collective of this group and type."""
    return NETREDUCE if kind in in_network and is_world(graph, group) else HOST_ALGORITHM[kind]


def job_order(graph: JobGraph, rank: int, in_network: dict[CollectiveKind, int]) -> dict[int, int]:
    """Node id -> its place among the rank's operations of the same NetReduce job (the start order)."""
    counts: dict[CollectiveKind, int] = {}
    out = {}
    for n in topological_order(graph.ranks[rank]):
        if runs_in_network(graph, n, in_network):
            assert isinstance(n, CollectiveNode)
            out[n.id] = counts.get(n.collective, 0)
            counts[n.collective] = out[n.id] + 1
    return out


@dataclass
class InNetworkJob:
    """A rank's NetReduce worker of one switch job, and how many of its operations have started."""

    worker: NetReduceWorker
    started: int = 0
    # k of N: per operation (its place) that ended, the ranks each of its messages' sums holds, until taken
    contributors: dict[int, tuple[tuple[int, ...], ...]] = field(default_factory=dict)

    def run(self, place: int, kind: CollectiveKind, data: Int32Array, iteration: int = 0) -> OpGen:
        """Operation number `place` of this job on this rank: waits for the earlier ones to start, then runs;
        `iteration`: the training iteration it belongs to (an all-reduce's fallback to ring keeps each input
        until no worker can need it: two iterations, gradswitch/hosts/fallback.py)."""
        if self.started != place:
            yield self._turn(place)
        op = self._op(kind, data, iteration)
        try:
            wait = next(op)  # its message numbers are taken here
        except StopIteration as done:
            self.started += 1
            result: Int32Array = done.value
            if self.worker.layout.k_of_n:
                self.contributors[place] = tuple(self.worker.last_contributors)
            return result
        self.started += 1
        while True:
            yield wait
            try:
                wait = op.send(None)
            except StopIteration as done:
                result = done.value
                break
        if self.worker.layout.k_of_n:
            # (now: another operation of the job may end while this one waits for its acknowledgements)
            self.contributors[place] = tuple(self.worker.last_contributors)
            if not self._drained():
                yield self._drained  # as the loop drains after each iteration (below)
        return result

    def _drained(self) -> bool:
        """k of N: every write this job's worker posted is acknowledged, as the loop's worker waits after each
        iteration (Comm.drain) before it computes the next: a worker whose sums left without it settles its
        writes (QuorumRequester) before the next operation posts, so the ranks stay within a window of one
        another."""
        return all(q.requester.idle() for q in self.worker.comm.qps.values())

    def _turn(self, place: int) -> Wait:
        return lambda: self.started == place

    def _op(self, kind: CollectiveKind, data: Int32Array, iteration: int) -> Generator[Wait, None, Int32Array]:
        if kind == CollectiveKind.ALL_REDUCE:  # (by ring instead while the job's switch is lost)
            return self.worker.reduce_op(iteration, 0, 0, data, 0)
        if kind == CollectiveKind.REDUCE_SCATTER:
            return reduce_scatter_op(self.worker, data)
        if kind == CollectiveKind.ALL_GATHER:
            return all_gather_op(self.worker, data)
        raise ValueError(f"{kind}: the switches run {', '.join(str(k) for k in IN_NETWORK)}, not {kind}")

