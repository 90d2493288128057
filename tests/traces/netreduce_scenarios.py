"""NetReduce trace scenarios: workers' RoCE packets into one switch, the results it must send.

The expected results are built from the design (docs/netreduce.md) with our RoCE packet code,
not from the switch program: the sum of the members' payloads, put on each receiver's
connection (its QP, the sender's address and UDP port, the completing packet's PSN, opcode,
RETH and immediate data), with a fresh ICRC; TTL 64; source MAC of the switch port.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from controller.routing import switch_port_mac
from mininet_topos.topologies import build_topology
from mininet_topos.topology import Topology
from protocol.netreduce import ELEMENTS, JobLayout
from protocol.qpn import qpn, udp_source_port
from roce.headers import Opcode, Transport
from roce.wire import build_frame
from workers.netreduce import message_packet

TOPOLOGY = {"name": "rack", "hosts": 4}


def values(job: int, rank: int, k: int, i: int) -> np.ndarray:
    """A worker's 64 int32 gradient values for packet i of message k (negative ones included)."""
    base = np.arange(ELEMENTS, dtype=np.int64) - 20
    return ((base * (rank + 2) + k * 1000 + i * 100 + job * 7) * (1 if rank % 2 else -1)).astype(np.int32)


@dataclass
class Sent:
    rank: int
    k: int
    i: int
    ident: int
    frame: bytes
    transport: Transport


@dataclass
class NrJob:
    topo: Topology
    job: int
    hosts: list[str]
    credits: int = 2
    sent: list[Sent] = field(default_factory=list)

    @property
    def layout(self) -> JobLayout:
        return JobLayout(self.job, len(self.hosts), self.credits)

    def port(self, rank: int) -> int:
        return self.topo.attachment(self.hosts[rank])[1]

    def transport(self, rank: int, k: int, i: int, payload: bytes | None = None, opcode: Opcode | None = None
                  ) -> Transport:
        data = payload if payload is not None else values(self.job, rank, k, i).astype(">i4").tobytes()
        return message_packet(self.layout, rank, k, i, data, opcode)

    def packet(self, rank: int, k: int, i: int, ident: int, **kw: object) -> Sent:
        """Worker `rank`'s packet i of message k, as its host sends it (to its peer's address)."""
        t = self.transport(rank, k, i, **kw)  # type: ignore[arg-type]
        src, dst = self.topo.host(self.hosts[rank]), self.topo.host(self.hosts[self.layout.peer(rank)])
        frame = build_frame(t, src.ip, dst.ip, src.mac, dst.mac, ident=ident,
                            src_port=udp_source_port(qpn(rank, self.layout.peer(rank), self.job)))
        s = Sent(rank, k, i, ident, frame, t)
        self.sent.append(s)
        return s

    def result_for(self, receiver: int, completing: Sent, total: np.ndarray) -> bytes:
        """The result packet on `receiver`'s incoming connection, made from the completing packet."""
        lay = self.layout
        sender = lay.sender_to(receiver)
        t = completing.transport
        bth = replace(t.bth, dest_qp=qpn(receiver, sender, self.job), fecn=False, becn=False)
        out = Transport(bth, total.astype(">i4").tobytes(), reth=t.reth, imm=t.imm)
        src, dst = self.topo.host(self.hosts[sender]), self.topo.host(self.hosts[receiver])
        switch = self.topo.switch(self.topo.attachment(dst.name)[0])
        return build_frame(out, src.ip, dst.ip, switch_port_mac(switch.device_id, self.port(receiver)), dst.mac,
                           ident=completing.ident, ttl=64, src_port=udp_source_port(qpn(sender, receiver, self.job)))

    def total(self, k: int, i: int) -> np.ndarray:
        acc = np.zeros(ELEMENTS, dtype=np.int64)
        for r in range(len(self.hosts)):
            acc += values(self.job, r, k, i)
        return ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)


def topology() -> Topology:
    args = dict(TOPOLOGY)
    return build_topology(str(args.pop("name")), **args)
