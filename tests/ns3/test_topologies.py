"""The simulator's topologies as data (gradswitch/topology/generators.py): a k-ary fat tree and a three-tier
leaf-spine, importable without Mininet, checked by their structure (no simulator needed)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from gradswitch.control.routing import compute_routes
from gradswitch.topology.generators import build_topology, fattree, fattree_k, leafspine3
from gradswitch.topology.model import TopologyError


@pytest.mark.parametrize(("hosts", "k"), [(1, 2), (2, 2), (3, 4), (16, 4), (17, 6), (54, 6), (128, 8), (250, 10),
                                          (256, 12), (1024, 16)])
def test_fattree_k_is_the_smallest_even_k_that_holds_the_hosts(hosts, k):
    assert fattree_k(hosts) == k
    assert k**3 // 4 >= hosts and (k - 2) ** 3 // 4 < hosts


@pytest.mark.parametrize("k", [4, 6, 8])
def test_a_full_fat_tree_has_its_shape(k):
    t = fattree(k**3 // 4)
    half = k // 2
    roles = Counter(s.role for s in t.switches)
    assert roles == {"edge": k * half, "agg": k * half, "core": half * half}
    assert len(t.links) == k**3 // 4 + 2 * k * half * half  # hosts, edge-agg, agg-core
    for s in t.switches:
        assert len(list(t.links_of(s.name))) == k  # every switch has k ports
    # every core reaches every pod once, through the aggregation switch of its group
    for s in t.switches:
        if s.role == "core":
            i = int(s.name[4:].split("_")[0])
            assert sorted(n for _, n, _ in t.switch_neighbors(s.name)) == sorted(f"agg{p}_{i}" for p in range(k))


def test_hosts_spread_over_the_pods_then_the_edges():
    t = fattree(20, k=6)  # 6 pods of 3 edges: 20 hosts, 3 or 4 per pod, at most 2 per edge
    per_pod = Counter(t.attachment(h.name)[0].split("_")[0] for h in t.hosts)
    assert sorted(per_pod.values()) == [3, 3, 3, 3, 4, 4]
    per_edge = Counter(t.attachment(h.name)[0] for h in t.hosts)
    assert len(per_edge) == 18 and max(per_edge.values()) == 2  # every edge has a host before any has two
    assert t.attachment("h1")[0] == "edge0_0" and t.attachment("h2")[0] == "edge1_0"
    assert t.attachment("h7")[0] == "edge0_1"
    for h in t.hosts:  # each edge switch's hosts are its /24
        edge = t.switch(t.attachment(h.name)[0])
        assert edge.subnet is not None and h.ip.rsplit(".", 1)[0] == edge.subnet.rsplit(".", 1)[0]


def test_routes_cross_the_core_between_pods_with_every_core_of_the_group():
    t = fattree(16)
    routes = {r.prefix: r for r in compute_routes(t)["edge0_0"]}
    to_pod1 = routes[t.switch("edge1_0").subnet or ""]
    assert len(to_pod1.next_hops) == 2  # both aggregation switches of pod 0
    agg_routes = {r.prefix: r for r in compute_routes(t)["agg0_0"]}
    assert len(agg_routes[t.switch("edge1_0").subnet or ""].next_hops) == 2  # both cores of group 0


@pytest.mark.parametrize(("params", "message"), [
    ({"hosts": 17, "k": 4}, "holds 16 hosts"), ({"hosts": 4, "k": 3}, "even"), ({"hosts": 0}, "hosts = 0"),
    ({"hosts": 4, "k": 24}, "edge switches")])
def test_bad_fat_trees_say_what_to_change(params, message):
    with pytest.raises(TopologyError, match=message):
        fattree(**params)


def test_leafspine3_links_every_spine_to_every_superspine():
    t = leafspine3(pods=3, leaves_per_pod=2, spines_per_pod=2, superspines=4, hosts_per_leaf=3)
    roles = Counter(s.role for s in t.switches)
    assert roles == {"leaf": 6, "spine": 6, "superspine": 4}
    assert len(t.hosts) == 18
    assert sorted(n for _, n, _ in t.switch_neighbors("spine1_0")) == \
        ["leaf1_0", "leaf1_1", "superspine0", "superspine1", "superspine2", "superspine3"]
    routes = {r.prefix: r for r in compute_routes(t)["leaf0_0"]}
    assert len(routes[t.switch("leaf2_1").subnet or ""].next_hops) == 2  # up through both spines of its pod


def test_leafspine3_reaches_1024_hosts():
    t = leafspine3(pods=8, leaves_per_pod=8, spines_per_pod=4, superspines=4, hosts_per_leaf=16)
    assert len(t.hosts) == 1024


def test_topologies_by_name():
    assert build_topology("fattree", hosts=8).params["k"] == 4
    assert build_topology("leafspine3", pods=2).name == "leafspine3"


def test_importable_without_mininet():
    code = ("import sys; sys.modules['mininet'] = None; "
            "from gradswitch.topology.generators import fattree, leafspine3; fattree(16); leafspine3()")
    subprocess.run([sys.executable, "-c", code], check=True)
