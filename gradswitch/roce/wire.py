"""Whole RoCE v2 packets on the wire: IPv4 / UDP 4791 / BTH ... / payload / ICRC.

The ICRC is a CRC-32 over a pseudo packet: 8 bytes of 0xFF (standing for the LRH), the IPv4
header with TOS, TTL and checksum set to all ones, the UDP header with its checksum set to
all ones, the BTH with FECN, BECN and the 6 reserved bits set to ones, the extension
headers and the payload. It goes on the wire least significant byte first. The switch
program recomputes it the same way (p4src, NetReduce) and scapy's BTH is the cross-check.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from dataclasses import dataclass, replace

from gradswitch.protocol.dlcp import TRIMMED
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import udp_source_port
from gradswitch.roce.headers import BTH_LEN, ICRC_LEN, HeaderError, Transport

ROCE_V2_UDP_PORT = CONFIG.ROCE_V2_UDP_PORT
IPV4_HEADER_LEN = 20
UDP_HEADER_LEN = 8
ETH_HEADER_LEN = 14
# What a RoCE v2 packet adds to its payload on an Ethernet link (as HTB and the switches count it):
# Ethernet, IPv4, UDP, BTH, ICRC; a first packet of a WRITE adds a RETH (RETH_LEN) on top.
ROCE_OVERHEAD = ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN + ICRC_LEN
IP_PROTO_UDP = CONFIG.IP_PROTO_UDP
IP_FLAG_DF = 0x4000


def ipv4_checksum(header: bytes) -> int:
    total = 0
    for (word,) in struct.iter_unpack("!H", header):
        total += word
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def compute_icrc(ip_header: bytes, udp_header: bytes, transport: bytes) -> int:
    """The ICRC (as an integer) of a RoCE v2 packet given its IPv4 and UDP headers and transport bytes."""
    ip = bytearray(ip_header[:IPV4_HEADER_LEN])
    ip[1] = 0xFF  # TOS (DSCP + ECN)
    ip[8] = 0xFF  # TTL
    ip[10:12] = b"\xff\xff"  # header checksum
    udp = bytearray(udp_header[:UDP_HEADER_LEN])
    udp[6:8] = b"\xff\xff"  # UDP checksum
    bth = bytearray(transport)
    bth[4] = 0xFF  # FECN, BECN, reserved 6 bits (the QPN bytes follow, unmasked)
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth)) & 0xFFFFFFFF


def icrc_wire(icrc: int) -> bytes:
    """The ICRC trailer as it appears on the wire (least significant byte first)."""
    return struct.pack("<I", icrc)


def icrc_connection_delta(src: str, dst: str, src_port: int, dest_qp: int, transport_len: int) -> int:
    """How a RoCE v2 packet's ICRC changes when its source and destination addresses, UDP source port
    and destination QP go from zero to these, everything else equal (transport_len: bytes of BTH,
    extension headers and payload). A CRC is affine in its input's bits, so for two inputs of equal
    length crc(a) ^ crc(b) = crc(a ^ b) ^ crc(0): this depends on the four fields and the length
    only, and the switch (NetReduceEgress) makes each copy's ICRC from one canonical ICRC with it.
    Returned as the trailer's bytes on the wire read big-endian (the switch's hdr.icrc.value)."""
    total = IPV4_HEADER_LEN + UDP_HEADER_LEN + transport_len + ICRC_LEN

    def icrc(s: str, d: str, sport: int, qp: int) -> int:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 0, IP_PROTO_UDP, 0,
                         ipaddress.IPv4Address(s).packed, ipaddress.IPv4Address(d).packed)
        udp = struct.pack("!HHHH", sport, ROCE_V2_UDP_PORT, total - IPV4_HEADER_LEN, 0)
        transport = bytearray(transport_len)
        transport[5:8] = qp.to_bytes(3, "big")  # BTH destination QP
        return compute_icrc(ip, udp, bytes(transport))

    delta = icrc(src, dst, src_port, dest_qp) ^ icrc("0.0.0.0", "0.0.0.0", 0, 0)
    return int.from_bytes(icrc_wire(delta), "big")


@dataclass(frozen=True)
class RoceDatagram:
    """A parsed IPv4 RoCE v2 datagram."""

    src: str
    dst: str
    src_port: int
    dst_port: int
    tos: int
    ttl: int
    ident: int
    transport: Transport
    icrc: int  # as received
    icrc_ok: bool


def build_ipv4(
    transport: Transport,
    src: str,
    dst: str,
    src_port: int | None = None,
    tos: int = 0,
    ttl: int = 64,
    ident: int = 0,
    icrc: int | None = None,
) -> bytes:
    """A whole IPv4 datagram carrying a RoCE v2 packet, with ICRC computed (or forced to `icrc`).

    src_port: the sending QP's `udp_source_port` (the engine passes it); without it, one derived
    from the destination QP, for packets built by hand.
    """
    body = transport.pack()
    udp_len = UDP_HEADER_LEN + len(body) + ICRC_LEN
    total = IPV4_HEADER_LEN + udp_len
    sport = src_port if src_port is not None else udp_source_port(transport.bth.dest_qp)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, tos, total, ident, IP_FLAG_DF, ttl, IP_PROTO_UDP, 0,
                               ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed))
    ip[10:12] = struct.pack("!H", ipv4_checksum(bytes(ip)))
    udp = struct.pack("!HHHH", sport, ROCE_V2_UDP_PORT, udp_len, 0)
    crc = compute_icrc(bytes(ip), udp, body) if icrc is None else icrc
    return bytes(ip) + udp + body + icrc_wire(crc)


def mac_bytes(mac: str) -> bytes:
    return bytes(int(b, 16) for b in mac.split(":"))


def build_frame(transport: Transport, src: str, dst: str, src_mac: str, dst_mac: str, **kw: int) -> bytes:
    """An Ethernet frame carrying build_ipv4(...)."""
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + b"\x08\x00" + build_ipv4(transport, src, dst, **kw)


def parse_ipv4(data: bytes) -> RoceDatagram:
    """Parse an IPv4 datagram as RoCE v2; HeaderError.reason names the problem.

    Reasons: "truncated", "not-roce", "unknown-opcode", "malformed". A wrong ICRC is not an
    error here: the datagram comes back with icrc_ok False for the receiver to count and drop.
    A trimmed packet (BTH.resv7 & TRIMMED: a DLCP switch dropped its payload, see `trim_ipv4`) is
    headers only: one that still carries payload or padding is "malformed".
    """
    if len(data) < IPV4_HEADER_LEN:
        raise HeaderError("truncated", f"{len(data)} bytes is shorter than an IPv4 header")
    ver_ihl, tos, total, ident, _, ttl, proto = struct.unpack_from("!BBHHHBB", data)
    ihl = (ver_ihl & 0xF) * 4
    if ver_ihl >> 4 != 4 or ihl < IPV4_HEADER_LEN:
        raise HeaderError("malformed", "not an IPv4 header")
    if proto != IP_PROTO_UDP:
        raise HeaderError("not-roce", f"IP protocol {proto}")
    if total > len(data) or total < ihl + UDP_HEADER_LEN:
        raise HeaderError("truncated", f"IPv4 total length {total}, {len(data)} bytes present")
    data = data[:total]
    udp = data[ihl : ihl + UDP_HEADER_LEN]
    sport, dport, udp_len, _ = struct.unpack("!HHHH", udp)
    if dport != ROCE_V2_UDP_PORT:
        raise HeaderError("not-roce", f"UDP port {dport}")
    if udp_len != total - ihl or udp_len < UDP_HEADER_LEN + BTH_LEN + ICRC_LEN:
        raise HeaderError("truncated", f"UDP length {udp_len} does not hold BTH and ICRC")
    body = data[ihl + UDP_HEADER_LEN : total - ICRC_LEN]
    (received,) = struct.unpack("<I", data[total - ICRC_LEN : total])
    transport = Transport.unpack(body)
    if transport.trimmed and (transport.payload or transport.bth.pad_count):
        raise HeaderError("malformed", f"a trimmed packet carries no payload ({len(transport.payload)} bytes, "
                                       f"pad {transport.bth.pad_count})")
    expected = compute_icrc(data[:ihl], udp, body) if ihl == IPV4_HEADER_LEN else -1
    src = str(ipaddress.IPv4Address(data[12:16]))
    dst = str(ipaddress.IPv4Address(data[16:20]))
    return RoceDatagram(src, dst, sport, dport, tos, ttl, ident, transport, received, received == expected)


def parse_frame(frame: bytes) -> RoceDatagram:
    if len(frame) < ETH_HEADER_LEN or frame[12:14] != b"\x08\x00":
        raise HeaderError("not-roce", "not an IPv4 Ethernet frame")
    return parse_ipv4(frame[ETH_HEADER_LEN:])


def trim_ipv4(datagram: bytes, tos: int | None = None) -> bytes:
    """The drop notification a DLCP switch makes of a droppable packet it would drop (docs/dlcp.md,
    "Trimmed packets"): the same IPv4/UDP/BTH [+RETH] [+ImmDt] headers without the payload, BTH.pad_count
    0 and the TRIMMED bit set in BTH.resv7, IPv4 and UDP lengths and the ICRC recomputed; TOS as given
    (the switch writes its class there) or kept. The receivers' reference: tests trim with it, and a
    switch's trimmed copy of a datagram our hosts sent (DF set) equals it but for TTL and TOS."""
    d = parse_ipv4(datagram)
    t = d.transport
    bth = replace(t.bth, pad_count=0, resv7=t.bth.resv7 | TRIMMED)
    return build_ipv4(Transport(bth, b"", reth=t.reth, aeth=t.aeth, imm=t.imm), d.src, d.dst, src_port=d.src_port,
                      tos=d.tos if tos is None else tos, ttl=d.ttl, ident=d.ident)
