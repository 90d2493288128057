"""Resolving the peers' link-layer addresses before a QP's first packet, as a RoCE NIC does.

A RoCE QP carries its peer's MAC address in its address vector, resolved when the connection
is set up (rdma_resolve_addr, before the QP is ready to send): no RoCE packet ever waits for
ARP. Our engine sends through the kernel's IPv4 stack, which resolves a neighbour on the first
packet to it and holds the packets sent meanwhile in the neighbour's queue. When the reply
arrives the kernel flushes that queue from the core that received it, while the sending
process goes on sending on the other core: later packets slip in ahead of queued ones, and a
window leaves out of order. A switch then sees a NetReduce message's middle packet before its
first (no context: dropped), a go-back-N receiver sees a hole, and every sender of the job goes
back a window (go-back-N bursts: 400-1,000 packets resent in the first iteration of about one fresh
network in four; never once the hosts knew each other).

So a node resolves every peer of its QPs before it says it is ready: an ICMP echo to each,
resent until each has answered. A reply means our request went out, so the kernel had the
peer's address. Echo requests are answered by the peer's kernel, need no process there, and
are not RoCE (no RoCE counter or receiver sees them).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import time
from collections.abc import Collection

ICMP_ECHO_REPLY = 0
ICMP_ECHO_REQUEST = 8
RETRY_S = 0.1  # an unanswered echo is sent again after this long (a lost request or reply)


class ResolveError(RuntimeError):
    """Some peers never answered: names them."""


def icmp_checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of an ICMP message."""
    if len(data) % 2:
        data += b"\0"
    total = sum(int(word) for (word,) in struct.iter_unpack("!H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def echo_request(ident: int, seq: int) -> bytes:
    """An ICMP echo request (the kernel adds the IPv4 header)."""
    payload = b"gradswitch"
    header = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, 0, ident, seq)
    return struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, icmp_checksum(header + payload), ident, seq) + payload


def echo_reply_from(datagram: bytes, ident: int) -> str | None:
    """The source address of an IPv4 datagram that is an echo reply to our requests (ident), else None."""
    if len(datagram) < 20:
        return None
    ihl = (datagram[0] & 0x0F) * 4
    if len(datagram) < ihl + 8 or datagram[9] != socket.IPPROTO_ICMP:
        return None
    kind, _, _, reply_ident, _ = struct.unpack("!BBHHH", datagram[ihl : ihl + 8])
    if kind != ICMP_ECHO_REPLY or reply_ident != ident:
        return None
    return socket.inet_ntoa(datagram[12:16])


def resolve_peers(ifname: str, peers: Collection[str], timeout: float) -> None:
    """Return once every peer answered an ICMP echo sent out of `ifname`; ResolveError naming the
    ones that did not within `timeout` seconds."""
    pending = set(peers)
    if not pending:
        return
    ident = (os.getpid() ^ id(pending)) & 0xFFFF
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
        deadline = time.monotonic() + timeout
        seq = 0
        while pending:
            now = time.monotonic()
            if now >= deadline:
                raise ResolveError(
                    f"{', '.join(sorted(pending))} did not answer on {ifname} within {timeout:.1f} s: their "
                    "link-layer addresses are unknown (is the network up, and does the switch answer ARP for them?)")
            seq = (seq + 1) & 0xFFFF
            for ip in sorted(pending):
                with contextlib.suppress(OSError):  # no route, or the neighbour failed: again until the deadline
                    sock.sendto(echo_request(ident, seq), (ip, 0))
            resend_at = min(deadline, time.monotonic() + RETRY_S)
            while pending and (wait := resend_at - time.monotonic()) > 0:
                if not select.select([sock], [], [], wait)[0]:
                    break
                source = echo_reply_from(sock.recv(65535), ident)
                pending.discard(source or "")
