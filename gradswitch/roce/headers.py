"""RoCE v2 transport headers (InfiniBand BTH, RETH, AETH, ImmDt) packed and unpacked by hand.

Field layout follows the InfiniBand Architecture Specification vol. 1 (9.2-9.3) and
matches gradswitch/p4src/include/headers.p4. Nothing here depends on scapy: scapy's
`scapy.contrib.roce` (extended in gradswitch/roce/scapy_layers.py) is the independent check.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from gradswitch.protocol.dlcp import TRIMMED  # the resv7 bit of a drop notification (docs/dlcp.md "Trimmed packets")
from gradswitch.protocol.p4_constants import CONFIG

BTH_LEN = 12
RETH_LEN = 16
AETH_LEN = 4
IMM_LEN = 4
ICRC_LEN = 4
PSN_MASK = 0xFFFFFF
QPN_MASK = 0xFFFFFF
DEFAULT_PKEY = 0xFFFF


class Opcode(IntEnum):
    """Reliable Connection opcodes (values: config.p4, the switch program's single source)."""

    SEND_FIRST = CONFIG.ROCE_SEND_FIRST
    SEND_MIDDLE = CONFIG.ROCE_SEND_MIDDLE
    SEND_LAST = CONFIG.ROCE_SEND_LAST
    SEND_LAST_IMM = CONFIG.ROCE_SEND_LAST_IMM
    SEND_ONLY = CONFIG.ROCE_SEND_ONLY
    SEND_ONLY_IMM = CONFIG.ROCE_SEND_ONLY_IMM
    WRITE_FIRST = CONFIG.ROCE_WRITE_FIRST
    WRITE_MIDDLE = CONFIG.ROCE_WRITE_MIDDLE
    WRITE_LAST = CONFIG.ROCE_WRITE_LAST
    WRITE_LAST_IMM = CONFIG.ROCE_WRITE_LAST_IMM
    WRITE_ONLY = CONFIG.ROCE_WRITE_ONLY
    WRITE_ONLY_IMM = CONFIG.ROCE_WRITE_ONLY_IMM
    READ_REQUEST = CONFIG.ROCE_READ_REQUEST
    READ_RESPONSE_FIRST = CONFIG.ROCE_READ_RESPONSE_FIRST
    READ_RESPONSE_MIDDLE = CONFIG.ROCE_READ_RESPONSE_MIDDLE
    READ_RESPONSE_LAST = CONFIG.ROCE_READ_RESPONSE_LAST
    READ_RESPONSE_ONLY = CONFIG.ROCE_READ_RESPONSE_ONLY
    ACKNOWLEDGE = CONFIG.ROCE_ACKNOWLEDGE


HAS_RETH = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM, Opcode.READ_REQUEST})
HAS_IMM = frozenset({Opcode.SEND_LAST_IMM, Opcode.SEND_ONLY_IMM, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM})
HAS_AETH = frozenset(
    {Opcode.ACKNOWLEDGE, Opcode.READ_RESPONSE_FIRST, Opcode.READ_RESPONSE_LAST, Opcode.READ_RESPONSE_ONLY}
)
FIRST = frozenset({Opcode.SEND_FIRST, Opcode.WRITE_FIRST})
MIDDLE = frozenset({Opcode.SEND_MIDDLE, Opcode.WRITE_MIDDLE})
LAST = frozenset({Opcode.SEND_LAST, Opcode.SEND_LAST_IMM, Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM})
ONLY = frozenset({Opcode.SEND_ONLY, Opcode.SEND_ONLY_IMM, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM})
WRITES = frozenset(op for op in Opcode if op.name.startswith("WRITE"))


class HeaderError(ValueError):
    """Bytes that are not a valid header; `reason` is a short counter name."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}")


@dataclass(frozen=True)
class Bth:
    opcode: int
    dest_qp: int
    psn: int
    ack_req: bool = False
    solicited: bool = False
    mig_req: bool = True
    pad_count: int = 0
    tver: int = 0
    pkey: int = DEFAULT_PKEY
    fecn: bool = False
    becn: bool = False
    resv7: int = 0  # the 7 reserved bits after AckReq: gradswitch puts the DLCP class here (docs/dlcp.md)

    def pack(self) -> bytes:
        b1 = (int(self.solicited) << 7) | (int(self.mig_req) << 6) | ((self.pad_count & 3) << 4) | (self.tver & 0xF)
        b4 = (int(self.fecn) << 7) | (int(self.becn) << 6)
        return struct.pack(
            "!BBHI I",
            self.opcode,
            b1,
            self.pkey,
            (b4 << 24) | (self.dest_qp & QPN_MASK),
            (int(self.ack_req) << 31) | ((self.resv7 & 0x7F) << 24) | (self.psn & PSN_MASK),
        )

    @classmethod
    def unpack(cls, data: bytes) -> Bth:
        if len(data) < BTH_LEN:
            raise HeaderError("truncated", f"BTH needs {BTH_LEN} bytes, got {len(data)}")
        op, b1, pkey, w1, w2 = struct.unpack_from("!BBHII", data)
        return cls(
            opcode=op,
            dest_qp=w1 & QPN_MASK,
            psn=w2 & PSN_MASK,
            ack_req=bool(w2 >> 31),
            solicited=bool(b1 >> 7),
            mig_req=bool((b1 >> 6) & 1),
            pad_count=(b1 >> 4) & 3,
            tver=b1 & 0xF,
            pkey=pkey,
            fecn=bool(w1 >> 31),
            becn=bool((w1 >> 30) & 1),
            resv7=(w2 >> 24) & 0x7F,
        )


@dataclass(frozen=True)
class Reth:
    virtual_addr: int
    rkey: int
    dma_length: int

    def pack(self) -> bytes:
        return struct.pack("!QII", self.virtual_addr, self.rkey, self.dma_length)

    @classmethod
    def unpack(cls, data: bytes) -> Reth:
        if len(data) < RETH_LEN:
            raise HeaderError("truncated", f"RETH needs {RETH_LEN} bytes, got {len(data)}")
        return cls(*struct.unpack_from("!QII", data))


class AckType(IntEnum):
    ACK = 0
    RNR_NAK = 1
    NAK = 3


class NakCode(IntEnum):
    PSN_SEQUENCE_ERROR = 0
    INVALID_REQUEST = 1
    REMOTE_ACCESS_ERROR = 2
    REMOTE_OPERATIONAL_ERROR = 3
    INVALID_RD_REQUEST = 4


ACK_CREDITS_INVALID = 0x1F  # "no end-to-end credits advertised"


@dataclass(frozen=True)
class Aeth:
    syndrome: int
    msn: int

    @classmethod
    def ack(cls, msn: int, credits: int = ACK_CREDITS_INVALID) -> Aeth:
        return cls((AckType.ACK << 5) | (credits & 0x1F), msn)

    @classmethod
    def nak(cls, msn: int, code: NakCode = NakCode.PSN_SEQUENCE_ERROR) -> Aeth:
        return cls((AckType.NAK << 5) | int(code), msn)

    @property
    def kind(self) -> AckType:
        return AckType((self.syndrome >> 5) & 3)

    @property
    def value(self) -> int:
        """Credit count of an ACK, NAK code of a NAK."""
        return self.syndrome & 0x1F

    def pack(self) -> bytes:
        return struct.pack("!I", (self.syndrome << 24) | (self.msn & 0xFFFFFF))

    @classmethod
    def unpack(cls, data: bytes) -> Aeth:
        if len(data) < AETH_LEN:
            raise HeaderError("truncated", f"AETH needs {AETH_LEN} bytes, got {len(data)}")
        (word,) = struct.unpack_from("!I", data)
        return cls(word >> 24, word & 0xFFFFFF)


@dataclass(frozen=True)
class Transport:
    """BTH, its extension headers and the payload: the UDP payload of a RoCE v2 packet without ICRC."""

    bth: Bth
    payload: bytes = b""
    reth: Reth | None = None
    aeth: Aeth | None = None
    imm: int | None = None

    def __post_init__(self) -> None:
        try:
            op = Opcode(self.bth.opcode)
        except ValueError:
            raise HeaderError("unknown-opcode", f"opcode {self.bth.opcode:#04x} is not an RC opcode we speak") from None
        for has, value, name in ((HAS_RETH, self.reth, "RETH"), (HAS_AETH, self.aeth, "AETH"),
                                 (HAS_IMM, self.imm, "ImmDt")):
            if (op in has) != (value is not None):
                need = "needs" if op in has else "must not carry"
                raise HeaderError("malformed", f"{op.name} {need} a {name}")

    @property
    def opcode(self) -> Opcode:
        return Opcode(self.bth.opcode)

    @property
    def trimmed(self) -> bool:
        """A switch dropped this packet's payload and forwarded its headers (DLCP's drop notification)."""
        return bool(self.bth.resv7 & TRIMMED)

    def pack(self) -> bytes:
        parts = [self.bth.pack()]
        if self.reth is not None:
            parts.append(self.reth.pack())
        if self.imm is not None:
            parts.append(struct.pack("!I", self.imm))
        if self.aeth is not None:
            parts.append(self.aeth.pack())
        parts.append(self.payload)
        parts.append(b"\0" * self.bth.pad_count)
        return b"".join(parts)

    @classmethod
    def unpack(cls, data: bytes) -> Transport:
        """Parse BTH + extensions + payload (no ICRC); HeaderError says what is wrong."""
        bth = Bth.unpack(data)
        try:
            op = Opcode(bth.opcode)
        except ValueError:
            raise HeaderError("unknown-opcode", f"opcode {bth.opcode:#04x}") from None
        offset = BTH_LEN
        reth = aeth = None
        imm = None
        if op in HAS_RETH:
            reth = Reth.unpack(data[offset:])
            offset += RETH_LEN
        if op in HAS_IMM:
            if len(data) < offset + IMM_LEN:
                raise HeaderError("truncated", "ImmDt cut short")
            (imm,) = struct.unpack_from("!I", data, offset)
            offset += IMM_LEN
        if op in HAS_AETH:
            aeth = Aeth.unpack(data[offset:])
            offset += AETH_LEN
        payload = data[offset:]
        if bth.pad_count:
            if len(payload) < bth.pad_count:
                raise HeaderError("truncated", "padding longer than the payload")
            payload = payload[: len(payload) - bth.pad_count]
        return cls(bth, payload, reth, aeth, imm)
