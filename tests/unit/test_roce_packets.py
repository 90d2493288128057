"""Our RoCE v2 packets: golden bytes, scapy's decoding and ICRC, and what is refused."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.compat import raw
from scapy.layers.inet import IP, UDP

from gradswitch.roce.headers import (
    HAS_AETH,
    HAS_IMM,
    HAS_RETH,
    AckType,
    Aeth,
    Bth,
    HeaderError,
    NakCode,
    Opcode,
    Reth,
    Transport,
)
from gradswitch.roce.scapy_layers import AETH, BTH, RETH, ImmDt
from gradswitch.roce.wire import ROCE_V2_UDP_PORT, build_ipv4, compute_icrc, parse_ipv4

# RDMA WRITE First, QP 0x000102, PSN 0xfffffe, RETH va 0x1122334455667788 rkey 0xaabbccdd len 64,
# 8 bytes of payload, IP id 0x1234. Fields spelled out: IPv4 | UDP | BTH | RETH | payload | ICRC (LSB first).
GOLDEN_WRITE_FIRST = bytes.fromhex(
    "4500004412344000401112730a0001010a000102"  # IPv4, DF, TTL 64, UDP
    "c00112b700300000"  # UDP sport 0xc001 (0xc000 | QP >> 8), dport 4791, len 48, csum 0
    "0640ffff" "00000102" "00fffffe"  # BTH: WRITE_FIRST, MigReq, pkey ffff | dQPN | AckReq 0, PSN
    "1122334455667788" "aabbccdd" "00000040"  # RETH
    "0001020304050607"  # payload
    "2c77809b"  # ICRC
)
# ACK (AETH syndrome 0x1f: ACK, credits invalid) for MSN 5, QP 0x207, PSN 0x10.
GOLDEN_ACK = bytes.fromhex(
    "4500003000004000401124bb0a0001020a000101" "c00212b7001c0000" "1140ffff" "00000207" "00000010" "1f000005" "fe8409e0"
)


def write_first() -> Transport:
    return Transport(Bth(Opcode.WRITE_FIRST, 0x000102, 0xFFFFFE), bytes(range(8)),
                     reth=Reth(0x1122334455667788, 0xAABBCCDD, 64))


def test_golden_write_first():
    assert build_ipv4(write_first(), "10.0.1.1", "10.0.1.2", ident=0x1234) == GOLDEN_WRITE_FIRST


def test_golden_ack():
    ack = Transport(Bth(Opcode.ACKNOWLEDGE, 0x207, 0x10), aeth=Aeth.ack(5))
    assert build_ipv4(ack, "10.0.1.2", "10.0.1.1") == GOLDEN_ACK


def test_bth_fields_round_trip_through_bytes():
    bth = Bth(Opcode.SEND_ONLY_IMM, 0xABCDEF, 0x123456, ack_req=True, solicited=True, pad_count=3, pkey=0x8001,
              fecn=True, becn=True)
    packed = bth.pack()
    assert len(packed) == 12
    assert packed.hex() == "05f08001" "c0abcdef" "80123456"
    assert Bth.unpack(packed) == bth


def test_aeth_ack_and_nak():
    assert Aeth.ack(7).kind == AckType.ACK
    nak = Aeth.nak(9, NakCode.PSN_SEQUENCE_ERROR)
    assert (nak.kind, nak.value, nak.msn) == (AckType.NAK, 0, 9)
    assert nak.pack().hex() == "60000009"


def _sample(op: Opcode) -> Transport:
    return Transport(
        Bth(int(op), 0x42, 77, ack_req=op in {Opcode.WRITE_LAST, Opcode.WRITE_ONLY}),
        b"" if op == Opcode.ACKNOWLEDGE else struct.pack("!16i", *range(-8, 8)),
        reth=Reth(0x1000, 3, 64) if op in HAS_RETH else None,
        aeth=Aeth.ack(3) if op in HAS_AETH else None,
        imm=0xCAFE0001 if op in HAS_IMM else None,
    )


SENT_OPCODES = [
    Opcode.SEND_FIRST, Opcode.SEND_MIDDLE, Opcode.SEND_LAST, Opcode.SEND_LAST_IMM, Opcode.SEND_ONLY,
    Opcode.SEND_ONLY_IMM, Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM,
    Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM, Opcode.ACKNOWLEDGE,
]


@pytest.mark.parametrize("op", SENT_OPCODES, ids=lambda o: o.name)
def test_scapy_decodes_every_packet_type_and_agrees_on_icrc(op):
    t = _sample(op)
    wire = build_ipv4(t, "10.0.2.1", "10.0.1.3", tos=0x02, ttl=17, ident=99)
    pkt = IP(wire)
    assert pkt[UDP].dport == ROCE_V2_UDP_PORT
    bth = pkt[BTH]
    assert (bth.opcode, bth.dqpn, bth.psn) == (int(op), 0x42, 77)
    if op in HAS_RETH:
        assert (pkt[RETH].va, pkt[RETH].rkey, pkt[RETH].dlen) == (0x1000, 3, 64)
    else:
        assert RETH not in pkt
    if op in HAS_IMM:
        assert pkt[ImmDt].imm == 0xCAFE0001
    if op in HAS_AETH:
        assert pkt[AETH].syndrome == Aeth.ack(3).syndrome
    # scapy recomputes the ICRC from its own fields: it must equal ours.
    rebuilt = IP(wire)
    rebuilt[BTH].icrc = None
    assert raw(rebuilt)[-4:] == wire[-4:]
    assert parse_ipv4(wire).icrc_ok


def test_icrc_ignores_the_fields_routers_change():
    wire = build_ipv4(_sample(Opcode.WRITE_MIDDLE), "10.0.1.1", "10.0.1.2", tos=0, ttl=64)
    changed = build_ipv4(_sample(Opcode.WRITE_MIDDLE), "10.0.1.1", "10.0.1.2", tos=0xB8, ttl=3)
    assert wire[-4:] == changed[-4:]  # TOS, TTL, IP checksum masked
    moved = build_ipv4(_sample(Opcode.WRITE_MIDDLE), "10.0.1.1", "10.0.1.9")
    assert moved[-4:] != wire[-4:]  # addresses are covered


@given(payload=st.binary(max_size=64), psn=st.integers(0, 0xFFFFFF), qp=st.integers(0, 0xFFFFFF))
def test_parse_inverts_build(payload, psn, qp):
    t = Transport(Bth(Opcode.SEND_ONLY, qp, psn), payload)
    got = parse_ipv4(build_ipv4(t, "10.0.3.1", "10.0.4.1"))
    assert got.transport == t
    assert got.icrc_ok


def test_bad_icrc_is_reported_not_raised():
    wire = bytearray(build_ipv4(_sample(Opcode.WRITE_ONLY), "10.0.1.1", "10.0.1.2"))
    wire[-10] ^= 0x01  # a payload bit
    assert not parse_ipv4(bytes(wire)).icrc_ok


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda w: w[:40], "truncated"),
        (lambda w: w[:28] + b"\x42" + w[29:], "unknown-opcode"),
        (lambda w: w[:22] + b"\x12\xb8" + w[24:], "not-roce"),
        (lambda w: w[:9] + b"\x06" + w[10:], "not-roce"),
    ],
    ids=["truncated", "unknown-opcode", "other-udp-port", "tcp"],
)
def test_malformed_packets_name_their_problem(mutate, reason):
    wire = build_ipv4(_sample(Opcode.WRITE_FIRST), "10.0.1.1", "10.0.1.2")
    with pytest.raises(HeaderError) as err:
        parse_ipv4(mutate(wire))
    assert err.value.reason == reason


def test_transport_refuses_missing_extension_headers():
    with pytest.raises(HeaderError, match="needs a RETH"):
        Transport(Bth(Opcode.WRITE_FIRST, 1, 1), b"x")
    with pytest.raises(HeaderError, match="must not carry a AETH"):
        Transport(Bth(Opcode.SEND_ONLY, 1, 1), b"x", aeth=Aeth.ack(0))


def test_compute_icrc_masks_only_the_variant_bth_bits():
    wire = build_ipv4(_sample(Opcode.SEND_ONLY), "10.0.1.1", "10.0.1.2")
    ip, udp, body = wire[:20], wire[20:28], bytearray(wire[28:-4])
    body[4] |= 0xC0  # FECN/BECN set by a congested switch: ICRC unchanged
    assert compute_icrc(ip, udp, bytes(body)) == compute_icrc(ip, udp, wire[28:-4])
    body[7] ^= 1  # a QPN bit: ICRC changes
    assert compute_icrc(ip, udp, bytes(body)) != compute_icrc(ip, udp, wire[28:-4])


def test_bpf_programs_are_the_hand_checked_ones():
    from gradswitch.roce.engine import bpf_program

    assert bpf_program() == [
        (0x30, 0, 0, 9), (0x15, 0, 3, 17), (0xB1, 0, 0, 0), (0x48, 0, 0, 2), (0x15, 1, 0, 4791),
        (0x06, 0, 0, 0), (0x06, 0, 0, 0xFFFF)]
    assert bpf_program(0x107) == [
        (0x30, 0, 0, 9), (0x15, 0, 5, 17), (0xB1, 0, 0, 0), (0x48, 0, 0, 2), (0x15, 0, 2, 4791),
        (0x50, 0, 0, 13), (0x15, 1, 0, 0x07), (0x06, 0, 0, 0), (0x06, 0, 0, 0xFFFF)]


@pytest.mark.parametrize("opcode", [Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST_IMM])
def test_icrc_of_a_connection_is_the_canonical_icrc_plus_its_delta(opcode):
    """What NetReduceEgress relies on: for equal lengths, ICRC(packet) = ICRC(packet with zero addresses,
    UDP source port and QP) ^ icrc_connection_delta(those four fields, length), for any payload."""
    import os

    from gradswitch.roce.headers import Reth
    from gradswitch.roce.wire import build_ipv4, icrc_connection_delta

    payload = os.urandom(1024)
    reth = Reth(0x3000, 0x4E520001, 4096) if opcode == Opcode.WRITE_FIRST else None
    imm = 7 if opcode == Opcode.WRITE_LAST_IMM else None

    def trailer(src: str, dst: str, sport: int, qp: int) -> int:
        t = Transport(Bth(opcode, qp, 0x123456, ack_req=True), payload, reth=reth, imm=imm)
        return int.from_bytes(build_ipv4(t, src, dst, src_port=sport, ident=99, ttl=17)[-4:], "big")

    canonical = trailer("0.0.0.0", "0.0.0.0", 0, 0)
    n = len(Transport(Bth(opcode, 0, 0), payload, reth=reth, imm=imm).pack())
    for src, dst, sport, qp in (("10.0.1.1", "10.0.1.2", 0xC101, 0x10201), ("10.255.2.1", "10.255.0.1", 7, 0xF00100)):
        assert trailer(src, dst, sport, qp) == canonical ^ icrc_connection_delta(src, dst, sport, qp, n)
