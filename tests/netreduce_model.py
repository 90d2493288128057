"""A Python model of one flat NetReduce switch, for tests of the workers without BMv2.

It follows docs/netreduce.md (the same slot life cycle, credits check and result rewriting as
gradswitch/p4src/include/controls/netreduce.p4) on an in-memory network: datagrams sent to any address
pass through `NetReduceHub.deliver`, which aggregates the job's contributions and forwards
everything else. It is a model for testing the hosts' side; the switch itself is tested on
BMv2 (tests/bmv2, tests/mininet).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace

from gradswitch.protocol.dlcp import TRIMMED
from gradswitch.protocol.netreduce import ELEMENTS, MESSAGE_BYTES, OWNER_VA_SHIFT, PACKETS, JobLayout
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import qpn, udp_source_port
from gradswitch.roce.headers import HeaderError, Opcode, Transport
from gradswitch.roce.wire import build_ipv4, parse_ipv4, trim_ipv4
from tests.memlink import MemoryHub


@dataclass
class Cell:
    values: list[int] = field(default_factory=lambda: [0] * ELEMENTS)
    bitmap: int = 0
    count: int = 0
    message: int = -1


class NetReduceHub(MemoryHub):
    """An in-memory network whose one switch aggregates a NetReduce job."""

    def __init__(self, layout: JobLayout, ips: list[str], loss: float = 0.0, seed: int = 0) -> None:
        super().__init__(loss, seed)
        self.layout = layout
        self.ips = ips
        self.members = {(ip, qpn(layout.peer(r), r, layout.job)): r for r, ip in enumerate(ips)}
        self.cells = [Cell() for _ in range(layout.cells)]
        self.context: dict[tuple[int, int], tuple[int, int, int]] = {}  # (rank, msg mod MAX) -> (msg, window, owner)
        self.events: dict[str, int] = {}

    def _event(self, name: str) -> None:
        self.events[name] = self.events.get(name, 0) + 1

    def deliver(self, datagram: bytes, dst_ip: str) -> None:
        try:
            d = parse_ipv4(datagram)
        except HeaderError:
            super().deliver(datagram, dst_ip)
            return
        rank = self.members.get((d.src, d.transport.bth.dest_qp))
        if rank is None or d.transport.opcode == Opcode.ACKNOWLEDGE:
            super().deliver(datagram, dst_ip)
            return
        with self._lock:
            if self.loss > 0 and self._rnd.random() < self.loss:  # lost on the way to the switch
                self.dropped += 1
                return
            if not d.icrc_ok:  # corrupted on the way: touches nothing
                self._event("bad-icrc")
                return
            self._contribution(rank, d.transport)

    def _contribution(self, rank: int, t: Transport) -> None:
        lay = self.layout
        placeholder = lay.gather and t.trimmed and not t.payload  # an all-gather's: zeros
        if (len(t.payload) != ELEMENTS * 4 and not placeholder) or t.opcode not in (
                Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST_IMM):
            self._event("malformed")
            return
        msg = lay.message_of(t.bth.psn)
        slot = (rank, msg % CONFIG.AGG_MAX_CREDITS)
        if t.opcode == Opcode.WRITE_FIRST:
            assert t.reth is not None
            window = t.reth.virtual_addr // MESSAGE_BYTES % (1 << (OWNER_VA_SHIFT - CONFIG.AGG_MESSAGE_BYTES_LOG2))
            owner = t.reth.virtual_addr >> OWNER_VA_SHIFT  # 0: all-reduce; r + 1: reduce-scatter to rank r
            if t.bth.psn % PACKETS or window >= 2 * lay.credits or owner >= lay.owners:
                self._event("malformed")
                return
            self.context[slot] = (msg, window, owner)
        elif self.context.get(slot, (None, 0, 0))[0] != msg:
            self._event("no-context")
            return
        _, window, owner = self.context[slot]
        other = window - lay.credits if window >= lay.credits else window + lay.credits
        offset = t.bth.psn % PACKETS
        cell, twin = self.cells[window * PACKETS + offset], self.cells[other * PACKETS + offset]
        mask = 1 << rank
        if placeholder and (cell.bitmap & mask or (0 if cell.bitmap == 0 else cell.count) + 1 == lay.workers):
            self._event("placeholder-last")  # it could complete or be answered only whole: its resend will be
            return
        payload = [0] * ELEMENTS if placeholder else list(struct.unpack(f"!{ELEMENTS}i", t.payload))
        if cell.bitmap & mask:
            if cell.message == msg and cell.count == lay.workers:
                self._event("retransmitted-result")
                self._emit(t, cell.values, [rank], owner)
            else:
                self._event("duplicate")
            return
        if cell.bitmap == 0:
            cell.values, cell.count, cell.message = payload, 1, msg
        elif cell.message == msg:
            cell.values = [(a + b + 2**31) % 2**32 - 2**31 for a, b in zip(cell.values, payload, strict=True)]
            cell.count += 1
        else:
            self._event("no-credit")
            return
        cell.bitmap |= mask
        twin.bitmap &= ~mask
        self._event("contribution")
        if placeholder:
            self._event("placeholder")  # (counted once, as the contribution it stands for)
        if cell.count == lay.workers:
            self._event("completion")
            self._emit(t, cell.values, list(range(lay.workers)), owner)

    def _emit(self, t: Transport, values: list[int], senders: list[int], owner: int) -> None:
        """The completing packet, with the sums, rewritten into each sender's connection; trimmed to its
        headers for a receiver that does not own a reduce-scatter message, or that owns an all-gather one
        (owner: rank + 1, 0 all-reduce)."""
        lay = self.layout
        payload = struct.pack(f"!{ELEMENTS}i", *values)
        for j in senders:
            p = lay.peer(j)
            bth = replace(t.bth, dest_qp=qpn(p, j, lay.job), fecn=False, becn=False)
            out = Transport(replace(bth, resv7=bth.resv7 & ~TRIMMED), payload, reth=t.reth, imm=t.imm)
            datagram = build_ipv4(out, self.ips[j], self.ips[p], src_port=udp_source_port(qpn(j, p, lay.job)))
            if owner and (p == owner - 1) == lay.gather:
                self._event("trimmed" if len(senders) > 1 else "trimmed-answer")  # (an answer: one connection)
                datagram = trim_ipv4(datagram)
            MemoryHub.deliver(self, datagram, self.ips[p])
