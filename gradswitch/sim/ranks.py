"""A simulated run over MPI ranks (docs/simulator.md "Distributed over MPI ranks").

ns-3's distributed simulator cuts a topology only across point-to-point links, builds all of it on every
rank and runs a node's events on its own rank; a cut link's delay is the lookahead. Here a topology is cut
into its pieces below the top tier (a fat tree's pods, a leaf-spine's leaves with their hosts, a
three-tier leaf-spine's pods), consecutive pieces go to each rank so that every rank holds a like share of
the jobs' nodes (workers and servers: where the traffic starts), and the top tier's switches (cores,
spines, super-spines) are dealt round robin over the ranks. A topology of edge switches only (a dumbbell)
is cut between its switches; a rack has nothing to cut.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

from gradswitch.protocol.choice import Choice
from gradswitch.sim.sim_keys import CfgMpi
from gradswitch.topology.model import Topology
from gradswitch.workload.job import JobConfig


class PartitionError(ValueError):
    """A run that cannot be cut over the ranks asked for: says why and what to do."""


class MpiSync(Choice):
    """How the ranks keep in step (ns-3's two distributed simulators)."""

    BARRIER = "barrier"  # DistributedSimulatorImpl: all ranks meet once per lookahead window (MPI_Allgather)
    NULL_MESSAGE = "null-message"  # NullMessageSimulatorImpl: each rank tells its neighbours how far it is


@dataclass(frozen=True)
class MpiLaunch:
    """How gradswitch starts the MPI build of the simulator: mpirun -np ranks [--hostfile hostfile]."""

    ranks: int
    hostfile: Path | None = None


@dataclass(frozen=True)
class Partition:
    ranks: int
    rank_of: dict[str, int]  # every host and switch
    pieces: tuple[tuple[str, ...], ...]  # the pieces below the top tier (pods, leaves), in topology order
    top: tuple[str, ...]  # the top tier's switches, dealt round robin

    def nodes_of(self, rank: int) -> list[str]:
        return [n for n, r in self.rank_of.items() if r == rank]

    def job_nodes(self, topo: Topology, jobs: list[JobConfig]) -> list[int]:
        """Per rank: the jobs' nodes (workers and servers) on its hosts."""
        out = [0] * self.ranks
        for cfg in jobs:
            for n in cfg.nodes:
                out[self.rank_of[n.host]] += 1
        return out

    def cut_links(self, topo: Topology) -> int:
        return sum(1 for lk in topo.links if self.rank_of[lk.a] != self.rank_of[lk.b])

    def config(self, sync: MpiSync) -> CfgMpi:
        """The configuration's `mpi` section (docs/simulator.md)."""
        return {"ranks": self.ranks, "sync": str(sync), "rank_of": dict(self.rank_of)}


def _switch_tiers(topo: Topology) -> dict[str, int]:
    """Per switch: 1 for an edge switch (hosts attached), else 1 + its hops to the nearest edge switch."""
    hops = [topo.distances_to(edge.name) for edge in topo.edge_switches()]
    return {s.name: 1 + min(d[s.name] for d in hops if s.name in d) for s in topo.switches}


def pieces(topo: Topology) -> tuple[list[list[str]], list[str]]:
    """The pieces a topology is cut into (each a connected group of hosts and switches below the top tier, in
    topology order) and the top tier's switches. Without tiers above the edge, each edge switch with its hosts
    is a piece."""
    tier = _switch_tiers(topo)
    highest = max(tier.values(), default=1)
    top = [s.name for s in topo.switches if tier.get(s.name, 1) == highest] if highest > 1 else []
    top_set = set(top)
    adjacent: dict[str, list[str]] = {n: [] for n in [h.name for h in topo.hosts] + [s.name for s in topo.switches]}
    for lk in topo.links:
        if lk.a in top_set or lk.b in top_set:
            continue
        if highest == 1 and topo.is_switch(lk.a) and topo.is_switch(lk.b):
            continue  # edge switches only: cut between them
        adjacent[lk.a].append(lk.b)
        adjacent[lk.b].append(lk.a)
    seen: set[str] = set()
    out: list[list[str]] = []
    for start in [s.name for s in topo.switches if s.name not in top_set] + [h.name for h in topo.hosts]:
        if start in seen:
            continue
        piece = []
        todo = deque([start])
        seen.add(start)
        while todo:
            n = todo.popleft()
            piece.append(n)
            for peer in adjacent[n]:
                if peer not in seen:
                    seen.add(peer)
                    todo.append(peer)
        out.append(piece)
    return out, top


def partition(topo: Topology, jobs: list[JobConfig], ranks: int) -> Partition:
    """Every host and switch's rank: consecutive pieces per rank, balanced by the jobs' nodes on them."""
    if ranks < 1:
        raise PartitionError(f"ranks = {ranks}: give 1 or more")
    parts, top = pieces(topo)
    if ranks == 1:
        return Partition(1, {n: 0 for piece in parts for n in piece} | {s: 0 for s in top},
                         tuple(tuple(p) for p in parts), tuple(top))
    kind = "pods" if top and len(parts) < len(topo.edge_switches()) else "edge switches"
    if len(parts) < ranks:
        raise PartitionError(f"ranks = {ranks}: {topo.name} is cut into {len(parts)} pieces ({kind} with their hosts), "
                             f"so at most {len(parts)} ranks; give fewer ranks or a larger topology")
    hosts_of_job_nodes: dict[str, int] = {}
    for cfg in jobs:
        for node in cfg.nodes:
            hosts_of_job_nodes[node.host] = hosts_of_job_nodes.get(node.host, 0) + 1
    weights = [sum(hosts_of_job_nodes.get(n, 0) for n in piece) for piece in parts]
    total = sum(weights)
    if total < ranks:
        raise PartitionError(f"ranks = {ranks}: the jobs have {total} node(s); every rank needs some: give fewer ranks")
    # Consecutive pieces: rank r takes pieces until the weight before it reaches r+1 shares of the total,
    # leaving at least one piece for each rank after it.
    owner: list[int] = []
    rank = 0
    taken = 0
    for i, w in enumerate(weights):
        left_pieces = len(weights) - i
        if rank < ranks - 1 and owner and owner[-1] == rank and (
                taken * ranks >= total * (rank + 1) or left_pieces <= ranks - 1 - rank):
            rank += 1
        owner.append(rank)
        taken += w
    rank_of: dict[str, int] = {}
    for piece, r in zip(parts, owner, strict=True):
        for name in piece:
            rank_of[name] = r
    for i, s in enumerate(top):
        rank_of[s] = i % ranks
    out = Partition(ranks, rank_of, tuple(tuple(p) for p in parts), tuple(top))
    empty = [r for r, count in enumerate(out.job_nodes(topo, jobs)) if count == 0]
    if empty:
        raise PartitionError(f"ranks = {ranks}: rank {empty[0]} would own none of the jobs' nodes (they sit on "
                             f"{sum(1 for w in weights if w)} of the {len(parts)} {kind}); give fewer ranks or spread "
                             "the workers over the topology")
    return out
