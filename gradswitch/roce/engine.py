"""The RoCE v2 engine of one host: sockets, queue pairs, memory regions, timers.

Sending uses a raw IPv4 socket (IP_HDRINCL): the ICRC covers the IP header (identification,
flags, addresses, lengths), so the engine must write that header itself. Receiving uses an
AF_PACKET socket (cooked, IPv4) with a BPF filter for UDP port 4791, which hands over the
whole IP datagram the ICRC needs. A UDP socket bound to port 4791 keeps the kernel from
answering our packets with ICMP port-unreachable.

Every received datagram is checked like a RoCE NIC would: a truncated packet, an unknown
opcode, a bad ICRC, a QP we do not have, or a source that is not the QP's peer is dropped
and counted in `Engine.drops`; the connection is not affected.
"""

from __future__ import annotations

import ctypes
import random
import select
import socket
import struct
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

from gradswitch.protocol.qpn import udp_source_port
from gradswitch.roce.headers import HeaderError, Opcode, Transport
from gradswitch.roce.order_tolerant import make_responder
from gradswitch.roce.qp import (
    MemoryRegion,
    QpConfig,
    RecvCompletion,
    Requester,
    Responder,
    SendCompletion,
    TransportError,
)
from gradswitch.roce.resolve import resolve_peers
from gradswitch.roce.wire import ROCE_V2_UDP_PORT, build_ipv4, parse_ipv4

ETH_P_IP = 0x0800
SO_ATTACH_FILTER = 26
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
PACKET_OUTGOING = 4

def bpf_program(job: int | None = None) -> list[tuple[int, int, int, int]]:
    """Classic BPF on a cooked IPv4 socket: accept UDP datagrams to port 4791 (and, given a job,
    only those whose destination QP's top byte, the job id, matches); drop the rest."""
    # (loads, value): the loads leave a byte/halfword in A, then A == value or drop
    tests: list[tuple[list[tuple[int, int, int, int]], int]] = [
        ([(0x30, 0, 0, 9)], 17),  # ldb [9]: IP protocol is UDP
        ([(0xB1, 0, 0, 0), (0x48, 0, 0, 2)], ROCE_V2_UDP_PORT),  # ldxb 4*([0]&0xf); ldh [x+2]: UDP dport
    ]
    if job is not None:
        tests.append(([(0x50, 0, 0, 13)], job & 0xFF))  # ldb [x+13]: BTH destination QP, bits 23..16
    program: list[tuple[int, int, int, int]] = []
    for i, (loads, value) in enumerate(tests):
        to_drop = sum(len(later) + 1 for later, _ in tests[i + 1:])  # instructions between this jeq and drop
        last = i == len(tests) - 1
        program += [*loads, (0x15, 1 if last else 0, to_drop, value)]  # jeq: next test (or accept) : drop
    return [*program, (0x06, 0, 0, 0), (0x06, 0, 0, 0xFFFF)]  # ret #0 (drop); ret #65535 (accept)


class JobAborted(RuntimeError):
    """Another node of the job failed: waiting for it any longer is pointless."""


class Link(Protocol):
    """How datagrams leave and arrive: raw sockets on a host, or an in-memory pipe in tests."""

    def send(self, datagram: bytes, dst_ip: str) -> None: ...

    def recv(self, timeout: float) -> bytes | None: ...

    def resolve(self, peers: Collection[str], timeout: float) -> None:
        """Return once the link-layer address of every peer is known (gradswitch/roce/resolve.py)."""
        ...

    def close(self) -> None: ...


class RawSocketLink:
    """Raw IPv4 out, AF_PACKET in, on one interface of a (Mininet) host."""

    def __init__(self, ifname: str, local_ip: str, rcvbuf: int = 8 << 20, job: int | None = None) -> None:
        self.ifname = ifname
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
        # Large buffers: a window arriving while this (single-threaded) process computes must not be
        # dropped by the socket. The FORCE variants pass net.core.rmem_max (root, as in Mininet hosts).
        for sock, force, plain in ((self.tx, SO_SNDBUFFORCE, socket.SO_SNDBUF),
                                   (self.rx, SO_RCVBUFFORCE, socket.SO_RCVBUF)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, force, rcvbuf)
            except PermissionError:
                sock.setsockopt(socket.SOL_SOCKET, plain, rcvbuf)
        bpf = bpf_program(job)
        program = b"".join(struct.pack("HBBI", *ins) for ins in bpf)
        self._filter = ctypes.create_string_buffer(program)
        fprog = struct.pack("HL", len(bpf), ctypes.addressof(self._filter))
        self.rx.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        self.rx.bind((ifname, ETH_P_IP))
        self.rx.setblocking(False)
        self.guard = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.guard.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.guard.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.guard.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # several jobs on one host
        self.guard.bind((local_ip, ROCE_V2_UDP_PORT))

    def send(self, datagram: bytes, dst_ip: str) -> None:
        self.tx.sendto(datagram, (dst_ip, 0))

    def recv(self, timeout: float) -> bytes | None:
        while True:
            try:
                data, addr = self.rx.recvfrom(65535)
            except BlockingIOError:
                if timeout <= 0:
                    return None
                ready, _, _ = select.select([self.rx], [], [], timeout)
                if not ready:
                    return None
                timeout = 0
                continue
            if addr[2] != PACKET_OUTGOING:
                return data

    def resolve(self, peers: Collection[str], timeout: float) -> None:
        resolve_peers(self.ifname, peers, timeout)

    def close(self) -> None:
        for s in (self.tx, self.rx, self.guard):
            s.close()


@dataclass
class QueuePair:
    """One RC connection: its requester and responder halves and the peer's address."""

    cfg: QpConfig
    remote_ip: str
    requester: Requester
    responder: Responder

    def check(self) -> None:
        if self.requester.error:
            raise TransportError(f"QP {self.cfg.qpn:#x} to {self.cfg.peer or self.remote_ip}: {self.requester.error}")


@dataclass
class EngineStats:
    drops: dict[str, int] = field(default_factory=dict)
    tx_packets: int = 0
    tx_bytes: int = 0
    rx_packets: int = 0
    rx_bytes: int = 0

    def drop(self, reason: str) -> None:
        self.drops[reason] = self.drops.get(reason, 0) + 1


class Engine:
    """All RoCE state of one host, driven by `poll`/`run_until` from one thread."""

    def __init__(self, link: Link, local_ip: str, clock: Callable[[], float] = time.monotonic,
                 tos: Callable[[QueuePair, Transport], int] | None = None) -> None:
        self.link = link
        self.local_ip = local_ip
        self.clock = clock
        self.tos = tos
        self.qps: dict[int, QueuePair] = {}
        self.regions: dict[int, MemoryRegion] = {}
        self.stats = EngineStats()
        self._ident = random.randrange(1, 0xFFFF)

    # ---- set-up ----

    def register(self, rkey: int, size: int) -> MemoryRegion:
        if rkey in self.regions:
            raise ValueError(f"rkey {rkey:#x} is already registered")
        region = MemoryRegion.allocate(rkey, size)
        self.regions[rkey] = region
        return region

    def resolve_peers(self, timeout: float) -> None:
        """Learn every QP's peer's link-layer address now, before any packet (as a RoCE NIC does when a
        QP is set up): a window sent to a peer the kernel has yet to resolve leaves out of order
        (gradswitch/roce/resolve.py). ResolveError names the peers that did not answer within `timeout`."""
        self.link.resolve(sorted({qp.remote_ip for qp in self.qps.values()} - {self.local_ip}), timeout)

    def connect(self, cfg: QpConfig, remote_ip: str) -> QueuePair:
        if cfg.qpn in self.qps:
            raise ValueError(f"QP {cfg.qpn:#x} exists")
        qp = QueuePair(cfg, remote_ip, Requester(cfg), make_responder(cfg, self.regions))
        self.qps[cfg.qpn] = qp
        return qp

    # ---- wire ----

    def _send(self, qp: QueuePair, t: Transport) -> None:
        self._ident = self._ident % 0xFFFF + 1  # never 0: the kernel would fill it in after our ICRC
        tos = self.tos(qp, t) if self.tos is not None and t.opcode != Opcode.ACKNOWLEDGE else 0
        datagram = build_ipv4(t, self.local_ip, qp.remote_ip, tos=tos, ident=self._ident,
                              src_port=udp_source_port(qp.cfg.qpn))  # the sending QP's port (TensorLights)
        self.link.send(datagram, qp.remote_ip)
        self.stats.tx_packets += 1
        self.stats.tx_bytes += len(datagram)

    def _receive(self, datagram: bytes) -> None:
        self.stats.rx_packets += 1
        self.stats.rx_bytes += len(datagram)
        try:
            d = parse_ipv4(datagram)
        except HeaderError as e:
            self.stats.drop(e.reason)
            return
        if not d.icrc_ok:
            self.stats.drop("bad-icrc")
            return
        if d.dst != self.local_ip:
            self.stats.drop("not-for-us")
            return
        qp = self.qps.get(d.transport.bth.dest_qp)
        if qp is None:
            self.stats.drop("unknown-qp")
            return
        if d.src != qp.remote_ip:
            self.stats.drop("wrong-source")
            return
        now = self.clock()
        if d.transport.opcode == Opcode.ACKNOWLEDGE:
            qp.requester.on_ack(d.transport, now)
        else:
            for reply in qp.responder.on_packet(d.transport, now):
                self._send(qp, reply)

    def flush(self) -> None:
        """Send what every QP may send now and fire due timers."""
        now = self.clock()
        for qp in self.qps.values():
            qp.requester.on_timer(now)
            for t in qp.requester.transmit(now):
                self._send(qp, t)
            for reply in qp.responder.on_timer(now):
                self._send(qp, reply)

    def next_deadline(self) -> float | None:
        deadlines = [d for qp in self.qps.values() for d in (qp.requester.deadline(), qp.responder.deadline())
                     if d is not None]
        return min(deadlines) if deadlines else None

    def poll(self, max_wait: float = 0.01) -> None:
        """One turn: transmit, wait for packets until the next timer (at most max_wait), take them all."""
        self.flush()
        deadline = self.next_deadline()
        wait = max_wait if deadline is None else max(0.0, min(max_wait, deadline - self.clock()))
        datagram = self.link.recv(wait)
        while datagram is not None:
            self._receive(datagram)
            datagram = self.link.recv(0)
        self.flush()

    def run_until(self, done: Callable[[], bool], timeout: float, what: str,
                  abort: Callable[[], str | None] | None = None) -> None:
        """Poll until done() is true; a failed QP raises TransportError naming its peer,
        the deadline raises TimeoutError naming what was awaited, and `abort` (checked a few
        times a second) returning a reason raises JobAborted with it."""
        deadline = self.clock() + timeout
        next_check = self.clock()
        while not done():
            for qp in self.qps.values():
                qp.check()
            now = self.clock()
            if now > deadline:
                raise TimeoutError(f"{self.local_ip}: timed out after {timeout:.1f} s waiting for {what}")
            if abort is not None and now >= next_check:
                next_check = now + 0.2
                reason = abort()
                if reason:
                    raise JobAborted(f"{self.local_ip}: stopped waiting for {what}: {reason}")
            self.poll()
        for qp in self.qps.values():
            qp.check()

    # ---- completions ----

    def send_completions(self, qp: QueuePair) -> list[SendCompletion]:
        out = list(qp.requester.completions)
        qp.requester.completions.clear()
        return out

    def recv_completions(self, qp: QueuePair) -> list[RecvCompletion]:
        out = list(qp.responder.completions)
        qp.responder.completions.clear()
        return out

    def close(self) -> None:
        self.link.close()
