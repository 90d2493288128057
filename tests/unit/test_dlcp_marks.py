"""The bits and priorities switch and hosts agree on for the RoCE class and trimming (config.p4)."""

from __future__ import annotations

import itertools

from gradswitch.control.controls import dlcp
from gradswitch.protocol.dlcp import (
    DROPPABLE,
    LAYER_CLASSES,
    LAYER_MASK,
    MAGNITUDE_CLASSES,
    MAGNITUDE_MASK,
    TRIMMED,
    marking,
)
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import qpn
from gradswitch.roce.headers import Bth, Opcode, Reth, Transport
from gradswitch.roce.wire import build_frame, parse_frame


def test_the_trimmed_bit_is_bit_0_of_resv7_and_no_host_marking_sets_it():
    assert TRIMMED == 1 << CONFIG.DLCP_TRIMMED_SHIFT == 1
    assert TRIMMED & (DROPPABLE | LAYER_MASK | MAGNITUDE_MASK) == 0
    for droppable, layer, magnitude in itertools.product((False, True), range(LAYER_CLASSES), range(MAGNITUDE_CLASSES)):
        assert marking(droppable, layer, magnitude) & TRIMMED == 0


def test_the_roce_class_sits_above_bulk_traffic_and_below_dlcp_acks():
    assert 0 < CONFIG.ROCE_CLASS_PRIORITY < CONFIG.DLCP_ACK_PRIORITY < CONFIG.PRIORITY_QUEUES
    layer_priorities = {int(e.params["priority"]) for e in dlcp.default_classes(1, by_magnitude=True)}
    assert min(layer_priorities) >= CONFIG.ROCE_CLASS_PRIORITY  # a DLCP job's classes order at or above it
    entry = dlcp.roce_class_entry()
    assert entry.match == {"hdr.udp.dst_port": CONFIG.ROCE_V2_UDP_PORT} and entry.action == "set_roce_class"


def test_the_hosts_parser_reads_a_notification_as_an_empty_packet_with_a_valid_icrc():
    """What gradswitch/roce/wire.py makes of a trimmed packet (the receivers' handling is the hosts' part)."""
    t = Transport(Bth(int(Opcode.WRITE_FIRST), qpn(1, 0, 3), 17, resv7=marking(True, 2, 0) | TRIMMED), b"",
                  reth=Reth(0x4000, 9, 3 * 4096))
    got = parse_frame(build_frame(t, "10.0.1.1", "10.0.2.1", "00:00:0a:00:01:01", "00:00:0a:00:02:01"))
    assert got.icrc_ok and got.transport.payload == b"" and got.transport.reth == t.reth
    assert got.transport.bth.resv7 & TRIMMED
