"""Routes computed from the topology graph: prefixes, ECMP groups, and loop-free delivery."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradswitch.control.routing import NextHop, Route, compute_routes, ecmp_groups, route_for, switch_port_mac
from gradswitch.topology.generators import build_topology, dumbbell, leafspine, rack
from gradswitch.topology.model import Host, Link, Switch, Topology, TopologyError


def test_rack_has_one_host_route_per_host():
    topo = rack(hosts=3)
    routes = compute_routes(topo)["s1"]
    assert routes == [
        Route("10.0.1.1/32", (NextHop(1, "00:00:0a:00:01:01"),)),
        Route("10.0.1.2/32", (NextHop(2, "00:00:0a:00:01:02"),)),
        Route("10.0.1.3/32", (NextHop(3, "00:00:0a:00:01:03"),)),
    ]


def test_leafspine_leaf_routes_remote_subnet_over_every_spine():
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
    leaf1 = compute_routes(topo)["leaf1"]
    remote = [r for r in leaf1 if r.prefix == "10.0.2.0/24"]
    # leaf1 ports: 1-2 hosts, 3 -> spine1, 4 -> spine2; spines' port 1 faces leaf1.
    assert remote == [Route("10.0.2.0/24", (NextHop(3, switch_port_mac(2, 1)), NextHop(4, switch_port_mac(3, 1))))]
    assert remote[0].is_ecmp
    assert ecmp_groups(leaf1) == {remote[0].next_hops: 1}


def test_leafspine_spine_routes_each_leaf_subnet_down_one_port():
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
    spine1 = compute_routes(topo)["spine1"]
    assert spine1 == [
        Route("10.0.1.0/24", (NextHop(1, switch_port_mac(0, 3)),)),
        Route("10.0.2.0/24", (NextHop(2, switch_port_mac(1, 3)),)),
    ]


def test_adding_a_leaf_needs_no_hand_written_route():
    small = compute_routes(leafspine(leaves=2, spines=2, hosts_per_leaf=1))
    big = compute_routes(leafspine(leaves=3, spines=2, hosts_per_leaf=1))
    assert {r.prefix for r in big["spine2"]} == {"10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24"}
    assert {r.prefix for r in big["leaf1"]} == {r.prefix for r in small["leaf1"]} | {"10.0.3.0/24"}


def test_dumbbell_routes_across_the_bottleneck():
    topo = dumbbell(hosts_per_side=2)
    s1 = compute_routes(topo)["s1"]
    assert route_for(s1, "10.0.2.1") == Route("10.0.2.0/24", (NextHop(3, switch_port_mac(1, 3)),))
    assert route_for(s1, "10.0.1.2") == Route("10.0.1.2/32", (NextHop(2, "00:00:0a:00:01:02"),))


def _deliver(topo: Topology, src: str, dst: str) -> set[int]:
    """Follow every ECMP choice from src's switch; return the hop counts of the paths that
    reach dst, failing on a loop, a black hole or a wrong host."""
    routes = compute_routes(topo)
    target = topo.host(dst)
    lengths: set[int] = set()
    start, _ = topo.attachment(src)
    stack: list[tuple[str, int, tuple[str, ...]]] = [(start, 0, (start,))]
    while stack:
        sw, hops, path = stack.pop()
        route = route_for(routes[sw], target.ip)
        assert route is not None, f"{sw} has no route to {dst}"
        for hop in route.next_hops:
            peer, peer_port = next(lk.other(sw) for lk in topo.links_of(sw) if lk.port_of(sw) == hop.port)
            if topo.is_host(peer):
                assert peer == dst, f"{sw} sends {dst}'s packets to {peer}"
                assert hop.mac == target.mac
                lengths.add(hops + 1)
            else:
                assert peer not in path, f"loop {path + (peer,)}"
                assert hop.mac == switch_port_mac(topo.switch(peer).device_id, peer_port)
                stack.append((peer, hops + 1, path + (peer,)))
    return lengths


@settings(max_examples=25, deadline=None)
@given(leaves=st.integers(1, 4), spines=st.integers(1, 3), per_leaf=st.integers(1, 3))
def test_every_host_pair_is_delivered_on_shortest_paths(leaves, spines, per_leaf):
    topo = leafspine(leaves=leaves, spines=spines, hosts_per_leaf=per_leaf)
    for a in topo.hosts:
        for b in topo.hosts:
            if a == b:
                continue
            same_leaf = topo.attachment(a.name)[0] == topo.attachment(b.name)[0]
            assert _deliver(topo, a.name, b.name) == ({1} if same_leaf else {3})


def test_routes_without_subnets_fall_back_to_host_routes():
    hosts = (Host("a", "192.168.0.1", "00:00:00:00:00:01"), Host("b", "172.16.0.9", "00:00:00:00:00:02"))
    switches = (Switch("x", 0), Switch("y", 1))
    links = (Link("a", 0, "x", 1), Link("b", 0, "y", 1), Link("x", 2, "y", 2))
    topo = Topology("custom", hosts, switches, links)
    expected = Route("172.16.0.9/32", (NextHop(2, switch_port_mac(1, 2)),))
    assert route_for(compute_routes(topo)["x"], "172.16.0.9") == expected


@pytest.mark.parametrize(
    ("links", "message"),
    [
        ((Link("a", 0, "x", 1), Link("b", 0, "x", 1)), "port 1 of x is used by two links"),
        ((Link("a", 0, "x", 1), Link("b", 0, "z", 1)), "unknown node 'z'"),
        ((Link("a", 0, "x", 255), Link("b", 0, "x", 2)), "CPU port"),
        ((Link("a", 0, "x", 1),), "host b must have exactly one link"),
    ],
)
def test_bad_topologies_name_the_fault(links, message):
    hosts = (Host("a", "10.0.1.1", "00:00:00:00:00:01"), Host("b", "10.0.1.2", "00:00:00:00:00:02"))
    with pytest.raises(TopologyError, match=message):
        Topology("bad", hosts, (Switch("x", 0),), links)


def test_host_outside_its_switch_subnet_is_refused():
    with pytest.raises(TopologyError, match="outside x's subnet"):
        Topology("bad", (Host("a", "10.9.9.9", "00:00:00:00:00:01"),), (Switch("x", 0, subnet="10.0.1.0/24"),),
                 (Link("a", 0, "x", 1),))


def test_unknown_topology_and_parameter_are_named():
    with pytest.raises(TopologyError, match="unknown topology 'ring'"):
        build_topology("ring")
    with pytest.raises(TopologyError, match="leaves"):
        build_topology("rack", leaves=3)


def test_addresses_stay_inside_declared_subnets():
    topo = leafspine(leaves=3, spines=2, hosts_per_leaf=4)
    for sw in topo.edge_switches():
        assert sw.subnet is not None
        for h, _ in topo.hosts_of(sw.name):
            assert ipaddress.IPv4Address(h.ip) in ipaddress.IPv4Network(sw.subnet)
