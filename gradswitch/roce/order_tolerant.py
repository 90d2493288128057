"""DLCP's order-tolerant receiver: packets placed as they arrive, loss judged at a message's end.

DLCP argues that gradient packets need no ordering: each says where its payload goes, so a
receiver can take them in any order, and only real loss calls for recovery. The selective
repeat responder (gradswitch/roce/qp.py) keeps out-of-order packets but judges a hole by time alone:
`reorder_delay` after the first packet that arrived past it, and then at once for every later
hole. Strict priorities (a front layer's message overtaking a back layer's) and per-packet
spraying (paths of different delay) reorder by more than that, and each such hole is NAKed
and resent although nothing was lost.

This responder keeps RoCE's wire format and RC semantics (PSNs, cumulative ACKs with the MSN,
NAK with a SACK, completions in order) and changes two things:

- Placement. A WRITE's first packet carries its RETH (address, key, length); every later
  packet of the message is placed at `address + (PSN - first PSN) x MTU` as soon as it
  arrives, whatever arrived before it. A packet whose message's first packet is not here yet
  waits (it cannot know its address) and is placed when that first packet comes.
- Loss. A hole is judged only inside a message whose last packet has arrived, and only
  `reorder_delay` after that last packet: everything the sender sent before the message's
  end has had the network's reordering bound to arrive. Holes in a message whose end is not
  here (a whole message overtaken by a higher-priority one) are never judged by the receiver:
  either the message is still on its way, or the sender's retransmission timer (which covers
  a full queue) recovers it. A judged hole is NAKed with the first packet received after it as
  SACK, so the sender resends exactly the missing run: a packet lost without a notification is
  never zero-filled.

A trimmed packet (a DLCP switch dropped its payload, docs/dlcp.md) is that PSN's packet: it
counts as arrived (a trimmed LAST ends its message for the loss judgement), a trimmed FIRST's
RETH places the rest of its message, and it is applied as zeros, or NAKed over the loss budget,
when the expected PSN reaches it (gradswitch/roce/qp.py Responder).

The message containing the expected PSN is known from its RETH when its first packet has been
applied; at a message boundary it is the run of packets after the hole up to the first
LAST/ONLY, when every one of them is here and none starts a message (a lost first packet).
"""

from __future__ import annotations

from gradswitch.roce.headers import FIRST, LAST, ONLY, WRITES, Reth, Transport
from gradswitch.roce.psn import psn_add, psn_diff
from gradswitch.roce.qp import RETH_OPCODES, MemoryRegion, QpConfig, Responder


class OrderTolerantResponder(Responder):
    """The receiving half of an RC QP in DLCP's order-tolerant mode (QpConfig.order_tolerant)."""

    def __init__(self, cfg: QpConfig, regions: dict[int, MemoryRegion] | None = None) -> None:
        super().__init__(cfg, regions)
        self.extents: dict[int, tuple[Reth, int]] = {}  # first PSN -> (RETH, last PSN) of messages ahead
        self.placed: set[int] = set()  # PSNs ahead of the expected one whose payload is in memory
        self.end_seen: dict[int, float] = {}  # PSN of a LAST/ONLY packet ahead -> when it arrived

    # ---- arrivals ----

    def _out_of_order(self, t: Transport, now: float) -> list[Transport]:
        psn = t.bth.psn
        if not self._keep(t):
            self.counters.add("duplicates")
            return []
        if t.opcode in LAST or t.opcode in ONLY:
            self.end_seen[psn] = now
        if t.opcode in WRITES:
            self._place_ahead(t)
        self._rearm()
        return self.on_timer(now)

    def _place_ahead(self, t: Transport) -> None:
        """Put a packet that arrived ahead of a hole in memory, if its message's address is known."""
        psn = t.bth.psn
        if t.opcode in RETH_OPCODES:
            assert t.reth is not None
            region = self.regions.get(t.reth.rkey)
            if region is None or t.reth.virtual_addr + t.reth.dma_length > len(region.buffer):
                return  # applied in order later, which NAKs the access error
            packets = max(1, -(-t.reth.dma_length // self.cfg.mtu))
            self.extents[psn] = (t.reth, psn_add(psn, packets - 1))
            self._write(psn, psn, t.reth, t)
            for p in range(1, packets):  # the message's packets that came before its first
                later = self.buffered.get(psn_add(psn, p))
                if later is not None and psn_add(psn, p) not in self.placed:
                    self._write(psn_add(psn, p), psn, t.reth, later)
            return
        found = self._message_of(psn)
        if found is not None:
            self._write(psn, found[0], found[1], t)

    def _message_of(self, psn: int) -> tuple[int, Reth] | None:
        """(first PSN, RETH) of the known WRITE that contains psn."""
        if self._kind == "write" and self._reth is not None:
            end = self._message_end()
            assert end is not None
            if psn_diff(psn, self._first_psn) > 0 and psn_diff(psn, end) <= 0:
                return self._first_psn, self._reth
        for first, (reth, last) in self.extents.items():
            if psn_diff(psn, first) > 0 and psn_diff(psn, last) <= 0:
                return first, reth
        return None

    def _write(self, psn: int, first: int, reth: Reth, t: Transport) -> None:
        """Place packet psn of the WRITE starting at `first` (nothing if its length does not fit:
        applied in order later, which NAKs the invalid request)."""
        offset = psn_diff(psn, first) * self.cfg.mtu
        last = t.opcode in LAST or t.opcode in ONLY
        size = len(t.payload)
        fits = offset + size == reth.dma_length if last else size == self.cfg.mtu and offset + size < reth.dma_length
        region = self.regions.get(reth.rkey)
        if not fits or region is None:
            return
        start = reth.virtual_addr + offset
        region.buffer[start : start + size] = t.payload
        self.placed.add(psn)
        self.counters.add("placed_ahead")

    def _place(self, region: MemoryRegion, start: int, t: Transport) -> None:
        if t.bth.psn not in self.placed:  # in order, or zero-filled: written now
            super()._place(region, start, t)

    # ---- in order ----

    def _drained(self, now: float) -> None:
        """Forget what is now behind the expected PSN; place what waited for the RETH just applied;
        judge the new first hole's message."""
        found = self._message_of(psn_add(self.epsn, 1)) if self.buffered else None
        if found is not None:
            for psn, t in self.buffered.items():
                if psn not in self.placed and self._message_of(psn) == found:
                    self._write(psn, found[0], found[1], t)
        for psn in [p for p in self.placed if psn_diff(p, self.epsn) < 0]:
            self.placed.discard(psn)
        for psn in [p for p in self.end_seen if psn_diff(p, self.epsn) < 0]:
            del self.end_seen[psn]
        for first in [f for f, (_, last) in self.extents.items() if psn_diff(last, self.epsn) < 0]:
            del self.extents[first]
        self._rearm()

    # ---- loss ----

    def _current_end(self) -> int | None:
        """PSN of the last packet of the message the expected PSN belongs to, when known."""
        if self._kind == "write" and self._reth is not None:
            return self._message_end()
        q = psn_add(self.epsn, 1)  # at a boundary (or inside a SEND): the run after the hole
        while (t := self.buffered.get(q)) is not None:
            if t.opcode in FIRST or t.opcode in ONLY:
                return None  # a message starts after the hole: the hole's own extent is unknown
            if t.opcode in LAST:
                return q
            q = psn_add(q, 1)
        return None

    def _rearm(self) -> None:
        """When the first hole will be judged: reorder_delay after its message's last packet arrived;
        never (None) while that packet is not here."""
        end = self._current_end()
        seen = self.end_seen.get(end) if end is not None else None
        self.judge_at = seen + self.cfg.reorder_delay if self.buffered and seen is not None else None

    def on_timer(self, now: float) -> list[Transport]:
        """Judge the first hole once its message's end has waited reorder_delay: NAK it, the SACK
        naming the first packet received after the missing run."""
        if self.judge_at is None or now < self.judge_at or not self.buffered:
            return []
        end = self._current_end()
        if end is None or end not in self.buffered:
            self.judge_at = None
            return []
        self.counters.add("holes_judged")
        # Holes of this message remain lost after a NAK until the resends arrive: ask again later.
        self.judge_at = now + 2 * self.cfg.reorder_delay if self.cfg.reorder_delay > 0 else None
        return [self._nak(sack=min(self.buffered, key=lambda p: psn_diff(p, self.epsn)))]


def make_responder(cfg: QpConfig, regions: dict[int, MemoryRegion]) -> Responder:
    """The responder a QP's configuration asks for."""
    return OrderTolerantResponder(cfg, regions) if cfg.order_tolerant else Responder(cfg, regions)

