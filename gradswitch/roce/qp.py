"""Reliable Connection queue pairs: the requester and responder state machines.

Pure state machines, no sockets and no clock of their own: packets go in and out as
`Transport` objects and time is passed in, so tests can script loss, duplication and
reordering exactly (tests/unit/test_qp.py) and the engine (gradswitch/roce/engine.py) can drive them
from real sockets.

Two loss-recovery modes:
- GBN (RoCE): the responder drops out-of-order packets and NAKs the expected PSN once;
  the requester goes back to the NAKed PSN (or, on timeout, to the oldest unacked one)
  and resends everything from there.
- SR (IRN): the responder keeps out-of-order packets inside its window and NAKs the
  expected PSN with the PSN that arrived (a 4-byte SACK after the AETH); the requester
  resends only the holes, and caps its in-flight packets at the window (IRN's BDP cap).

ACKs are coalesced: the requester sets AckReq on the last packet of a message, on every
`ack_every`-th packet and on every retransmission; the responder acknowledges those (and
nothing else), cumulatively, with its MSN.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from gradswitch.protocol.choice import Choice
from gradswitch.protocol.dlcp import DROPPABLE, TRIMMED
from gradswitch.roce.headers import LAST, ONLY, WRITES, AckType, Aeth, Bth, NakCode, Opcode, Reth, Transport
from gradswitch.roce.psn import psn_add, psn_diff

RETH_OPCODES = {Opcode.WRITE_FIRST, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM}
VALID_MTUS = (256, 512, 1024, 2048, 4096)


class Mode(Choice):
    GBN = "gbn"  # go-back-N, as RoCE NICs
    SR = "sr"  # selective repeat with an in-flight cap, as IRN


class TransportError(RuntimeError):
    """A QP failed (retries exhausted, remote access error...): names the peer."""


@dataclass(frozen=True)
class QpConfig:
    qpn: int  # this QP's number
    remote_qpn: int  # the peer QP's number
    mode: Mode = Mode.GBN
    mtu: int = 1024  # payload bytes per packet
    window: int = 64  # packets in flight at most; also the responder's out-of-order window
    ack_every: int = 16  # AckReq at least every this many packets
    rto: float = 0.05  # smallest retransmission timeout, seconds (the RTT estimate may raise it)
    rto_max: float = 1.0  # timeouts double up to this
    retry_limit: int = 7  # timeouts in a row before the QP fails (RoCE retry_cnt)
    initial_psn: int = 0  # first PSN this QP sends (sq_psn)
    remote_initial_psn: int = 0  # first PSN this QP expects (rq_psn)
    peer: str = ""  # who is on the other side, for error messages
    # DLCP: how much of what it receives a responder may complete as zeros when switches trim droppable
    # packets (Responder._zero_fill: a fraction of the QP's packets so far, and of each message's)
    loss_budget: float = 0.0
    reorder_delay: float = 0.0  # SR only: how long a hole may be reordering before it is NAKed
    # SR only: DLCP's order-tolerant receive (gradswitch/roce/order_tolerant.py): packets placed as they arrive, a hole
    # judged only once its message's last packet is here and reorder_delay has passed since
    order_tolerant: bool = False
    # A WRITE's completion carries a copy of the bytes it wrote, as they were when its last packet was applied
    # (RecvCompletion.data): for a receiver whose region its sender may write again, at the same place, before the
    # receiver reads it (a NetReduce k-of-N job's sums leave without this worker: gradswitch/hosts/netreduce.py)
    keep_writes: bool = False

    def __post_init__(self) -> None:
        if self.mtu not in VALID_MTUS:
            raise ValueError(f"MTU {self.mtu} is not one of {VALID_MTUS}")
        if not 1 <= self.window < 1 << 22:
            raise ValueError(f"window {self.window} out of range")
        if self.order_tolerant and self.mode != Mode.SR:
            raise ValueError("order-tolerant receive keeps out-of-order packets: it needs selective repeat (sr)")


@dataclass
class WorkRequest:
    wr_id: int
    opcode_kind: str  # "write" or "send"
    data: bytes
    va: int = 0
    rkey: int = 0
    imm: int | None = None
    first_psn: int = 0
    npackets: int = 0
    tag: object = None  # the poster's own data (e.g. DLCP class), read back by the engine

    @property
    def last_psn(self) -> int:
        return psn_add(self.first_psn, self.npackets - 1)


@dataclass(frozen=True)
class SendCompletion:
    wr_id: int
    ok: bool
    error: str = ""


@dataclass(frozen=True)
class RecvCompletion:
    opcode_kind: str  # "write" or "send"
    length: int
    imm: int | None = None
    va: int = 0
    rkey: int = 0
    data: bytes = b""  # SEND payload; a WRITE's data is in the memory region (and here too with keep_writes)
    zero_filled: int = 0  # packets of the message completed as zeros (trimmed by a DLCP switch, within the budget)


@dataclass
class MemoryRegion:
    """Registered memory a peer may RDMA WRITE into (addresses are offsets from 0)."""

    rkey: int
    buffer: bytearray

    @classmethod
    def allocate(cls, rkey: int, size: int) -> MemoryRegion:
        return cls(rkey, bytearray(size))


def _opcodes(kind: str, first: bool, last: bool, imm: bool) -> Opcode:
    if kind == "write":
        if first and last:
            return Opcode.WRITE_ONLY_IMM if imm else Opcode.WRITE_ONLY
        if first:
            return Opcode.WRITE_FIRST
        if last:
            return Opcode.WRITE_LAST_IMM if imm else Opcode.WRITE_LAST
        return Opcode.WRITE_MIDDLE
    if first and last:
        return Opcode.SEND_ONLY_IMM if imm else Opcode.SEND_ONLY
    if first:
        return Opcode.SEND_FIRST
    if last:
        return Opcode.SEND_LAST_IMM if imm else Opcode.SEND_LAST
    return Opcode.SEND_MIDDLE


@dataclass
class Counters:
    values: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, n: int = 1) -> None:
        self.values[name] = self.values.get(name, 0) + n

    def __getitem__(self, name: str) -> int:
        return self.values.get(name, 0)


Marker = Callable[[WorkRequest, int, bytes], int]


class Requester:
    """The sending half of an RC QP."""

    def __init__(self, cfg: QpConfig, marker: Marker | None = None) -> None:
        self.cfg = cfg
        self.marker = marker  # BTH.resv7 of packet i of a request (DLCP class), or None for 0
        self.next_post = cfg.initial_psn  # PSN the next posted packet gets
        self.una = cfg.initial_psn  # oldest unacknowledged PSN
        self.nxt = cfg.initial_psn  # next PSN to (re)transmit in order
        self.sent_end = cfg.initial_psn  # one past the highest PSN ever sent
        self.packets: dict[int, tuple[WorkRequest, int]] = {}  # psn -> (request, packet index)
        self.requests: deque[WorkRequest] = deque()
        self.sacked: set[int] = set()
        self.resend: deque[int] = deque()
        self.resend_pending: set[int] = set()
        self.nak_resent: set[int] = set()  # SR: holes already resent for a NAK (again only after a timeout)
        self.recover: int | None = None  # SR: one past what was sent when the timer fired, while recovering
        self.timer_start: float | None = None
        self.rto = cfg.rto
        self.srtt: float | None = None  # smoothed RTT and its variation (RFC 6298), from ACKed first transmissions
        self.rttvar = 0.0
        self.sent_at: dict[int, float] = {}
        self.retries = 0
        self.error: str | None = None
        self.completions: deque[SendCompletion] = deque()
        self.counters = Counters()
        self._wr_ids = 0

    # ---- posting ----

    def post_write(self, data: bytes, va: int, rkey: int, imm: int | None = None, tag: object = None) -> WorkRequest:
        return self._post("write", data, va, rkey, imm, tag)

    def post_send(self, data: bytes, imm: int | None = None, tag: object = None) -> WorkRequest:
        return self._post("send", data, 0, 0, imm, tag)

    def _post(self, kind: str, data: bytes, va: int, rkey: int, imm: int | None, tag: object) -> WorkRequest:
        if self.error:
            raise TransportError(self.error)
        npackets = max(1, -(-len(data) // self.cfg.mtu))
        self._wr_ids += 1
        wr = WorkRequest(self._wr_ids, kind, bytes(data), va, rkey, imm, self.next_post, npackets, tag)
        for i in range(npackets):
            self.packets[psn_add(self.next_post, i)] = (wr, i)
        self.next_post = psn_add(self.next_post, npackets)
        self.requests.append(wr)
        return wr

    def build(self, psn: int, retransmission: bool = False) -> Transport:
        wr, i = self.packets[psn]
        first, last = i == 0, i == wr.npackets - 1
        op = _opcodes(wr.opcode_kind, first, last, wr.imm is not None)
        payload = wr.data[i * self.cfg.mtu : (i + 1) * self.cfg.mtu]
        ack_req = last or retransmission or (psn_diff(psn, self.cfg.initial_psn) + 1) % self.cfg.ack_every == 0
        resv7 = (self.marker(wr, i, payload) if self.marker is not None else 0) & ~TRIMMED  # switches trim, never us
        if retransmission:
            resv7 &= ~DROPPABLE  # a resent packet must get through: never droppable again
        bth = Bth(op, self.cfg.remote_qpn, psn, ack_req=ack_req, pad_count=(-len(payload)) % 4, resv7=resv7)
        reth = Reth(wr.va, wr.rkey, len(wr.data)) if op in RETH_OPCODES else None
        imm = wr.imm if last else None
        return Transport(bth, payload, reth=reth, imm=imm)

    # ---- state ----

    @property
    def in_flight(self) -> int:
        return psn_diff(self.sent_end, self.una)

    def idle(self) -> bool:
        """Nothing posted is unacknowledged."""
        return self.una == self.next_post

    def transmit(self, now: float) -> list[Transport]:
        """Packets to put on the wire now: resends first, then new packets within the window."""
        if self.error:
            return []
        out: list[Transport] = []
        while self.resend:
            psn = self.resend.popleft()
            self.resend_pending.discard(psn)
            if psn_diff(psn, self.una) < 0 or psn in self.sacked or psn not in self.packets:
                continue
            out.append(self.build(psn, retransmission=True))
            self.sent_at.pop(psn, None)
            self.counters.add("retransmitted")
        while psn_diff(self.nxt, self.next_post) < 0 and psn_diff(self.nxt, self.una) < self.cfg.window:
            psn = self.nxt
            self.nxt = psn_add(psn, 1)
            if psn in self.sacked:
                continue
            again = psn_diff(psn, self.sent_end) < 0
            out.append(self.build(psn, retransmission=again))
            self.counters.add("retransmitted" if again else "sent")
            if again:
                self.sent_at.pop(psn, None)  # Karn: no RTT sample from a retransmitted packet
            else:
                self.sent_at[psn] = now
                self.sent_end = psn_add(psn, 1)
        if out and self.timer_start is None:
            self.timer_start = now
        return out

    def deadline(self) -> float | None:
        """When the retransmission timer fires, None when nothing is outstanding."""
        if self.timer_start is None or self.error or self.una == self.sent_end:
            return None
        return self.timer_start + self.rto

    # ---- acknowledgements ----

    def on_ack(self, t: Transport, now: float) -> None:
        aeth = t.aeth
        if aeth is None or self.error:
            return
        psn = t.bth.psn
        if aeth.kind == AckType.ACK:
            self._ack_through(psn, now)
        elif aeth.kind == AckType.NAK and aeth.value == NakCode.PSN_SEQUENCE_ERROR:
            self.counters.add("naks")
            self.sacked.discard(psn)  # the responder expects psn: an earlier SACK of it (a trimmed packet) is void
            self._ack_through(psn_add(psn, -1), now)
            if self.cfg.mode == Mode.GBN:
                if psn == self.una:
                    self.nxt = self.una  # go back
            else:
                sack = struct.unpack("!I", t.payload[:4])[0] & 0xFFFFFF if len(t.payload) >= 4 else None
                if sack is not None and psn_diff(sack, self.una) > 0 and psn_diff(sack, self.sent_end) < 0:
                    self.sacked.add(sack)
                    hole = self.una
                    while psn_diff(hole, sack) < 0:
                        if hole not in self.sacked:
                            self._schedule_resend(hole, once=True)
                        hole = psn_add(hole, 1)
                elif psn == self.una:  # no SACK (a trimmed packet over the budget): exactly this PSN
                    self._schedule_resend(self.una, once=True)
        elif aeth.kind == AckType.RNR_NAK:
            self.counters.add("rnr_naks")
        else:
            self._fail(f"remote error from {self.cfg.peer or 'peer'} (NAK code {aeth.value})")

    def _schedule_resend(self, psn: int, once: bool) -> None:
        """Queue a retransmission; `once`: at most one per NAK episode (a timeout may resend again)."""
        if psn in self.resend_pending or (once and psn in self.nak_resent):
            return
        self.resend.append(psn)
        self.resend_pending.add(psn)
        if once:
            self.nak_resent.add(psn)

    def _ack_through(self, psn: int, now: float) -> None:
        """Everything up to and including psn is acknowledged."""
        if psn_diff(psn, self.una) < 0:
            self.counters.add("stale_acks")
            return
        if psn_diff(psn, self.sent_end) >= 0:
            self.counters.add("invalid_acks")
            return
        new_una = psn_add(psn, 1)
        sent = self.sent_at.get(psn)
        if sent is not None:
            self._sample_rtt(now - sent)
        p = self.una
        while p != new_una:
            self.sent_at.pop(p, None)
            self.packets.pop(p, None)
            self.sacked.discard(p)
            self.nak_resent.discard(p)
            p = psn_add(p, 1)
        self.una = new_una
        if psn_diff(self.nxt, self.una) < 0:
            self.nxt = self.una
        while self.requests and psn_diff(self.requests[0].last_psn, self.una) < 0:
            self.completions.append(SendCompletion(self.requests.popleft().wr_id, True))
        self.retries = 0
        self.rto = self._rto()
        self.timer_start = now if self.una != self.sent_end else None
        if self.recover is not None:
            if psn_diff(self.una, self.recover) < 0:
                # A partial acknowledgement while recovering from a timeout: the next packet sent
                # before the timeout is missing too; resend it now rather than at the next timeout.
                if self.una not in self.sacked:
                    self._schedule_resend(self.una, once=False)
            else:
                self.recover = None

    def _sample_rtt(self, rtt: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt

    def _rto(self) -> float:
        """srtt + 4 rttvar (RFC 6298), within the configured bounds."""
        if self.srtt is None:
            return self.cfg.rto
        return min(self.cfg.rto_max, max(self.cfg.rto, self.srtt + 4 * self.rttvar))

    def on_timer(self, now: float) -> None:
        deadline = self.deadline()
        if deadline is None or now < deadline:
            return
        self.retries += 1
        self.counters.add("timeouts")
        if self.retries > self.cfg.retry_limit:
            self._fail(f"transport retry counter exceeded: no acknowledgement from {self.cfg.peer or 'peer'} "
                       f"(QP {self.cfg.remote_qpn:#x}) after {self.cfg.retry_limit} retries")
            return
        self.rto = min(self.rto * 2, self.cfg.rto_max)
        self.timer_start = now
        if self.cfg.mode == Mode.GBN:
            self.nxt = self.una
        else:
            # Selective repeat resends only the oldest unacknowledged packet (as TCP and IRN do):
            # the receiver may hold everything after it. Each partial acknowledgement that follows
            # resends the next missing one (_ack_through), and NAKs name the other holes.
            # A SACK is a hint the responder may renege on (RFC 2018): one of a trimmed copy it could not
            # zero-fill is void once its NAK is lost. A timeout resends the oldest packet even if SACKed.
            self.nak_resent.clear()
            self.recover = self.sent_end
            self.sacked.discard(self.una)
            self._schedule_resend(self.una, once=False)

    def _fail(self, reason: str) -> None:
        self.error = reason
        while self.requests:
            self.completions.append(SendCompletion(self.requests.popleft().wr_id, False, reason))


class Responder:
    """The receiving half of an RC QP.

    Trimmed packets (DLCP: a switch dropped a droppable packet's payload and forwarded its headers,
    docs/dlcp.md) are that PSN's packet with zeros for a payload: taken in order like any packet and
    applied at once, as zeros, while the job's loss budget allows (`_zero_fill`); beyond it a trimmed
    packet is a loss, NAKed when it is the expected PSN and resent (never droppable again). A packet
    lost without a notification is recovered by retransmission, never zero-filled.
    """

    def __init__(self, cfg: QpConfig, regions: dict[int, MemoryRegion] | None = None) -> None:
        self.cfg = cfg
        self.regions = regions if regions is not None else {}
        self.epsn = cfg.remote_initial_psn
        self.msn = 0
        self.nak_sent = False
        self.buffered: dict[int, Transport] = {}
        self.completions: deque[RecvCompletion] = deque()
        self.counters = Counters()
        self._kind: str | None = None  # message being received
        self._reth: Reth | None = None
        self._offset = 0
        self._send_data = bytearray()
        self._first_psn = 0  # PSN of the first packet of the message being received
        self.judge_at: float | None = None  # when holes waiting for reordering are judged
        self._zero_filled_msg = 0  # packets of the message being received completed as zeros
        self.zero_filled = 0  # packets completed as zeros so far (trimmed, within the loss budget)

    def _ack(self) -> Transport:
        return Transport(Bth(Opcode.ACKNOWLEDGE, self.cfg.remote_qpn, psn_add(self.epsn, -1)), aeth=Aeth.ack(self.msn))

    def _nak(self, code: NakCode = NakCode.PSN_SEQUENCE_ERROR, sack: int | None = None) -> Transport:
        self.counters.add("naks_sent")
        payload = struct.pack("!I", sack) if sack is not None else b""
        bth = Bth(Opcode.ACKNOWLEDGE, self.cfg.remote_qpn, self.epsn)
        return Transport(bth, payload, aeth=Aeth.nak(self.msn, code))

    def on_packet(self, t: Transport, now: float = 0.0) -> list[Transport]:
        """Take a request packet; returns the ACK/NAK packets to send back."""
        if t.trimmed:
            self.counters.add("trimmed")
        d = psn_diff(t.bth.psn, self.epsn)
        if d < 0:
            if -d > self.cfg.window * 4:
                self.counters.add("out_of_window")
                return []
            self.counters.add("duplicates")
            return [self._ack()] if t.bth.ack_req else []
        if d > 0:
            if d >= self.cfg.window:
                self.counters.add("out_of_window")
                return []
            self.counters.add("out_of_order")
            if self.cfg.mode == Mode.GBN:
                if self.nak_sent:
                    return []
                self.nak_sent = True
                return [self._nak()]
            return self._out_of_order(t, now)
        return self._drain(t, had_holes=bool(self.buffered) or self.nak_sent, now=now)

    def _keep(self, t: Transport) -> bool:
        """Buffer a packet that arrived ahead of a hole: False when that PSN is here already (a packet
        with its payload replaces a trimmed copy of itself, e.g. a resend crossing the notification)."""
        old = self.buffered.get(t.bth.psn)
        if old is not None and not (old.trimmed and not t.trimmed):
            return False
        self.buffered[t.bth.psn] = t
        return True

    def _out_of_order(self, t: Transport, now: float) -> list[Transport]:
        """Selective repeat: keep a packet that arrived ahead of a hole; NAK the hole (or wait)."""
        self._keep(t)
        if self.cfg.reorder_delay > 0:
            # Packets may arrive in any order (DLCP priorities, spraying): a hole is judged only
            # after reorder_delay; until then nothing triggers a resend.
            if self.judge_at is None:
                self.judge_at = now + self.cfg.reorder_delay
            return self.on_timer(now)
        return [self._nak(sack=t.bth.psn)]

    def deadline(self) -> float | None:
        """When the holes waiting for reordering are judged (None: no such hole)."""
        return self.judge_at

    def on_timer(self, now: float) -> list[Transport]:
        """NAK the first hole once it has waited long enough for reordering."""
        if self.judge_at is None or now < self.judge_at or not self.buffered:
            return []
        # Look again later if holes remain (with no delay, the next packet or the sender's timer will).
        self.judge_at = now + 2 * self.cfg.reorder_delay if self.cfg.reorder_delay > 0 else None
        # NAK the first hole exactly: its SACK is the first packet received after it.
        return [self._nak(sack=min(self.buffered, key=lambda p: psn_diff(p, self.epsn)))]

    def _message_end(self) -> int | None:
        """PSN of the last packet of the WRITE being received, None between messages."""
        if self._kind != "write" or self._reth is None:
            return None
        return psn_add(self._first_psn, _packets(self._reth.dma_length, self.cfg.mtu) - 1)

    def _zero_fill(self, t: Transport) -> Transport | None:
        """A trimmed packet about to be applied in order: the same packet with zeros for its payload
        (MTU bytes for a First or Middle, the rest of the message for a Last or Only) when the loss
        budget allows; None when it must be resent instead (a loss like any other).

        The budget (QpConfig.loss_budget = b) holds both ways: zero-filled packets of this QP so far,
        this one included, at most b x the packets it has applied (this one included); and of this
        message at most max(1, floor(b x its packets)): any message, a one-packet one too, may lose one
        packet, and a long one no more than its share."""
        budget = self.cfg.loss_budget
        if budget <= 0 or t.opcode not in WRITES:
            return None  # not a lossy DLCP receiver, or a SEND (its length is nowhere): resend it
        if t.opcode in RETH_OPCODES:
            assert t.reth is not None
            reth, offset, in_message = t.reth, 0, 0
        elif self._kind == "write" and self._reth is not None:
            reth, offset, in_message = self._reth, self._offset, self._zero_filled_msg
        else:
            return None  # a Middle or Last without its message: invalid, as its resend will say
        allowed = max(1, int(budget * _packets(reth.dma_length, self.cfg.mtu) + 1e-9))
        if in_message + 1 > allowed or self.zero_filled + 1 > budget * (self.counters["accepted"] + 1) + 1e-9:
            self.counters.add("over_loss_budget")
            return None
        size = reth.dma_length - offset if t.opcode in LAST or t.opcode in ONLY else self.cfg.mtu
        return Transport(t.bth, bytes(max(0, size)), reth=t.reth, imm=t.imm)

    def _drain(self, t: Transport, had_holes: bool, now: float) -> list[Transport]:
        """Apply t (the expected PSN) and every buffered packet that follows it in order. A trimmed
        packet over the loss budget stops it: NAKed at once, resent (not droppable) by the requester."""
        responses: list[Transport] = []
        ack_wanted = False
        current: Transport | None = t
        while current is not None:
            if current.trimmed:
                current = self._zero_fill(current)
                if current is None:
                    self.counters.add("trimmed_resent")
                    self.nak_sent = True
                    self._drained(now)
                    # No SACK: the requester resends exactly this PSN (what follows may still be on its way).
                    return [self._nak()]
            error = self._execute(current)
            if error is not None:
                self.counters.add(error.name.lower())
                self.buffered.clear()
                return [self._nak(error)]
            ack_wanted |= current.bth.ack_req
            self.epsn = psn_add(self.epsn, 1)
            self.counters.add("accepted")
            current = self.buffered.pop(self.epsn, None)
        self.nak_sent = False
        self._drained(now)
        if ack_wanted or had_holes:
            responses.append(self._ack())
        return responses

    def _drained(self, now: float) -> None:
        """Every in-order packet is applied: what is still buffered waits behind a hole."""
        if not self.buffered:
            self.judge_at = None

    def _place(self, region: MemoryRegion, start: int, t: Transport) -> None:
        """Write an in-order WRITE packet's payload (a subclass may have placed it already)."""
        region.buffer[start : start + len(t.payload)] = t.payload

    def _execute(self, t: Transport) -> NakCode | None:
        """Apply one in-order packet; a NakCode when the request is invalid. A trimmed packet here
        carries the zeros `_zero_fill` gave it, and is counted as zero-filled."""
        op = t.opcode
        name = op.name
        if name.startswith("WRITE"):
            if op in RETH_OPCODES:
                if self._kind is not None:
                    return NakCode.INVALID_REQUEST
                assert t.reth is not None
                region = self.regions.get(t.reth.rkey)
                if region is None or t.reth.virtual_addr + t.reth.dma_length > len(region.buffer):
                    return NakCode.REMOTE_ACCESS_ERROR
                self._kind, self._reth, self._offset = "write", t.reth, 0
                self._first_psn, self._zero_filled_msg = t.bth.psn, 0
            elif self._kind != "write":
                return NakCode.INVALID_REQUEST
            assert self._reth is not None
            region = self.regions[self._reth.rkey]
            start = self._reth.virtual_addr + self._offset
            if self._offset + len(t.payload) > self._reth.dma_length:
                return NakCode.INVALID_REQUEST
            if t.trimmed:
                self._zero_filled_msg += 1
                self.zero_filled += 1
                self.counters.add("zero_filled")
            self._place(region, start, t)
            self._offset += len(t.payload)
            if name.endswith(("LAST", "LAST_IMM", "ONLY", "ONLY_IMM")):
                if self._offset != self._reth.dma_length:
                    return NakCode.INVALID_REQUEST
                va = self._reth.virtual_addr
                kept = bytes(region.buffer[va : va + self._offset]) if self.cfg.keep_writes else b""
                self.completions.append(RecvCompletion("write", self._offset, t.imm, va, self._reth.rkey, kept,
                                                       zero_filled=self._zero_filled_msg))
                self._kind, self._reth = None, None
                self.msn = (self.msn + 1) & 0xFFFFFF
            return None
        if name.startswith("SEND"):
            if name.startswith(("SEND_FIRST", "SEND_ONLY")):
                if self._kind is not None:
                    return NakCode.INVALID_REQUEST
                self._kind, self._send_data = "send", bytearray()
            elif self._kind != "send":
                return NakCode.INVALID_REQUEST
            self._send_data += t.payload
            if name.startswith(("SEND_LAST", "SEND_ONLY")):
                data = bytes(self._send_data)
                self.completions.append(RecvCompletion("send", len(data), t.imm, data=data))
                self._kind = None
                self.msn = (self.msn + 1) & 0xFFFFFF
            return None
        return NakCode.INVALID_REQUEST


def _packets(length: int, mtu: int) -> int:
    """Packets of a message of `length` bytes (at least one)."""
    return max(1, -(-length // mtu))
