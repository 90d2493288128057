"""The topologies of the testbed, declared as data with parameters.

- rack(hosts): one top-of-rack switch, N hosts.
- leafspine(leaves, spines, hosts_per_leaf): every leaf linked to every spine.
- dumbbell(hosts_per_side): two switches joined by one (bottleneck) link.

Hosts on edge switch k (1-based, in declaration order) are 10.0.k.i with MAC
00:00:0a:00:kk:ii; each edge switch declares the /24 of its hosts, which the other
switches route as one prefix. Ports count from 1 in the order links are listed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mininet_topos.topology import Host, Link, Switch, Topology, TopologyError
from protocol.config import CONFIG

MAX_HOSTS_PER_EDGE = 253  # host addresses 10.0.<edge>.<1..253>


def host_address(edge_index: int, host_index: int) -> tuple[str, str]:
    """(IP, MAC) of host i (1-based) of edge switch k (1-based)."""
    if not (1 <= edge_index <= 254 and 1 <= host_index <= MAX_HOSTS_PER_EDGE):
        raise TopologyError(f"no address for host {host_index} of edge switch {edge_index}")
    return f"10.0.{edge_index}.{host_index}", f"00:00:0a:00:{edge_index:02x}:{host_index:02x}"


def _rate(what: str, mbps: float | None) -> float | None:
    if mbps is not None and not 0 < mbps <= 100_000:
        raise TopologyError(f"{what} = {mbps} Mb/s: a link rate is above 0 and at most 100000 Mb/s "
                            "(leave it out for unshaped links)")
    return mbps


def _count(what: str, n: int, least: int = 1, most: int = MAX_HOSTS_PER_EDGE) -> int:
    if not least <= n <= most:
        raise TopologyError(f"{what} = {n}: give {least}..{most}")
    return n


class _Builder:
    def __init__(self, name: str, bw_mbps: float | None, fabric_bw_mbps: float | None) -> None:
        _rate("bw", bw_mbps)
        _rate("fabric bw", fabric_bw_mbps)
        self.name = name
        self.bw = bw_mbps
        self.fabric_bw = fabric_bw_mbps if fabric_bw_mbps is not None else bw_mbps
        self.hosts: list[Host] = []
        self.switches: list[Switch] = []
        self.links: list[Link] = []
        self._next_port: dict[str, int] = {}

    def port(self, node: str) -> int:
        self._next_port[node] = self._next_port.get(node, 0) + 1
        if self._next_port[node] >= CONFIG.CPU_PORT:
            raise TopologyError(f"{node} would need port {self._next_port[node]}: a switch has ports "
                                f"1..{CONFIG.CPU_PORT - 1} (CPU_PORT in config.p4); use fewer hosts or links")
        return self._next_port[node]

    def switch(self, name: str, role: str, edge_index: int | None = None) -> str:
        subnet = f"10.0.{edge_index}.0/24" if edge_index is not None else None
        self.switches.append(Switch(name, device_id=len(self.switches), role=role, subnet=subnet))
        return name

    def host(self, name: str, edge: str, edge_index: int, host_index: int) -> None:
        ip, mac = host_address(edge_index, host_index)
        self.hosts.append(Host(name, ip, mac))
        self.links.append(Link(name, 0, edge, self.port(edge), self.bw))

    def link(self, a: str, b: str) -> None:
        self.links.append(Link(a, self.port(a), b, self.port(b), self.fabric_bw))

    def build(self, **params: Any) -> Topology:
        return Topology(self.name, tuple(self.hosts), tuple(self.switches), tuple(self.links), params)


def rack(hosts: int = 4, bw_mbps: float | None = None) -> Topology:
    _count("hosts", hosts)
    b = _Builder("rack", bw_mbps, None)
    tor = b.switch("s1", "tor", edge_index=1)
    for i in range(1, hosts + 1):
        b.host(f"h{i}", tor, 1, i)
    return b.build(hosts=hosts, bw_mbps=bw_mbps)


def leafspine(
    leaves: int = 2,
    spines: int = 2,
    hosts_per_leaf: int = 2,
    bw_mbps: float | None = None,
    fabric_bw_mbps: float | None = None,
) -> Topology:
    _count("leaves", leaves, most=64)
    _count("spines", spines, most=64)
    _count("hosts per leaf", hosts_per_leaf)
    b = _Builder("leafspine", bw_mbps, fabric_bw_mbps)
    leaf_names = [b.switch(f"leaf{i}", "leaf", edge_index=i) for i in range(1, leaves + 1)]
    spine_names = [b.switch(f"spine{i}", "spine") for i in range(1, spines + 1)]
    host_no = 0
    for li, leaf in enumerate(leaf_names, start=1):
        for hi in range(1, hosts_per_leaf + 1):
            host_no += 1
            b.host(f"h{host_no}", leaf, li, hi)
    for leaf in leaf_names:
        for spine in spine_names:
            b.link(leaf, spine)
    return b.build(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf, bw_mbps=bw_mbps)


def dumbbell(hosts_per_side: int = 2, bw_mbps: float | None = None, bottleneck_mbps: float | None = None) -> Topology:
    _count("hosts per side", hosts_per_side)
    b = _Builder("dumbbell", bw_mbps, bottleneck_mbps)
    left = b.switch("s1", "left", edge_index=1)
    right = b.switch("s2", "right", edge_index=2)
    for i in range(1, hosts_per_side + 1):
        b.host(f"h{i}", left, 1, i)
    for i in range(1, hosts_per_side + 1):
        b.host(f"h{hosts_per_side + i}", right, 2, i)
    b.link(left, right)
    return b.build(hosts_per_side=hosts_per_side, bw_mbps=bw_mbps, bottleneck_mbps=bottleneck_mbps)


TOPOLOGIES: dict[str, Callable[..., Topology]] = {
    "rack": rack,
    "leafspine": leafspine,
    "dumbbell": dumbbell,
}


def build_topology(name: str, **params: Any) -> Topology:
    """A topology by name with its parameters (unknown parameters are an error)."""
    try:
        factory = TOPOLOGIES[name]
    except KeyError:
        raise TopologyError(f"unknown topology {name!r} (known: {', '.join(TOPOLOGIES)})") from None
    try:
        return factory(**{k: v for k, v in params.items() if v is not None})
    except TypeError as e:
        raise TopologyError(f"{name}: {e}") from None
