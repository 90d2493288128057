"""DLCP in the switch program on real BMv2: priority overtaking, selective dropping (trimming: its packets in
tests/bmv2/test_trimming.py), spraying."""

from __future__ import annotations

from collections import Counter

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from gradswitch.control.bmv2_thrift import Bmv2Thrift
from gradswitch.control.controls import all_base_entries, dlcp
from gradswitch.control.p4rt import TableEntry
from gradswitch.control.trace_replay import TraceSwitch
from gradswitch.protocol.dlcp import TRIMMED, marking
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.polling import wait_until
from gradswitch.protocol.qpn import qpn
from gradswitch.roce.headers import Aeth, Bth, Opcode, Transport
from gradswitch.roce.scapy_layers import BTH
from gradswitch.roce.wire import build_frame
from gradswitch.topology.generators import leafspine, rack

pytestmark = pytest.mark.bmv2
JOB = 5


def gradient_packet(topo, src: str, dst: str, psn: int, marking: int, size: int = 1000) -> bytes:
    s, d = topo.host(src), topo.host(dst)
    t = Transport(Bth(Opcode.WRITE_MIDDLE, qpn(1, 0, JOB), psn, resv7=marking), bytes(size))
    return build_frame(t, s.ip, d.ip, s.mac, d.mac, ident=psn + 1)


def start(ports, entries, tmp_path) -> TraceSwitch:
    sw = TraceSwitch(ports, run_dir=tmp_path)
    sw.start(entries)
    return sw


@pytest.mark.parametrize("priority", [True, False], ids=["priority", "fifo"])
def test_a_high_class_overtakes_queued_low_class_packets(tmp_path, priority):
    topo = rack(hosts=2)
    entries = all_base_entries(topo, "s1") + [dlcp.features_entry(JOB, dlcp.Features(priority=priority))] + \
        dlcp.default_classes(JOB)
    sw = start([1, 2], entries, tmp_path)
    try:
        with Bmv2Thrift(sw.address.thrift_port) as thrift:
            for prio in range(8):
                # every queue of port 2: 20 packets/s, so that all 15 packets are in before a few of the bulk
                # ones have left even when the machine is busy (at 100/s, 3 had left before the ACK came in)
                thrift.set_queue_rate(2, 20, priority=prio)
        low = [gradient_packet(topo, "h1", "h2", psn, marking(False, 7, 0)) for psn in range(12)]
        high = gradient_packet(topo, "h1", "h2", 100, marking(False, 0, 3))
        sw.replay([(1, p) for p in low] + [(1, high)])
        sw.wait({2: 13}, timeout=60)
    finally:
        result = sw.stop()
    out = [Ether(p) for p in result.out(2)]
    psns = [p[BTH].psn for p in out]
    assert sorted(psns) == [*range(12), 100]
    dscp = {p[BTH].psn: p[IP].tos >> 2 for p in out}
    if priority:
        assert psns.index(100) <= 3, psns  # sent after at most the low packets already on their way
        assert dscp[100] == 6 << 3 and dscp[0] == 1 << 3  # the chosen priorities, as class selectors
    else:
        assert psns == [*range(12), 100]  # one queue: first in, first out
        assert set(dscp.values()) == {0}


def test_droppable_packets_are_trimmed_over_the_threshold_and_the_others_kept_whole(tmp_path):
    topo = rack(hosts=2, bw_mbps=1.0)  # the virtual queue of port 2 drains at 1 Mb/s
    entries = all_base_entries(topo, "s1") + [dlcp.features_entry(JOB, dlcp.Features(priority=True, drop=True))] + \
        dlcp.default_classes(JOB)
    thresholds = [e for e in entries if isinstance(e, TableEntry) and e.table.endswith(dlcp.THRESHOLDS)]
    for e in thresholds:
        entries.remove(e)
    entries += dlcp.threshold_entries({1: 3000})  # priority 1: trim droppable packets above 3000 bytes
    sw = start([1, 2], entries, tmp_path)
    try:
        packets = [gradient_packet(topo, "h1", "h2", psn, marking(psn % 2 == 1, 7, 0)) for psn in range(30)]
        sw.replay([(1, p) for p in packets])
        sw.wait({2: 30}, timeout=60)
        assert sw.session is not None
        events = sw.session.read_counter(dlcp.EVENTS)
    finally:
        result = sw.stop()
    out = {Ether(p)[BTH].psn: p for p in result.out(2)}
    assert sorted(out) == list(range(30))  # every packet goes on: whole, or its headers alone
    whole = {psn for psn, p in out.items() if len(p) == len(packets[psn])}
    trimmed = {psn for psn, p in out.items() if len(p) < len(packets[psn])}
    assert {p for p in range(30) if p % 2 == 0} <= whole  # a packet not marked droppable is never trimmed
    assert all(Ether(out[p])[BTH].resv7 & TRIMMED for p in trimmed) and not any(
        Ether(out[p])[BTH].resv7 & TRIMMED for p in whole)
    kept_droppable = sorted(p for p in whole if p % 2)
    # The first droppable packets find the queue short and pass; once it is over 3000 bytes they are
    # trimmed (a rare one may pass when the queue drained below the threshold meanwhile).
    assert kept_droppable[:1] == [1] and len(kept_droppable) <= 4, kept_droppable
    assert len(trimmed) == 15 - len(kept_droppable)
    assert result.drops == {}  # trimmed, not dropped
    base = JOB * CONFIG.DLCP_EVENTS
    assert events[base + CONFIG.DLCP_EV_DROPPED].packets == len(trimmed)  # their payloads were dropped
    assert events[base + CONFIG.DLCP_EV_KEPT].packets == len(kept_droppable)


@pytest.mark.parametrize("spray", [True, False], ids=["spray", "flow-hash"])
def test_spraying_spreads_one_flow_over_every_uplink(tmp_path, spray):
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
    entries = all_base_entries(topo, "leaf1") + [dlcp.features_entry(JOB, dlcp.Features(spray=spray))]
    sw = start([1, 2, 3, 4], entries, tmp_path)
    n = 400
    try:
        # The trace arrives faster than one egress queue (64 packets) drains: this test is about the
        # path each packet takes, so the queues hold the whole trace.
        with Bmv2Thrift(sw.address.thrift_port) as thrift:
            thrift.set_all_queue_depths(n)
        sw.replay([(1, gradient_packet(topo, "h1", "h3", psn, 0, size=64)) for psn in range(n)])
        sw.wait({}, timeout=60)
        session = sw.session
        assert session is not None
        # Taken in is not yet sent: wait for egress to have counted every packet on an uplink.
        wait_until(lambda: sum(c.packets for p, c in session.read_counter("port_tx").items() if p in (3, 4)) >= n,
                   30, what="every packet out of an uplink")
        tx = session.read_counter("port_tx")
    finally:
        sw.stop()
    per_uplink = Counter({port: tx[port].packets if port in tx else 0 for port in (3, 4)})
    assert sum(per_uplink.values()) == n
    if spray:  # each uplink within 10 points of an even share (binomial sd is 2.5 points at n=400)
        assert all(abs(c / n - 0.5) <= 0.10 for c in per_uplink.values()), per_uplink
    else:  # one flow, one path
        assert sorted(per_uplink.values()) == [0, n]


@pytest.mark.parametrize("roce_class", [True, False], ids=["roce-class", "fifo"])
def test_the_roce_class_puts_every_roce_packet_ahead_of_bulk_traffic(tmp_path, roce_class):
    """baseline-class: RoCE packets of a job without DLCP (and their ACKs) leave before bulk UDP queued ahead of
    them, marked CS ROCE_CLASS_PRIORITY; bulk traffic keeps DSCP 0; a DLCP job with priority on keeps its own
    layer priorities. Without the class, one FIFO."""
    topo = rack(hosts=2)
    h1, h2 = topo.host("h1"), topo.host("h2")
    entries = all_base_entries(topo, "s1") + [dlcp.features_entry(JOB, dlcp.Features(priority=True))] + \
        dlcp.default_classes(JOB) + ([dlcp.roce_class_entry()] if roce_class else [])
    sw = start([1, 2], entries, tmp_path)
    try:
        with Bmv2Thrift(sw.address.thrift_port) as thrift:
            for prio in range(8):
                # every queue of port 2: 20 packets/s, so that all 15 packets are in before a few of the bulk
                # ones have left even when the machine is busy (at 100/s, 3 had left before the ACK came in)
                thrift.set_queue_rate(2, 20, priority=prio)
        bulk = [Ether(src=h1.mac, dst=h2.mac) / IP(src=h1.ip, dst=h2.ip, id=i) / UDP(sport=40000, dport=5201)
                / Raw(bytes(1000)) for i in range(12)]
        plain = Transport(Bth(Opcode.WRITE_MIDDLE, qpn(1, 0, 9), 500), bytes(1000))  # job 9: no DLCP
        ack = Transport(Bth(Opcode.ACKNOWLEDGE, qpn(1, 0, 9), 501), aeth=Aeth.ack(3))
        roce = [build_frame(t, h1.ip, h2.ip, h1.mac, h2.mac, ident=100 + i) for i, t in enumerate((plain, ack))]
        dlcp_job = gradient_packet(topo, "h1", "h2", 600, marking(False, 0, 0))  # layer 0: priority 6
        sw.replay([(1, bytes(p)) for p in bulk] + [(1, f) for f in roce] + [(1, dlcp_job)])
        sw.wait({2: 15}, timeout=60)
    finally:
        result = sw.stop()
    out = [Ether(p) for p in result.out(2)]
    order = [p[IP].id for p in out]
    dscp = {p[IP].id: p[IP].tos >> 2 for p in out}
    assert sorted(order) == [*range(12), 100, 101, 601]
    assert dscp[601] == 6 << 3  # the DLCP job's own class, with or without the RoCE class
    assert all(dscp[i] == 0 for i in range(12))  # bulk traffic is never marked
    if roce_class:
        assert max(order.index(100), order.index(101)) <= 4, order  # after at most the bulk already on its way
        assert dscp[100] == dscp[101] == CONFIG.ROCE_CLASS_PRIORITY << 3
    else:
        assert order.index(100) > 10 and order.index(101) > 10, order  # one FIFO: behind every bulk packet
        assert dscp[100] == dscp[101] == 0
