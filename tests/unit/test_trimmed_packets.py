"""Trimmed packets on the wire: a DLCP switch's drop notification (headers, no payload, fresh ICRC,
BTH.resv7 TRIMMED) as gradswitch/roce/wire.py builds and accepts it, checked against scapy's own decoding."""

from __future__ import annotations

import pytest
from scapy.compat import raw
from scapy.layers.inet import IP, UDP

from gradswitch.protocol.dlcp import DROPPABLE, TRIMMED, marking
from gradswitch.roce.headers import HAS_IMM, HAS_RETH, ICRC_LEN, Bth, HeaderError, Opcode, Reth, Transport
from gradswitch.roce.scapy_layers import BTH, RETH, ImmDt
from gradswitch.roce.wire import (
    ETH_HEADER_LEN,
    IPV4_HEADER_LEN,
    ROCE_OVERHEAD,
    UDP_HEADER_LEN,
    build_ipv4,
    parse_ipv4,
    trim_ipv4,
)

WRITES = [Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY,
          Opcode.WRITE_ONLY_IMM]
CS7 = 7 << 5  # TOS of DSCP class selector 7 (DLCP_ACK_PRIORITY): what the trimming switch writes


def droppable(op: Opcode, payload: bytes = bytes(range(250))) -> Transport:
    bth = Bth(op, 0x030102, 4242, ack_req=True, pad_count=(-len(payload)) % 4, resv7=marking(True, 6, 1))
    return Transport(bth, payload, reth=Reth(0x2000, 7, 3000) if op in HAS_RETH else None,
                     imm=0xC0FFEE if op in HAS_IMM else None)


@pytest.mark.parametrize("op", WRITES, ids=lambda o: o.name)
def test_a_trimmed_packet_is_the_headers_with_a_fresh_icrc_and_the_trimmed_bit(op):
    full = build_ipv4(droppable(op), "10.0.1.1", "10.0.2.1", ttl=60, ident=77)
    trimmed = trim_ipv4(full, tos=CS7)
    headers = IPV4_HEADER_LEN + UDP_HEADER_LEN + 12 + (16 if op in HAS_RETH else 0) + (4 if op in HAS_IMM else 0)
    assert len(trimmed) == headers + ICRC_LEN
    assert len(trimmed) + ETH_HEADER_LEN == ROCE_OVERHEAD + (16 if op in HAS_RETH else 0) + (4 if op in HAS_IMM else 0)
    d = parse_ipv4(trimmed)
    assert d.icrc_ok and d.transport.trimmed and d.transport.payload == b"" and d.tos == CS7
    assert d.transport.bth.resv7 == marking(True, 6, 1) | TRIMMED  # droppable, classes kept
    assert d.transport.bth.pad_count == 0 and d.transport.bth.psn == 4242
    assert (d.transport.reth, d.transport.imm) == (droppable(op).reth, droppable(op).imm)
    # scapy, independently: lengths, fields, and the ICRC it computes itself
    pkt = IP(trimmed)
    assert pkt.len == len(trimmed) and pkt[UDP].len == len(trimmed) - IPV4_HEADER_LEN
    assert (pkt[BTH].resv7 & TRIMMED, pkt[BTH].resv7 & DROPPABLE, pkt[BTH].padcount) == (TRIMMED, DROPPABLE, 0)
    if op in HAS_RETH:
        assert pkt[RETH].dlen == 3000
    if op in HAS_IMM:
        assert pkt[ImmDt].imm == 0xC0FFEE
    rebuilt = IP(trimmed)
    rebuilt[BTH].icrc = None
    assert raw(rebuilt)[-4:] == trimmed[-4:]


def test_a_trimmed_packet_that_still_carries_payload_is_malformed():
    t = droppable(Opcode.WRITE_MIDDLE)
    lying = Transport(Bth(t.bth.opcode, t.bth.dest_qp, t.bth.psn, resv7=t.bth.resv7 | TRIMMED), bytes(8))
    with pytest.raises(HeaderError) as err:
        parse_ipv4(build_ipv4(lying, "10.0.1.1", "10.0.2.1"))
    assert err.value.reason == "malformed"
    padded = Transport(Bth(Opcode.WRITE_MIDDLE, 1, 1, pad_count=2, resv7=TRIMMED))
    with pytest.raises(HeaderError, match="no payload"):
        parse_ipv4(build_ipv4(padded, "10.0.1.1", "10.0.2.1"))


def test_a_corrupted_trimmed_packet_fails_its_icrc_like_any_packet():
    trimmed = bytearray(trim_ipv4(build_ipv4(droppable(Opcode.WRITE_FIRST), "10.0.1.1", "10.0.2.1")))
    trimmed[-6] ^= 1  # a bit of the RETH's length
    assert not parse_ipv4(bytes(trimmed)).icrc_ok
