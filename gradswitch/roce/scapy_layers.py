"""scapy's RoCE support (scapy.contrib.roce) extended with the layers it lacks.

scapy has BTH (with ICRC), AETH, GRH and CNP; it has no RETH nor immediate-data layer,
and binds AETH only to ACK. Importing this module adds RETH and ImmDt and binds them (and
AETH for READ responses) by opcode, so `IP(raw_bytes)` decodes every packet we send.
"""

from __future__ import annotations

from scapy.contrib.roce import AETH, BTH
from scapy.fields import IntField, XIntField, XLongField
from scapy.packet import Packet, Raw, bind_layers

from gradswitch.roce.headers import HAS_AETH, HAS_IMM, HAS_RETH, Opcode


class RETH(Packet):
    name = "RETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dlen", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type:
        bth = self.underlayer
        if isinstance(bth, BTH) and bth.opcode == Opcode.WRITE_ONLY_IMM:
            return ImmDt
        return Raw


class ImmDt(Packet):
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]


for _op in HAS_RETH:
    bind_layers(BTH, RETH, opcode=int(_op))
for _op in HAS_IMM - HAS_RETH:
    bind_layers(BTH, ImmDt, opcode=int(_op))
for _op in HAS_AETH - {Opcode.ACKNOWLEDGE}:
    bind_layers(BTH, AETH, opcode=int(_op))

__all__ = ["AETH", "BTH", "RETH", "ImmDt"]
