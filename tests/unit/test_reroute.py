"""Routes around what is out, the record of what the controller wrote, and the fabric's rerouting and health events
without switches (the same on BMv2: tests/mininet/test_switch_faults.py)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import cast

import pytest

from gradswitch.control.controls import l3_forwarding
from gradswitch.control.fabric import Fabric
from gradswitch.control.health import Health, HealthEvent, HealthKind, LinkWatch, WatchedLink
from gradswitch.control.p4rt import Entity, MulticastGroup, P4Info, Replica, SwitchSession, TableEntry
from gradswitch.control.p4rt.session import DELETE, INSERT, MODIFY
from gradswitch.control.routing import NOTHING_OUT, Outage, compute_routes, ecmp_groups, route_for
from gradswitch.control.written_entries import WrittenEntries, entity_key
from gradswitch.protocol.ecmp import Balancing, LoadBalance
from gradswitch.protocol.paths import P4INFO
from gradswitch.topology.generators import leafspine
from gradswitch.topology.model import Topology, TopologyError

P4 = P4Info.from_file(P4INFO)
TOPO = leafspine(leaves=2, spines=2, hosts_per_leaf=2)


def port(topo: Topology, a: str, b: str) -> int:
    return topo.ports_between(a, b)[0]


def remote(topo: Topology, switch: str, outage: Outage, ip: str = "10.0.2.1") -> set[int]:
    """The egress ports of a switch's route towards an address (empty: no route)."""
    route = route_for(compute_routes(topo, outage)[switch], ip)
    return {hop.port for hop in route.next_hops} if route else set()


def test_nothing_out_is_the_routes_of_the_whole_topology() -> None:
    assert compute_routes(TOPO, NOTHING_OUT) == compute_routes(TOPO)
    assert remote(TOPO, "leaf1", NOTHING_OUT) == {port(TOPO, "leaf1", "spine1"), port(TOPO, "leaf1", "spine2")}


def test_a_dead_spine_leaves_the_other_one_and_has_no_routes() -> None:
    out = Outage(switches=frozenset({"spine1"}))
    routes = compute_routes(TOPO, out)
    assert routes["spine1"] == []
    assert remote(TOPO, "leaf1", out) == {port(TOPO, "leaf1", "spine2")}
    assert remote(TOPO, "leaf2", out, "10.0.1.1") == {port(TOPO, "leaf2", "spine2")}
    assert ecmp_groups(routes["leaf1"]) == {}  # one next hop left: no ECMP group
    assert l3_forwarding.member_entries(TOPO, "leaf1", out) == []


def test_a_link_down_moves_both_leaves_and_the_spine_around_it() -> None:
    out = NOTHING_OUT.with_link("spine1", "leaf1", True)  # either order
    assert not out.link_up("leaf1", "spine1")
    assert remote(TOPO, "leaf1", out) == {port(TOPO, "leaf1", "spine2")}
    assert remote(TOPO, "leaf2", out, "10.0.1.1") == {port(TOPO, "leaf2", "spine2")}
    # spine1 still reaches leaf1, the long way: through leaf2 and spine2
    assert remote(TOPO, "spine1", out, "10.0.1.1") == {port(TOPO, "spine1", "leaf2")}
    assert remote(TOPO, "leaf2", out) == {port(TOPO, "leaf2", "h3")}  # its own hosts unchanged
    back = out.with_link("leaf1", "spine1", False)
    assert back == NOTHING_OUT and compute_routes(TOPO, back) == compute_routes(TOPO)


def test_an_unreachable_destination_gets_no_route_and_a_host_link_down_loses_its_host() -> None:
    dead_leaf = Outage(switches=frozenset({"leaf2"}))
    assert remote(TOPO, "leaf1", dead_leaf) == set()
    assert remote(TOPO, "spine1", dead_leaf) == set()
    host_cut = NOTHING_OUT.with_link("leaf1", "h1", True)
    assert remote(TOPO, "leaf1", host_cut, "10.0.1.1") == set()
    assert remote(TOPO, "leaf1", host_cut, "10.0.1.2") == {port(TOPO, "leaf1", "h2")}
    assert host_cut.describe() == "h1-leaf1" and dead_leaf.describe() == "leaf2" and NOTHING_OUT.describe() == "nothing"


def test_with_nothing_out_a_disconnected_topology_is_still_an_error() -> None:
    both = Outage(links=frozenset({frozenset(("leaf1", "spine1")), frozenset(("leaf1", "spine2"))}))
    assert remote(TOPO, "leaf2", both, "10.0.1.1") == set()  # cut off: no route, no error
    isolated = Topology(TOPO.name, TOPO.hosts, TOPO.switches,
                        tuple(lk for lk in TOPO.links if "leaf1" not in (lk.a, lk.b) or lk.a.startswith("h")
                              or lk.b.startswith("h")))
    with pytest.raises(TopologyError, match="cannot reach"):
        compute_routes(isolated)


def test_the_record_keeps_what_is_held_in_the_order_written() -> None:
    record = WrittenEntries(P4)
    route = TableEntry("ipv4_routes", {"hdr.ipv4.dst_addr": "10.0.2.0/24"}, "set_next_hop",
                       {"port": 3, "dst_mac": "02:00:00:02:00:01"})
    moved = TableEntry("ipv4_routes", {"hdr.ipv4.dst_addr": "10.0.2.0/24"}, "set_next_hop",
                       {"port": 4, "dst_mac": "02:00:00:03:00:01"})
    group = MulticastGroup(1, (Replica(1), Replica(2)))
    mac = TableEntry("port_macs", {"std_meta.egress_port": 1}, "set_source_mac", {"mac": "02:00:00:00:00:01"})
    record.record([(INSERT, route), (INSERT, group), (INSERT, mac)])
    record.record([(MODIFY, moved)])
    assert record.entities() == [moved, group, mac]  # modified in place
    assert entity_key(P4, route) == entity_key(P4, moved) != entity_key(P4, mac)
    assert record.table("ipv4_routes") == [moved] and record.table(P4.table("ipv4_routes").preamble.name) == [moved]
    record.record([(DELETE, TableEntry("ipv4_routes", {"hdr.ipv4.dst_addr": "10.0.2.0/24"}))])  # by key alone
    assert record.replay() == [(INSERT, group), (INSERT, mac)] and len(record) == 2


class Recorder:
    """A live switch's session as the fabric uses it when rerouting: each write accepted and recorded."""

    def __init__(self, written: WrittenEntries) -> None:
        self.written = written
        self.writes: list[list[tuple[int, Entity]]] = []

    def write(self, updates: Sequence[tuple[int, Entity]]) -> None:
        if updates:
            self.writes.append(list(updates))
            self.written.record(updates)


PLAIN = Balancing()


def fabric_with_base_routes(balancing: Balancing = PLAIN) -> tuple[Fabric, dict[str, Recorder], list[HealthEvent]]:
    fabric = Fabric(TOPO, p4info=P4)
    sessions = {}
    for sw in TOPO.switches:
        rec = Recorder(fabric.written[sw.name])
        rec.write([(INSERT, e) for e in l3_forwarding.forwarding_entries(TOPO, sw.name, balancing)])
        rec.writes.clear()
        sessions[sw.name] = rec
    fabric.sessions = cast(dict[str, SwitchSession], sessions)
    events: list[HealthEvent] = []
    fabric.health.subscribe(events.append)
    return fabric, sessions, events


def held_forwarding(fabric: Fabric, switch: str) -> list[str]:
    tables = (l3_forwarding.ECMP_MEMBERS, l3_forwarding.ROUTES)
    return sorted(fabric.normalize(e).describe() for t in tables for e in fabric.written[switch].table(t))


def wanted_forwarding(fabric: Fabric, switch: str, outage: Outage, balancing: Balancing = PLAIN) -> list[str]:
    return sorted(fabric.normalize(e).describe()
                  for e in l3_forwarding.forwarding_entries(TOPO, switch, balancing, outage))


def test_a_dead_switch_is_routed_around_and_put_back() -> None:
    flowlets = Balancing(LoadBalance.FLOWLET, 200, 3)
    fabric, sessions, events = fabric_with_base_routes(flowlets)
    fabric._stream_ended("spine1")  # what the session's stream thread calls when the switch dies
    fabric._stream_ended("spine1")  # told twice: noticed once
    out = Outage(switches=frozenset({"spine1"}))
    assert fabric.outage == out and not fabric.is_up("spine1") and "spine1" not in fabric.switch_names()
    assert [(e.kind, e.target) for e in events] == [(HealthKind.SWITCH_DOWN, "spine1"), (HealthKind.REROUTED, "spine1")]
    assert sessions["spine1"].writes == []  # nothing written to the dead one
    for sw in ("leaf1", "leaf2", "spine2"):
        assert held_forwarding(fabric, sw) == wanted_forwarding(fabric, sw, out, flowlets)
    # New members before the routes that use them, stale routes before the members they used.
    kinds = [(batch[0][0], cast(TableEntry, batch[0][1]).table.split(".")[-1]) for batch in sessions["leaf1"].writes]
    assert kinds == [(MODIFY, "ipv4_routes"), (DELETE, "ecmp_members")]
    assert sessions["spine2"].writes == []  # its routes do not change
    # Back (what restore does once the switch holds its entries again): every route as at the start.
    fabric.outage = NOTHING_OUT
    fabric.reroute("spine1")
    for sw in ("leaf1", "leaf2", "spine1", "spine2"):
        assert held_forwarding(fabric, sw) == wanted_forwarding(fabric, sw, NOTHING_OUT, flowlets)
    assert fabric.balancing() == flowlets  # the balancing the routes were written with survives


def test_a_link_down_and_up_is_published_once_each() -> None:
    fabric, _, events = fabric_with_base_routes()
    fabric.link_changed("leaf1", "spine1", False)
    fabric.link_changed("spine1", "leaf1", False)  # both ends noticed: one event
    assert fabric.outage == NOTHING_OUT.with_link("leaf1", "spine1", True)
    fabric.link_changed("leaf1", "spine1", True)
    assert [(e.kind, e.target) for e in events] == [
        (HealthKind.LINK_DOWN, "leaf1-spine1"), (HealthKind.REROUTED, "leaf1-spine1"),
        (HealthKind.LINK_UP, "leaf1-spine1"), (HealthKind.REROUTED, "leaf1-spine1")]
    assert all(b.at >= a.at for a, b in itertools.pairwise(events))
    for sw in ("leaf1", "leaf2", "spine1", "spine2"):
        assert held_forwarding(fabric, sw) == wanted_forwarding(fabric, sw, NOTHING_OUT)


def test_health_keeps_events_and_a_failing_subscriber_does_not_stop_the_others() -> None:
    health = Health()
    got: list[HealthEvent] = []

    def broken(event: HealthEvent) -> None:
        raise RuntimeError("subscriber bug")

    health.subscribe(broken)
    unsubscribe = health.subscribe(got.append)
    first = health.publish(HealthKind.SWITCH_DOWN, "spine1", at=5.0)
    unsubscribe()
    health.publish(HealthKind.SWITCH_UP, "spine1", at=7.0)
    assert got == [first] and first.describe() == "switch-down spine1"
    assert [e.kind for e in health.since(6.0)] == [HealthKind.SWITCH_UP]


def test_link_watch_reports_a_link_when_one_end_stops_carrying_and_when_both_carry_again() -> None:
    carrying = {"leaf1-eth3": True, "spine1-eth1": True}
    changes: list[tuple[str, bool]] = []
    watch = LinkWatch([WatchedLink("leaf1", "spine1", ("leaf1-eth3", "spine1-eth1")),
                       WatchedLink("h1", "leaf1", ())],  # nothing of it to watch here: left out
                      lambda lk, up: changes.append((lk.name, up)), is_up=carrying.__getitem__)
    assert [lk.name for lk in watch.links] == ["leaf1-spine1"]
    watch.poll()
    carrying["spine1-eth1"] = False
    watch.poll()
    watch.poll()
    carrying["spine1-eth1"] = True
    watch.poll()
    assert changes == [("leaf1-spine1", False), ("leaf1-spine1", True)]
