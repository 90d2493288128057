"""NetReduce trace scenarios: workers' RoCE packets into one switch, the results it must send.

The expected results are built from the design (docs/netreduce.md) with our RoCE packet code,
not from the switch program: the sum of the members' payloads, put on each receiver's
connection (its QP, the sender's address and UDP port, the completing packet's PSN, opcode,
RETH and immediate data), with a fresh ICRC; TTL 64; source MAC of the switch port.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gradswitch.control.controls.netreduce import down_qp, switch_address, up_qp
from gradswitch.control.routing import switch_port_mac
from gradswitch.hosts.netreduce import message_packet
from gradswitch.protocol.netreduce import ELEMENTS, JobLayout
from gradswitch.protocol.qpn import qpn, udp_source_port
from gradswitch.roce.headers import RETH_LEN, Opcode, Transport
from gradswitch.roce.wire import ETH_HEADER_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN, build_frame
from gradswitch.topology.generators import build_topology
from gradswitch.topology.model import Topology

TOPOLOGY = {"name": "rack", "hosts": 4}
LEAFSPINE = {"name": "leafspine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2}
BTH_AT = ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN  # offset of the BTH in a frame


def values(job: int, rank: int, k: int, i: int) -> np.ndarray:
    """A worker's int32 gradient values for packet i of message k: negative ones, lanes near INT_MAX
    whose sums wrap around like int32, and INT_MIN lanes (next to lanes of every other kind, across
    the wide words' 64-lane boundaries)."""
    base = np.arange(ELEMENTS, dtype=np.int64) - 20
    v = (base * (rank + 2) + k * 1000 + i * 100 + job * 7) * (1 if rank % 2 else -1)
    v[3::7] = 2**31 - 1 - rank - i  # overflows when summed
    v[5::11] = -(2**31) + (rank % 2)  # INT_MIN (and INT_MIN + 1)
    v[63::64] = -(2**31)  # the last lane of every wide word
    return v.astype(np.int32)


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

    def total(self, k: int, i: int, ranks: list[int] | None = None) -> np.ndarray:
        """The int32 sum (wrapping like int32) of the workers' values, or of some workers' (a leaf's partial)."""
        acc = np.zeros(ELEMENTS, dtype=np.int64)
        for r in ranks if ranks is not None else range(len(self.hosts)):
            acc += values(self.job, r, k, i)
        return ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)

    def between_switches(self, template: Transport, total: np.ndarray, src_switch: str, dst_switch: str,
                         up: bool, ident: int) -> bytes:
        """A partial (leaf -> aggregation spine, up) or a result (spine -> leaf) made from a worker's
        packet: the switches' job connection, the packet's PSN, opcode, RETH and ImmDt, the sum."""
        leaf = dst_switch if not up else src_switch
        leaf_dev = self.topo.switch(leaf).device_id
        qp = up_qp(self.job, leaf_dev) if up else down_qp(self.job, leaf_dev)
        bth = replace(template.bth, dest_qp=qp, fecn=False, becn=False)
        out = Transport(bth, total.astype(">i4").tobytes(), reth=template.reth, imm=template.imm)
        src_dev, dst_dev = self.topo.switch(src_switch).device_id, self.topo.switch(dst_switch).device_id
        src_port, dst_port = self.topo.ports_between(src_switch, dst_switch)
        return build_frame(out, switch_address(src_dev, self.job), switch_address(dst_dev, self.job),
                           switch_port_mac(src_dev, src_port), switch_port_mac(dst_dev, dst_port), ident=ident,
                           ttl=64, src_port=udp_source_port(qp))


# Where a bit is flipped to corrupt a packet on the wire (the ICRC is left as the sender made it).
def corrupt(frame: bytes, where: str) -> bytes:
    """The frame with one bit flipped in the payload's first value, the RETH's virtual address, the
    immediate data, or the BTH's PSN (bit 0: packet i of a message becomes packet i ^ 1)."""
    opcode = frame[BTH_AT]
    ext = RETH_LEN if opcode == Opcode.WRITE_FIRST else 4 if opcode == Opcode.WRITE_LAST_IMM else 0
    offsets = {"payload": BTH_AT + 12 + ext + 3, "psn": BTH_AT + 11}
    if opcode == Opcode.WRITE_FIRST:
        offsets["reth"] = BTH_AT + 12 + 6  # virtual address, bit 8 of its second-lowest byte: the window
    if opcode == Opcode.WRITE_LAST_IMM:
        offsets["imm"] = BTH_AT + 12 + 3
    bit = 4 if where == "reth" else 0
    data = bytearray(frame)
    data[offsets[where]] ^= 1 << bit
    return bytes(data)


def topology(spec: dict[str, object] | None = None) -> Topology:
    args = dict(spec or TOPOLOGY)
    return build_topology(str(args.pop("name")), **args)
