"""Real P4Runtime against simple_switch_grpc: pipeline, entries, groups, counters, packet I/O, arbitration."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from gradswitch.control.controls import acl
from gradswitch.control.controls.packet_io import punt_reason
from gradswitch.control.p4rt import (
    CloneSession,
    MulticastGroup,
    NotPrimary,
    P4Info,
    Replica,
    SwitchSession,
    TableEntry,
    WriteError,
)
from gradswitch.control.p4rt.entities import normalize
from gradswitch.control.pcap import read_pcap
from gradswitch.control.trace_replay import TraceSwitch
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.polling import wait_until

pytestmark = pytest.mark.bmv2

ROUTE = TableEntry("ipv4_routes", {"dst_addr": "10.0.2.0/24"}, "set_next_hop",
                   {"port": 2, "dst_mac": "00:00:0a:00:02:01"})


@pytest.fixture
def switch(tmp_path):
    sw = TraceSwitch([1, 2, 3], run_dir=tmp_path)
    sw.start()
    yield sw
    sw.stop()


def test_entries_round_trip_through_the_switch(switch):
    s = switch.session
    rule = acl.rule("drop", priority=5, protocol="17", l4_dst_port="4791")
    s.insert([ROUTE, rule])
    p4info = s.p4info
    assert s.read_table("ipv4_routes") == [normalize(p4info, ROUTE)]
    assert s.read_table("acl_rules") == [normalize(p4info, rule)]
    moved = TableEntry("ipv4_routes", {"dst_addr": "10.0.2.0/24"}, "set_next_hop", {"port": 3, "dst_mac": 1})
    s.modify([moved])
    assert s.read_table("ipv4_routes") == [normalize(p4info, moved)]
    s.delete([moved, rule])
    assert s.read_table("ipv4_routes") == [] and s.read_table("acl_rules") == []


def test_refused_write_names_switch_entry_and_reason(switch):
    switch.session.insert([ROUTE])
    with pytest.raises(WriteError) as err:
        switch.session.insert([ROUTE])
    text = str(err.value)
    assert "switch trace" in text and "ipv4_routes[dst_addr=" in text and "ALREADY_EXISTS" in text
    with pytest.raises(WriteError, match="NOT_FOUND"):
        switch.session.delete([TableEntry("ipv4_routes", {"dst_addr": "10.9.0.0/16"}, "drop_no_route")])


def test_multicast_group_and_clone_session(switch):
    s = switch.session
    group = MulticastGroup(7, (Replica(1, 0), Replica(3, 2)))
    clone = CloneSession(CONFIG.CPU_CLONE_SESSION_ID, (Replica(CONFIG.CPU_PORT, 0),))
    s.insert([group, clone])
    assert s.read_multicast_group(7) == group
    assert s.read_clone_session(CONFIG.CPU_CLONE_SESSION_ID) == clone
    s.modify([MulticastGroup(7, (Replica(2, 0),))])
    assert s.read_multicast_group(7) == MulticastGroup(7, (Replica(2, 0),))


def test_pipeline_is_pushed_once(switch):
    assert switch.session.push_pipeline() is False  # same cookie: nothing to do


def test_counters_packet_in_packet_out_and_copy_to_cpu(switch):
    s = switch.session
    h1 = ("10.0.1.1", "00:00:0a:00:01:01")
    h2 = ("10.0.1.2", "00:00:0a:00:01:02")
    s.insert([
        TableEntry("ipv4_routes", {"dst_addr": f"{h2[0]}/32"}, "set_next_hop", {"port": 2, "dst_mac": h2[1]}),
        CloneSession(CONFIG.CPU_CLONE_SESSION_ID, (Replica(CONFIG.CPU_PORT, 0),)),
        acl.rule("copy_to_cpu", priority=1, l4_dst_port="7777"),
    ])
    udp = bytes(Ether(src=h1[1], dst=h2[1]) / IP(src=h1[0], dst=h2[0]) / UDP(sport=1, dport=7777) / (b"x" * 50))
    arp = bytes(Ether(src=h1[1], dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=h1[1], psrc=h1[0], pdst="10.0.1.99"))
    switch.replay([(1, udp), (1, udp), (3, arp)])
    switch.wait({2: 2}, packet_ins=3)
    rx = s.read_counter("port_rx")
    assert (rx[1].packets, rx[1].bytes) == (2, 2 * len(udp))
    assert rx[3].packets == 1
    assert s.read_counter("port_tx", 2)[2].packets == 2
    reasons = sorted((md["ingress_port"], punt_reason(md["reason"])) for md, _ in switch.packet_ins)
    assert reasons == [(1, "acl"), (1, "acl"), (3, "arp-miss")]
    assert [p for md, p in switch.packet_ins if punt_reason(md["reason"]) == "arp-miss"] == [arp]
    probe = bytes(Ether(dst="00:00:00:00:00:99") / IP(dst="10.0.0.9") / UDP(dport=9))
    s.send_packet_out(probe, egress_port=3)
    wait_until(lambda: read_pcap(switch.out_path(3)) == [probe], 10, what="the packet-out on port 3")


def test_arbitration_backup_is_refused_and_higher_election_takes_over(switch):
    primary = switch.session
    backup = SwitchSession(switch.address, P4Info.from_file(), election_id=(0, 50))
    try:
        assert primary.is_primary and not backup.is_primary
        with pytest.raises(NotPrimary):
            backup.insert([ROUTE])
        assert primary.read_table("ipv4_routes") == []
        # Reads work for a backup.
        assert backup.read_table("ipv4_routes") == []
        usurper = SwitchSession(switch.address, P4Info.from_file(), election_id=(0, 200))
        try:
            assert usurper.is_primary
            wait_until(lambda: not primary.is_primary, 5, what="the old primary to be told")
            with pytest.raises(NotPrimary):
                primary.insert([ROUTE])
        finally:
            usurper.close()
        wait_until(lambda: primary.is_primary, 5, what="primary to come back when the usurper leaves")
    finally:
        backup.close()


def test_delete_by_key_alone_as_the_repl_types_it(switch):
    """docs/repl.md's `delete leaf1 acl_rules protocol=17 l4_dst_port=4791 priority=10`, and a delete
    in one of the two `faults` tables named by the short name that tells them apart."""
    from gradswitch.control.controls.fault_injection import loss_entries
    from gradswitch.control.repl import parse_entry

    s = switch.session
    p4info = s.p4info
    s.insert([acl.rule("copy_to_cpu", priority=10, protocol="17", l4_dst_port="4791"),
              acl.rule("drop", priority=11, protocol="17", l4_dst_port="4791"),
              *loss_entries(port=1, fraction=0.5, direction="both")])
    s.delete([parse_entry(p4info, "acl_rules", ["protocol=17", "l4_dst_port=4791", "priority=10"], False)])
    assert [e.priority for e in s.read_table("acl_rules")] == [11]  # the other priority is another entry
    s.delete([parse_entry(p4info, "ingress_faults.faults", ["port=1", "priority=10"], False)])
    assert s.read_table("ingress_faults.faults") == []
    assert len(s.read_table("egress_faults.faults")) == 1
    with pytest.raises(WriteError, match="NOT_FOUND"):
        s.delete([parse_entry(p4info, "acl_rules", ["protocol=17", "l4_dst_port=4791", "priority=10"], False)])
