"""Routes of every switch computed from the topology graph, and how ECMP groups balance load.

Each switch gets a /32 for each host attached to it and, for every other edge switch,
one route to that switch's subnet (or a /32 per host when it declares none) whose next
hops are all neighbours on a shortest path: several next hops make an ECMP group. Adding
a leaf or a spine therefore needs no hand-written entry.

An ECMP group's member is chosen per flow by a seeded hash of the 5-tuple (`load_balance =
ecmp`), or per flowlet at random (LetFlow: `flowlet`, a new member after an idle gap); both
are parameters of the route's action (gradswitch/control/controls/l3_forwarding.py), so a run changes
them by rewriting the routes, and no packet meets another table (docs/dlcp.md, "Load balancing").

Routes are computed on the topology minus what is out (an `Outage`: dead switches, links down): the
controller recomputes them when it notices a failure and when the element returns (gradswitch/control/fabric.py).
A destination that cannot be reached while something is out gets no route.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass, field

from gradswitch.protocol.ecmp import hash_multiplier
from gradswitch.topology.model import Topology, TopologyError


@dataclass(frozen=True, order=True)
class NextHop:
    port: int  # egress port on this switch
    mac: str  # destination MAC written on the packet (the host, or the neighbour switch's port)


@dataclass(frozen=True)
class Route:
    prefix: str  # e.g. "10.0.2.0/24" or "10.0.1.3/32"
    next_hops: tuple[NextHop, ...]  # sorted; more than one means ECMP

    @property
    def is_ecmp(self) -> bool:
        return len(self.next_hops) > 1


def switch_port_mac(device_id: int, port: int) -> str:
    """Locally administered MAC of a switch port: 02:00:<device id, 2 bytes>:00:<port>."""
    if not 0 <= device_id < 1 << 16 or not 0 <= port < 256:
        raise TopologyError(f"no MAC for device {device_id} port {port}")
    return f"02:00:{device_id >> 8:02x}:{device_id & 0xFF:02x}:00:{port:02x}"


@dataclass(frozen=True)
class Outage:
    """What is out of a fabric now: switches that died, links that are down (each as its two ends, any order)."""

    switches: frozenset[str] = field(default_factory=frozenset)
    links: frozenset[frozenset[str]] = field(default_factory=frozenset)

    def __bool__(self) -> bool:
        return bool(self.switches or self.links)

    def link_up(self, a: str, b: str) -> bool:
        return frozenset((a, b)) not in self.links and a not in self.switches and b not in self.switches

    def with_switch(self, name: str, down: bool) -> Outage:
        return Outage(self.switches | {name} if down else self.switches - {name}, self.links)

    def with_link(self, a: str, b: str, down: bool) -> Outage:
        key = frozenset((a, b))
        return Outage(self.switches, self.links | {key} if down else self.links - {key})

    def describe(self) -> str:
        out = sorted(self.switches) + sorted("-".join(sorted(lk)) for lk in self.links)
        return ", ".join(out) if out else "nothing"


NOTHING_OUT = Outage()


def distances_avoiding(topo: Topology, target: str, outage: Outage) -> dict[str, int]:
    """Hop counts from every switch to the target switch over the switch links that are up (BFS); a dead
    switch is reached by none."""
    if not outage:
        return topo.distances_to(target)
    if target in outage.switches:
        return {}
    dist = {target: 0}
    todo = deque([target])
    while todo:
        node = todo.popleft()
        for _, peer, _ in topo.switch_neighbors(node):
            if peer not in dist and outage.link_up(node, peer):
                dist[peer] = dist[node] + 1
                todo.append(peer)
    return dist


def compute_routes(topo: Topology, outage: Outage = NOTHING_OUT) -> dict[str, list[Route]]:
    """The IPv4 routes of every switch, keyed by switch name (the dead ones have none). With nothing out,
    every edge switch must be reachable (TopologyError); with something out, an unreachable destination
    gets no route, and a host whose link is down neither."""
    edges = topo.edge_switches()
    dist_to = {edge.name: distances_avoiding(topo, edge.name, outage) for edge in edges}
    routes: dict[str, list[Route]] = {}
    for sw in topo.switches:
        if sw.name in outage.switches:
            routes[sw.name] = []
            continue
        out: list[Route] = []
        for host, port in topo.hosts_of(sw.name):
            if outage.link_up(sw.name, host.name):
                out.append(Route(f"{host.ip}/32", (NextHop(port, host.mac),)))
        for edge in edges:
            if edge.name == sw.name:
                continue
            dist = dist_to[edge.name]
            if sw.name not in dist:
                if outage:
                    continue
                raise TopologyError(f"{topo.name}: {sw.name} cannot reach {edge.name}")
            hops = tuple(
                sorted(
                    NextHop(port, switch_port_mac(topo.switch(peer).device_id, peer_port))
                    for port, peer, peer_port in topo.switch_neighbors(sw.name)
                    if dist.get(peer) == dist[sw.name] - 1 and outage.link_up(sw.name, peer)
                )
            )
            if edge.subnet is not None:
                out.append(Route(edge.subnet, hops))
            else:
                out.extend(Route(f"{h.ip}/32", hops) for h, _ in topo.hosts_of(edge.name))
        routes[sw.name] = out
    return routes


def ecmp_groups(routes: list[Route]) -> dict[tuple[NextHop, ...], int]:
    """Group id (from 1) for each distinct set of next hops of the ECMP routes of one switch."""
    groups: dict[tuple[NextHop, ...], int] = {}
    for r in routes:
        if r.is_ecmp and r.next_hops not in groups:
            groups[r.next_hops] = len(groups) + 1
    return groups


def route_for(routes: list[Route], ip: str) -> Route | None:
    """The longest-prefix route of a switch for an address."""
    addr = ipaddress.IPv4Address(ip)
    best: Route | None = None
    for r in routes:
        net = ipaddress.IPv4Network(r.prefix)
        if addr in net and (best is None or net.prefixlen > ipaddress.IPv4Network(best.prefix).prefixlen):
            best = r
    return best


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (polynomial 0x8005 reflected, initial value 0): BMv2's crc16."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def ecmp_member(src: str, dst: str, protocol: int, src_port: int, dst_port: int, size: int, seed: int = 0,
                spray_key: int = 0) -> int:
    """The member of an ECMP group of `size` that the switch gives a flow's packets under an ECMP seed (what
    set_ecmp_group computes: the CRC-16 of the 5-tuple and spray key, times hash_multiplier(seed), bits 16..31
    of the product, mod size). Tells which uplink a flow takes."""
    key = ipaddress.IPv4Address(src).packed + ipaddress.IPv4Address(dst).packed + bytes([protocol]) \
        + src_port.to_bytes(2, "big") + dst_port.to_bytes(2, "big") + spray_key.to_bytes(4, "big")
    mixed = ((crc16_arc(key) * hash_multiplier(seed)) >> 16) & 0xFFFF
    return mixed % size

