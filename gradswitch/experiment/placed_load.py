"""The busiest-link load a link-bound run of a communication-only graph keeps, on the paths its flows take.

The machine-bound rule (gradswitch/experiment/bottleneck.py) asks whether a run's busiest link carried what a
run set by its links would. For a graph that only communicates that was 1.0: a ring, a chain or a send keeps
its busiest link full. A pairwise all-to-all need not when its flows share uplinks unevenly: a member's step
ends when its send is acknowledged and its receive is in (MPI_Sendrecv, gradswitch/hosts/collectives/pairwise.py), so
a step in which ECMP put three flows on one uplink of a leaf lasts three chunks while the leaf's other uplink
carries one, then waits. On the 2x2 leaf-spine at N = 8 (ECMP seed 0, job 1) the busiest uplinks carry 10
chunks of steps that last 13 one after another: 10/13, 77 %. Steps may overlap (a member one step ahead), which
keeps that uplink busier; the rule takes the least a link-bound run keeps, the steps one after another.

`ideal_link_load` computes that load from the facts the switches use: every flow's path through the fabric
(gradswitch/control/routing.py's routes; at an ECMP group the member `ecmp_member` gives its 5-tuple, the UDP source
port gradswitch/protocol/qpn.py derives from the job and the sending node; the simulator hashes alike,
tests/ns3/test_ecmp.py), and the collectives' schedules as the hosts run them (gradswitch/hosts/collectives/ops.py). A
collective whose steps settle is a phase per step, others (pipelined: ring, chain, a send) one phase; a phase
lasts as long as its most loaded link needs, and the load is the busiest link's bytes over the phases' total.
An all-reduce through parameter servers (algo = ps) is its pushes and pulls at once, pipelined by key, and then
each server's last key's pulls: a server's link out idles while the first key's pushes arrive.
It answers None (the rule keeps 1.0) where that model does not hold: computation, a collective in the switches,
flowlet switching (its uplinks are drawn at random), or communication nodes of a rank that may overlap.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from itertools import pairwise

from gradswitch.control.routing import Route, compute_routes, ecmp_member, route_for
from gradswitch.hosts.collectives.ops import Op, all_ops
from gradswitch.hosts.collectives.ps import PsKey, PsLayout, layout, op_on_servers
from gradswitch.hosts.collectives.schedule import Step
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.protocol.ecmp import LoadBalance
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import qpn, udp_source_port
from gradswitch.topology.model import Topology, TopologyError
from gradswitch.workload.graph import ComputeNode, JobGraph, RankGraph, topological_order
from gradswitch.workload.job import Node

Link = str  # a link direction, "sender->receiver" (gradswitch/experiment/links.py Direction.name)
UDP = 17


def flow_path(topo: Topology, routes: dict[str, list[Route]], src: Node, dst: Node, job_id: int,
              ecmp_seed: int = 0) -> tuple[Link, ...]:
    """The link directions a RoCE flow from node `src` to node `dst` of job `job_id` crosses, host to host."""
    sport = udp_source_port(qpn(src.node_id, dst.node_id, job_id))
    return five_tuple_path(topo, routes, src.host, dst.host, UDP, sport, CONFIG.ROCE_V2_UDP_PORT, ecmp_seed)


def five_tuple_path(topo: Topology, routes: dict[str, list[Route]], src_host: str, dst_host: str, protocol: int,
                    sport: int, dport: int, ecmp_seed: int = 0) -> tuple[Link, ...]:
    """The link directions the packets of a 5-tuple from host `src_host` to `dst_host` cross, host to host: at
    every ECMP group the member `ecmp_member` gives them (the switches' hash)."""
    src_ip, dst_ip = topo.host(src_host).ip, topo.host(dst_host).ip
    switch, _ = topo.attachment(src_host)
    path = [f"{src_host}->{switch}"]
    for _ in range(len(topo.switches)):
        route = route_for(routes[switch], dst_ip)
        if route is None:
            raise TopologyError(f"{topo.name}: {switch} has no route to {dst_host} ({dst_ip})")
        member = ecmp_member(src_ip, dst_ip, protocol, sport, dport, len(route.next_hops),
                             ecmp_seed) if route.is_ecmp else 0
        port = route.next_hops[member].port
        peer = next(lk.other(switch)[0] for lk in topo.links_of(switch) if lk.port_of(switch) == port)
        path.append(f"{switch}->{peer}")
        if peer == dst_host:
            return tuple(path)
        switch = peer
    raise TopologyError(f"{topo.name}: no loop-free path from {src_host} to {dst_host}")


@dataclass(frozen=True)
class PlacedTraffic:
    """What a graph's communication puts on each link direction, and how long a link-paced run of it lasts."""

    bytes_by_link: dict[Link, float]  # payload bytes (int32 values x 4), headers left out
    phased_bytes: float  # per phase its most loaded link's bytes, summed: the run's length in bytes at the link rate

    @property
    def busiest_load(self) -> float | None:
        """The busiest link's bytes over the run's length: its load (None: nothing sent)."""
        if self.phased_bytes <= 0:
            return None
        return max(self.bytes_by_link.values()) / self.phased_bytes

    def busiest_links(self) -> list[Link]:
        most = max(self.bytes_by_link.values(), default=0.0)
        return sorted(link for link, b in self.bytes_by_link.items() if b == most)


def placed_traffic(job: GraphJob, topo: Topology, ecmp_seed: int = 0) -> PlacedTraffic | None:
    """The job's communication on the paths ECMP gives its flows under `ecmp_seed` (None: not this model's to
    say; see the module's docstring)."""
    graph = job.graph
    if job.in_network or any(isinstance(n, ComputeNode) and n.duration_s > 0 for r in graph.ranks for n in r.nodes):
        return None
    ops = all_ops(graph)  # every rank's, numbered once
    if not _communication_in_sequence(graph, ops):
        return None
    nodes = {n.node_id: n for n in job.job.nodes}
    routes = compute_routes(topo)

    @cache
    def path(src: int, dst: int) -> tuple[Link, ...]:
        return flow_path(topo, routes, nodes[src], nodes[dst], job.job.job_id, ecmp_seed)

    total: dict[Link, float] = defaultdict(float)
    duration = 0.0
    servers = tuple(n.node_id for n in job.job.servers)
    for phase in _phases(graph, ops, servers, job.job.ps_key_bytes):
        carried: dict[Link, float] = defaultdict(float)
        for src, dst, nbytes in phase:
            for link in path(src, dst):
                carried[link] += nbytes
                total[link] += nbytes
        duration += max(carried.values(), default=0.0)
    return PlacedTraffic(dict(total), duration)


def ideal_link_load(job: GraphJob, topo: Topology, load_balance: LoadBalance = LoadBalance.ECMP,
                    ecmp_seed: int = 0) -> float | None:
    """The busiest link's load in a run of the job's graph that its links pace, its steps one after another
    (None: not this model's to say; see the module's docstring)."""
    if load_balance != LoadBalance.ECMP:
        return None
    traffic = placed_traffic(job, topo, ecmp_seed)
    return traffic.busiest_load if traffic is not None else None


Flow = tuple[int, int, float]  # (sending rank, receiving rank, bytes)


def _phases(graph: JobGraph, by_rank: dict[int, dict[int, Op]], servers: tuple[int, ...] = (),
            key_bytes: int = 0) -> list[list[Flow]]:
    """The graph's communication as phases of flows, operation after operation (in rank 0's order, which
    _communication_in_sequence found the same on every rank; then those rank 0 takes no part in). `by_rank`:
    ops_of(graph, r) of every rank r; `servers`, `key_bytes`: the job's parameter servers and their keys' size."""
    ops: dict[int, Op] = {}
    for rank_ops in by_rank.values():
        for op in rank_ops.values():
            ops.setdefault(op.number, op)
    first = by_rank[0]
    order = [first[n.id].number for n in topological_order(graph.ranks[0]) if n.id in first]
    order += [number for number in sorted(ops) if number not in order]
    out: list[list[Flow]] = []
    for number in order:
        op = ops[number]
        if op_on_servers(graph, op, servers):
            out += _server_phases(op, layout(op, servers, key_bytes))
            continue
        schedules = [op.schedule(p) for p in range(len(op.members))]
        if any(s.settle for sched in schedules for s in sched.steps):  # a phase per step
            for i in range(max(len(sched.steps) for sched in schedules)):
                out.append([f for p, sched in enumerate(schedules) for f in _flows(op, p, sched.steps[i:i + 1])])
        else:
            out.append([f for p, sched in enumerate(schedules) for f in _flows(op, p, sched.steps)])
    return out


def _server_phases(op: Op, plan: PsLayout) -> list[list[Flow]]:
    """An all-reduce through parameter servers, pipelined by key: every push, and every pull but those of each
    server's last key, at once; then those last pulls (a key's pull waits for every member's push of it, so each
    server's link out idles for a key's pushes, which is the same time at the end)."""
    last = {k.server: k.index for k in plan.keys}

    def pulls(keys: Iterable[PsKey]) -> list[Flow]:
        return [(k.server, m, float(k.nbytes)) for k in keys for m in op.members]

    pushes = [(m, k.server, float(k.nbytes)) for k in plan.keys for m in op.members]
    return [pushes + pulls(k for k in plan.keys if last[k.server] != k.index),
            pulls(k for k in plan.keys if last[k.server] == k.index)]


def _flows(op: Op, position: int, steps: Iterable[Step]) -> list[Flow]:
    """What the member at `position` sends in these steps of its schedule."""
    return [(op.members[position], op.members[s.send_to], 4.0 * (s.send[1] - s.send[0])) for s in steps
            if s.send_to is not None]


def _communication_in_sequence(graph: JobGraph, by_rank: dict[int, dict[int, Op]]) -> bool:
    """Every rank's communication nodes one after another (each depends, through others or not, on the one before
    it), in the same operations' order on every rank."""
    orders = []
    for r in graph.ranks:
        ops = by_rank[r.rank]
        comm = [n for n in topological_order(r) if n.id in ops]
        before = _ancestors(r)
        if any(a.id not in before[b.id] for a, b in pairwise(comm)):
            return False
        orders.append([ops[n.id].number for n in comm])
    return all(_same_order(a, b) for a in orders for b in orders)


def _same_order(a: list[int], b: list[int]) -> bool:
    shared = set(a) & set(b)
    return [x for x in a if x in shared] == [x for x in b if x in shared]


def _ancestors(rank: RankGraph) -> dict[int, set[int]]:
    """Per node id, every node it depends on, directly or through others."""
    out: dict[int, set[int]] = {}
    by_id = {n.id: n for n in rank.nodes}
    for n in topological_order(rank):
        out[n.id] = set(n.deps).union(*(out[d] for d in n.deps if d in by_id))
    return out

