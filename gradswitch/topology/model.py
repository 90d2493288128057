"""A topology as data: hosts, switches and links with their port numbers.

Both the Mininet builder (gradswitch/net/) and the controller's route computation
(gradswitch/control/routing.py) read the same `Topology`; nothing about a network is written
twice. Generators for the usual shapes live in gradswitch/topology/generators.py.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property


class TopologyError(ValueError):
    """A topology that cannot be built: names the node, port or address at fault."""


@dataclass(frozen=True)
class Host:
    name: str
    ip: str  # IPv4 address of eth0
    mac: str  # MAC of eth0
    prefix_len: int = 8  # prefix of eth0: every host of the fabric is on-link (the switch answers ARP)


@dataclass(frozen=True)
class Switch:
    name: str
    device_id: int  # P4Runtime device id (and the offset of its gRPC/Thrift ports)
    role: str = "switch"  # "tor", "leaf", "spine", ...: for people and plots, routing ignores it
    subnet: str | None = None  # prefix covering every host attached here, routed as one entry elsewhere


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int  # port on a (for a host: its interface number, eth<port>)
    b: str
    b_port: int
    bw_mbps: float | None = None  # shaped with HTB when set

    def other(self, node: str) -> tuple[str, int]:
        """The far end (node, port) seen from node."""
        if node == self.a:
            return self.b, self.b_port
        if node == self.b:
            return self.a, self.a_port
        raise TopologyError(f"link {self} does not touch {node}")

    def port_of(self, node: str) -> int:
        return self.a_port if node == self.a else self.b_port


@dataclass(frozen=True)
class Topology:
    name: str
    hosts: tuple[Host, ...]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    params: dict[str, object] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    # ---- lookups ----

    @cached_property
    def _hosts(self) -> dict[str, Host]:
        return {h.name: h for h in self.hosts}

    @cached_property
    def _switches(self) -> dict[str, Switch]:
        return {s.name: s for s in self.switches}

    def host(self, name: str) -> Host:
        try:
            return self._hosts[name]
        except KeyError:
            raise TopologyError(f"{self.name}: no host {name!r}") from None

    def switch(self, name: str) -> Switch:
        try:
            return self._switches[name]
        except KeyError:
            raise TopologyError(f"{self.name}: no switch {name!r}") from None

    def is_host(self, name: str) -> bool:
        return name in self._hosts

    def is_switch(self, name: str) -> bool:
        return name in self._switches

    def links_of(self, node: str) -> Iterator[Link]:
        return (lk for lk in self.links if node in (lk.a, lk.b))

    def slowest_link_mbps(self, node: str) -> float | None:
        """The slowest shaped link of a node (a switch's DLCP thresholds are set for it); None if none is shaped."""
        rates = [lk.bw_mbps for lk in self.links_of(node) if lk.bw_mbps]
        return min(rates) if rates else None

    def ports_between(self, a: str, b: str) -> tuple[int, int]:
        """(a's port, b's port) of the link between two nodes."""
        for lk in self.links_of(a):
            peer, peer_port = lk.other(a)
            if peer == b:
                return lk.port_of(a), peer_port
        raise TopologyError(f"{self.name}: {a} and {b} are not linked")

    def attachment(self, host: str) -> tuple[str, int]:
        """(switch, port) a host is attached to."""
        for lk in self.links_of(host):
            return lk.other(host)
        raise TopologyError(f"{self.name}: host {host} has no link")

    def hosts_of(self, switch: str) -> list[tuple[Host, int]]:
        """Hosts attached to a switch, with the switch port each is on."""
        out = []
        for lk in self.links_of(switch):
            peer, _ = lk.other(switch)
            if self.is_host(peer):
                out.append((self.host(peer), lk.port_of(switch)))
        return sorted(out, key=lambda hp: hp[1])

    def switch_neighbors(self, switch: str) -> list[tuple[int, str, int]]:
        """(local port, neighbour switch, its port) for every switch-to-switch link."""
        out = []
        for lk in self.links_of(switch):
            peer, peer_port = lk.other(switch)
            if self.is_switch(peer):
                out.append((lk.port_of(switch), peer, peer_port))
        return sorted(out)

    def ports_of(self, switch: str) -> list[int]:
        return sorted(lk.port_of(switch) for lk in self.links_of(switch))

    def edge_switches(self) -> list[Switch]:
        """Switches with at least one host."""
        return [s for s in self.switches if self.hosts_of(s.name)]

    @cached_property
    def _switch_peers(self) -> dict[str, list[str]]:
        """Every switch's neighbour switches, from one pass over the links (a fat tree has thousands)."""
        peers: dict[str, list[str]] = {s.name: [] for s in self.switches}
        for lk in self.links:
            if self.is_switch(lk.a) and self.is_switch(lk.b):
                peers[lk.a].append(lk.b)
                peers[lk.b].append(lk.a)
        return peers

    def distances_to(self, target: str) -> dict[str, int]:
        """Hop counts from every switch to the target switch over switch links (BFS)."""
        dist = {target: 0}
        todo = deque([target])
        while todo:
            node = todo.popleft()
            for peer in self._switch_peers[node]:
                if peer not in dist:
                    dist[peer] = dist[node] + 1
                    todo.append(peer)
        return dist

    # ---- checks ----

    def validate(self) -> None:
        names = [h.name for h in self.hosts] + [s.name for s in self.switches]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise TopologyError(f"{self.name}: duplicate node names {sorted(dup)}")
        ids = [s.device_id for s in self.switches]
        if len(set(ids)) != len(ids):
            raise TopologyError(f"{self.name}: duplicate device ids {sorted(ids)}")
        ips = [h.ip for h in self.hosts]
        if len(set(ips)) != len(ips):
            raise TopologyError(f"{self.name}: duplicate host addresses")
        used: set[tuple[str, int]] = set()
        for lk in self.links:
            for node, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
                if node not in names:
                    raise TopologyError(f"{self.name}: link {lk.a}-{lk.b} names unknown node {node!r}")
                if (node, port) in used:
                    raise TopologyError(f"{self.name}: port {port} of {node} is used by two links")
                if self.is_switch(node) and not 0 <= port < 255:
                    raise TopologyError(f"{self.name}: port {port} of {node} outside 0..254 (255 is the CPU port)")
                used.add((node, port))
            if self.is_host(lk.a) and self.is_host(lk.b):
                raise TopologyError(f"{self.name}: link {lk.a}-{lk.b} joins two hosts")
        for h in self.hosts:
            if sum(1 for _ in self.links_of(h.name)) != 1:
                raise TopologyError(f"{self.name}: host {h.name} must have exactly one link")
        for s in self.switches:
            if s.subnet is None:
                continue
            net = ipaddress.IPv4Network(s.subnet)
            for h, _ in self.hosts_of(s.name):
                if ipaddress.IPv4Address(h.ip) not in net:
                    raise TopologyError(f"{self.name}: host {h.name} ({h.ip}) is outside {s.name}'s subnet {s.subnet}")
