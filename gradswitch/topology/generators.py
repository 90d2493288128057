"""The topologies of the testbed, declared as data with parameters.

- rack(hosts): one top-of-rack switch, N hosts.
- leafspine(leaves, spines, hosts_per_leaf): every leaf linked to every spine.
- dumbbell(hosts_per_side): two switches joined by one (bottleneck) link.
- fattree(hosts, k): a k-ary fat tree (k pods of k/2 edge and k/2 aggregation switches, (k/2)^2
  cores), the smallest even k with k^3/4 >= hosts unless given, hosts dealt round robin over the pods.
- leafspine3(pods, leaves_per_pod, spines_per_pod, superspines, hosts_per_leaf): three tiers, each pod
  a leaf-spine, every spine linked to every super-spine.

Hosts on edge switch k (1-based, in declaration order) are 10.0.k.i with MAC
00:00:0a:00:kk:ii; each edge switch declares the /24 of its hosts, which the other
switches route as one prefix. Ports count from 1 in the order links are listed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.topology.model import Host, Link, Switch, Topology, TopologyError

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


def fattree_k(hosts: int) -> int:
    """The smallest even k whose k-ary fat tree holds `hosts` hosts (k^3/4 of them)."""
    k = 2
    while k**3 // 4 < hosts:
        k += 2
    return k


MAX_EDGES = 254  # edge switch k's hosts are 10.0.k.0/24


def fattree(hosts: int = 16, k: int | None = None, bw_mbps: float | None = None,
            fabric_bw_mbps: float | None = None) -> Topology:
    """A k-ary fat tree: pod p has edge switches edge<p>_<i> and aggregation switches agg<p>_<i> (i < k/2),
    each edge linked to every aggregation switch of its pod; core<i>_<j> is linked to agg<p>_<i> of every pod.
    Host h (from 0) goes to pod h mod k, then round robin over that pod's edges: the hosts spread over the
    pods. Every switch of the tree exists even where few hosts are attached."""
    _count("hosts", hosts, most=MAX_EDGES * MAX_HOSTS_PER_EDGE)
    if k is None:
        k = fattree_k(hosts)
    if k < 2 or k % 2:
        raise TopologyError(f"k = {k}: a fat tree's k is even and at least 2")
    if k**3 // 4 < hosts:
        raise TopologyError(f"k = {k}: a {k}-ary fat tree holds {k**3 // 4} hosts, not {hosts}; "
                            f"give k >= {fattree_k(hosts)} or leave k out")
    half = k // 2
    if k * half > MAX_EDGES:
        raise TopologyError(f"k = {k}: {k * half} edge switches; at most {MAX_EDGES} have host addresses")
    b = _Builder("fattree", bw_mbps, fabric_bw_mbps)
    edges = [[b.switch(f"edge{p}_{i}", "edge", edge_index=p * half + i + 1) for i in range(half)] for p in range(k)]
    aggs = [[b.switch(f"agg{p}_{i}", "agg") for i in range(half)] for p in range(k)]
    cores = [[b.switch(f"core{i}_{j}", "core") for j in range(half)] for i in range(half)]
    for h in range(hosts):
        pod, q = h % k, h // k
        edge, slot = q % half, q // half
        b.host(f"h{h + 1}", edges[pod][edge], pod * half + edge + 1, slot + 1)
    for p in range(k):
        for i in range(half):
            for j in range(half):
                b.link(edges[p][i], aggs[p][j])
    for p in range(k):
        for i in range(half):
            for j in range(half):
                b.link(aggs[p][i], cores[i][j])
    return b.build(hosts=hosts, k=k, bw_mbps=bw_mbps)


def leafspine3(
    pods: int = 2,
    leaves_per_pod: int = 2,
    spines_per_pod: int = 2,
    superspines: int = 2,
    hosts_per_leaf: int = 2,
    bw_mbps: float | None = None,
    fabric_bw_mbps: float | None = None,
) -> Topology:
    """Three tiers: pod p is a leaf-spine (leaf<p>_<i> linked to every spine<p>_<j>), and every spine is linked
    to every super-spine superspine<s>. Up to 254 leaves (their /24s) of up to 253 hosts."""
    _count("pods", pods, most=64)
    _count("leaves per pod", leaves_per_pod, most=64)
    _count("spines per pod", spines_per_pod, most=64)
    _count("superspines", superspines, most=64)
    _count("hosts per leaf", hosts_per_leaf)
    if pods * leaves_per_pod > MAX_EDGES:
        raise TopologyError(f"{pods * leaves_per_pod} leaves: at most {MAX_EDGES} have host addresses")
    b = _Builder("leafspine3", bw_mbps, fabric_bw_mbps)
    leaves = [[b.switch(f"leaf{p}_{i}", "leaf", edge_index=p * leaves_per_pod + i + 1) for i in range(leaves_per_pod)]
              for p in range(pods)]
    spines = [[b.switch(f"spine{p}_{j}", "spine") for j in range(spines_per_pod)] for p in range(pods)]
    supers = [b.switch(f"superspine{s}", "superspine") for s in range(superspines)]
    host_no = 0
    for p in range(pods):
        for i in range(leaves_per_pod):
            for h in range(1, hosts_per_leaf + 1):
                host_no += 1
                b.host(f"h{host_no}", leaves[p][i], p * leaves_per_pod + i + 1, h)
    for p in range(pods):
        for leaf in leaves[p]:
            for spine in spines[p]:
                b.link(leaf, spine)
    for p in range(pods):
        for spine in spines[p]:
            for top in supers:
                b.link(spine, top)
    return b.build(pods=pods, leaves_per_pod=leaves_per_pod, spines_per_pod=spines_per_pod, superspines=superspines,
                   hosts_per_leaf=hosts_per_leaf, bw_mbps=bw_mbps)


TOPOLOGIES: dict[str, Callable[..., Topology]] = {
    "rack": rack,
    "leafspine": leafspine,
    "dumbbell": dumbbell,
    "fattree": fattree,
    "leafspine3": leafspine3,
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
