"""RC queue-pair state machines driven through a scripted network: loss, duplication, reordering.

A small discrete-event simulator with a virtual clock carries packets between a requester
and a responder; a `fate` function decides, per packet, whether it is dropped, delivered
once or twice, and how late. Both recovery modes must deliver every message exactly once,
in order, with the right bytes, whatever the script.
"""

from __future__ import annotations

import heapq
import itertools
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gradswitch.protocol.dlcp import DROPPABLE, TRIMMED
from gradswitch.roce.headers import AckType, Aeth, Bth, NakCode, Opcode, Transport
from gradswitch.roce.order_tolerant import OrderTolerantResponder, make_responder
from gradswitch.roce.psn import PSN_MASK, psn_add, psn_diff, psn_le, psn_lt
from gradswitch.roce.qp import MemoryRegion, Mode, QpConfig, Requester, Responder

Fate = Callable[[str, int, Transport], list[float]]  # (direction, sequence no, packet) -> delays of copies
Trim = Callable[[Transport], bool]  # which droppable packets the scripted switch trims
LINK_DELAY = 0.0001


def deliver(direction: str, n: int, t: Transport) -> list[float]:
    return [0.0]


@dataclass(order=True)
class Event:
    time: float
    seq: int
    to: str = field(compare=False)
    packet: Transport = field(compare=False)


def trimmed(t: Transport) -> Transport:
    """What a DLCP switch forwards of a droppable packet it drops: its headers (gradswitch/roce/wire.py trim_ipv4)."""
    bth = Bth(t.bth.opcode, t.bth.dest_qp, t.bth.psn, ack_req=t.bth.ack_req, resv7=t.bth.resv7 | TRIMMED)
    return Transport(bth, b"", reth=t.reth, imm=t.imm)


class Sim:
    """`trim`: with it every data packet is sent droppable (a DLCP job's marker), and the network trims
    the droppable ones it selects; `sent_packets` keeps every packet the requester put on the wire."""

    def __init__(self, mode: Mode, fate: Fate = deliver, mtu: int = 256, window: int = 16,
                 initial_psn: int = 0, region_size: int = 1 << 16, retry_limit: int = 7,
                 loss_budget: float = 0.0, reorder_delay: float = 0.0, order_tolerant: bool = False,
                 trim: Trim | None = None) -> None:
        self.req_cfg = QpConfig(qpn=0x11, remote_qpn=0x22, mode=mode, mtu=mtu, window=window, ack_every=4,
                                rto=0.01, rto_max=0.08, initial_psn=initial_psn, peer="B", retry_limit=retry_limit)
        resp_cfg = QpConfig(qpn=0x22, remote_qpn=0x11, mode=mode, mtu=mtu, window=window,
                            remote_initial_psn=initial_psn, peer="A", loss_budget=loss_budget,
                            reorder_delay=reorder_delay, order_tolerant=order_tolerant)
        self.region = MemoryRegion.allocate(7, region_size)
        self.req = Requester(self.req_cfg, marker=(lambda wr, i, payload: DROPPABLE) if trim is not None else None)
        self.resp = make_responder(resp_cfg, {7: self.region})
        self.fate = fate
        self.trim = trim
        self.sent_packets: list[Transport] = []
        self.trimmed = 0
        self.now = 0.0
        self.events: list[Event] = []
        self._seq = itertools.count()
        self.sent = {"A": 0, "B": 0}

    def _send(self, src: str, packets: list[Transport]) -> None:
        for p in packets:
            n = self.sent[src]
            self.sent[src] += 1
            if src == "A":
                self.sent_packets.append(p)
                if self.trim is not None and p.bth.resv7 & DROPPABLE and self.trim(p):
                    p = trimmed(p)
                    self.trimmed += 1
            for delay in self.fate(src, n, p):
                heapq.heappush(self.events, Event(self.now + LINK_DELAY + delay, next(self._seq),
                                                  "B" if src == "A" else "A", p))

    def run(self, limit: float = 60.0) -> None:
        while self.now < limit:
            self._send("A", self.req.transmit(self.now))
            if self.req.error:
                return
            if self.req.idle() and not self.events:
                return
            deadlines = [d for d in (self.req.deadline(), self.resp.deadline()) if d is not None]
            deadline = min(deadlines) if deadlines else None
            if self.events and (deadline is None or self.events[0].time <= deadline):
                ev = heapq.heappop(self.events)
                self.now = max(self.now, ev.time)
                if ev.to == "B":
                    self._send("B", self.resp.on_packet(ev.packet, self.now))
                else:
                    self.req.on_ack(ev.packet, self.now)
            elif deadline is not None:
                self.now = max(self.now, deadline)
                self.req.on_timer(self.now)
                self._send("B", self.resp.on_timer(self.now))
            else:
                return
        raise AssertionError(f"simulation did not finish by t={limit}")


def messages(sizes: list[int], seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    return [bytes(rnd.getrandbits(8) for _ in range(n)) for n in sizes]


def check_delivery(sim: Sim, data: list[bytes], imms: bool = True) -> None:
    done = list(sim.req.completions)
    assert [c.ok for c in done] == [True] * len(data), sim.req.error
    got = list(sim.resp.completions)
    assert len(got) == len(data)
    offset = 0
    for i, (c, d) in enumerate(zip(got, data, strict=True)):
        assert (c.opcode_kind, c.length, c.va) == ("write", len(d), offset)
        assert c.imm == (i if imms else None)
        assert bytes(sim.region.buffer[offset : offset + len(d)]) == d
        offset += len(d)


def post_all(sim: Sim, data: list[bytes], imms: bool = True) -> None:
    offset = 0
    for i, d in enumerate(data):
        sim.req.post_write(d, offset, 7, imm=i if imms else None)
        offset += len(d)


# ---- PSN arithmetic ----


def test_psn_wraps_at_24_bits():
    assert psn_add(PSN_MASK, 1) == 0
    assert psn_add(0, -1) == PSN_MASK
    assert psn_diff(2, PSN_MASK - 1) == 4
    assert psn_diff(PSN_MASK - 1, 2) == -4
    assert psn_lt(PSN_MASK, 0) and psn_le(5, 5) and not psn_lt(5, 5)


@given(a=st.integers(0, PSN_MASK), n=st.integers(-(1 << 23) + 1, (1 << 23) - 1))
def test_psn_add_and_diff_are_inverse(a, n):
    assert psn_diff(psn_add(a, n), a) == n


# ---- packets the requester builds ----


def test_message_is_split_into_first_middle_last_with_reth_on_first():
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=256, ack_every=100, initial_psn=PSN_MASK - 1))
    req.post_write(bytes(700), va=0x100, rkey=9, imm=0xAB)
    pkts = req.transmit(0.0)
    assert [p.opcode for p in pkts] == [Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST_IMM]
    assert [p.bth.psn for p in pkts] == [PSN_MASK - 1, PSN_MASK, 0]  # wraps
    assert pkts[0].reth is not None and (pkts[0].reth.virtual_addr, pkts[0].reth.rkey, pkts[0].reth.dma_length) == (
        0x100, 9, 700)
    assert pkts[1].reth is None and pkts[2].imm == 0xAB
    assert [len(p.payload) for p in pkts] == [256, 256, 188]
    assert [p.bth.ack_req for p in pkts] == [False, False, True]
    assert all(p.bth.dest_qp == 2 for p in pkts)


def test_small_messages_are_only_packets_and_sends_work():
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=1024))
    req.post_write(b"abcd", 0, 1)
    req.post_send(b"hello", imm=5)
    ops = [p.opcode for p in req.transmit(0.0)]
    assert ops == [Opcode.WRITE_ONLY, Opcode.SEND_ONLY_IMM]


def test_window_caps_packets_in_flight():
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=256, window=8))
    req.post_write(bytes(256 * 20), 0, 1)
    assert len(req.transmit(0.0)) == 8
    assert req.transmit(0.0) == []
    ack = Transport(Bth(Opcode.ACKNOWLEDGE, 1, 2), aeth=Aeth.ack(0))
    req.on_ack(ack, 0.001)  # PSNs 0..2 acknowledged
    assert [p.bth.psn for p in req.transmit(0.001)] == [8, 9, 10]


# ---- responder ----


def test_responder_acks_cumulatively_with_msn_and_reacks_duplicates():
    cfg = QpConfig(qpn=2, remote_qpn=1, mtu=256)
    resp = Responder(cfg, {1: MemoryRegion.allocate(1, 1024)})
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=256, ack_every=100))
    req.post_write(bytes(512), 0, 1)
    p0, p1 = req.transmit(0.0)
    assert resp.on_packet(p0) == []  # no AckReq: coalesced
    (ack,) = resp.on_packet(p1)
    assert ack.aeth == Aeth.ack(1) and ack.bth.psn == 1 and ack.bth.dest_qp == 1
    (again,) = resp.on_packet(p1)  # duplicate with AckReq: ACK again, nothing written twice
    assert again == ack and resp.counters["duplicates"] == 1 and len(resp.completions) == 1


def test_gbn_responder_naks_the_expected_psn_once():
    resp = Responder(QpConfig(qpn=2, remote_qpn=1, mtu=256), {1: MemoryRegion.allocate(1, 4096)})
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=256))
    req.post_write(bytes(256 * 4), 0, 1)
    p = req.transmit(0.0)
    assert resp.on_packet(p[0]) == []
    (nak,) = resp.on_packet(p[2])
    assert nak.aeth is not None and nak.aeth.kind == AckType.NAK and nak.aeth.value == NakCode.PSN_SEQUENCE_ERROR
    assert nak.bth.psn == 1
    assert resp.on_packet(p[3]) == []  # one NAK per hole
    assert resp.counters["out_of_order"] == 2


def test_sr_responder_keeps_out_of_order_packets_and_sacks_them():
    resp = Responder(QpConfig(qpn=2, remote_qpn=1, mtu=256, mode=Mode.SR), {1: MemoryRegion.allocate(1, 4096)})
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=256, mode=Mode.SR))
    req.post_write(bytes(range(256)) * 4, 0, 1)
    p = req.transmit(0.0)
    for pkt in (p[2], p[3]):
        (nak,) = resp.on_packet(pkt)
        assert nak.bth.psn == 0 and struct.unpack("!I", nak.payload)[0] == pkt.bth.psn
    resp.on_packet(p[0])
    (ack,) = resp.on_packet(p[1])  # fills the hole: everything through PSN 3 delivered
    assert ack.bth.psn == 3 and len(resp.completions) == 1
    assert bytes(resp.regions[1].buffer[:1024]) == bytes(range(256)) * 4


def test_out_of_window_packets_are_dropped_and_counted():
    resp = Responder(QpConfig(qpn=2, remote_qpn=1, window=8), {})
    far = Transport(Bth(Opcode.SEND_ONLY, 2, 100), b"x")
    assert resp.on_packet(far) == []
    assert resp.counters["out_of_window"] == 1 and resp.epsn == 0


def test_write_outside_the_region_is_a_remote_access_error_and_fails_the_requester():
    sim = Sim(Mode.GBN, region_size=100)
    sim.req.post_write(bytes(200), 0, 7)
    sim.run()
    assert sim.req.error is not None and "remote error" in sim.req.error
    assert sim.resp.counters["remote_access_error"] == 1


# ---- end to end under scripted impairments ----


@pytest.mark.parametrize("mode", [Mode.GBN, Mode.SR])
def test_lossless_delivery(mode):
    sim = Sim(mode)
    data = messages([700, 1, 256, 5000])
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)
    assert sim.req.counters["retransmitted"] == 0


@pytest.mark.parametrize("mode", [Mode.GBN, Mode.SR])
def test_every_third_packet_lost_once(mode):
    lost: set[int] = set()

    def fate(d: str, n: int, t: Transport) -> list[float]:
        if d == "A" and t.bth.psn % 3 == 1 and t.bth.psn not in lost:
            lost.add(t.bth.psn)
            return []
        return [0.0]

    sim = Sim(mode, fate)
    data = messages([3000, 3000])
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)
    if mode == Mode.SR:  # only the holes are resent
        assert sim.req.counters["retransmitted"] == len(lost)
    else:  # go-back-N resends more than the holes
        assert sim.req.counters["retransmitted"] > len(lost)


@pytest.mark.parametrize("mode", [Mode.GBN, Mode.SR])
def test_lost_acks_recovered_by_timeout(mode):
    def fate(d: str, n: int, t: Transport) -> list[float]:
        return [] if d == "B" and n < 3 else [0.0]

    sim = Sim(mode, fate)
    data = messages([256, 256, 256])
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)
    assert sim.req.counters["timeouts"] >= 1
    assert sim.resp.counters["duplicates"] >= 1


def test_psn_wrap_during_transfer():
    sim = Sim(Mode.SR, initial_psn=PSN_MASK - 5)
    data = messages([256 * 12])
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)
    assert sim.req.una == psn_add(PSN_MASK - 5, 12)


def test_dead_peer_fails_the_qp_naming_it_within_the_retry_budget():
    sim = Sim(Mode.GBN, lambda d, n, t: [])
    sim.req.post_write(b"x" * 10, 0, 7)
    sim.run()
    assert sim.req.error is not None
    assert "retry counter exceeded" in sim.req.error and "from B" in sim.req.error
    assert [c.ok for c in sim.req.completions] == [False]
    # 7 retries with doubling capped at 80 ms: bounded time, not a hang.
    assert sim.now < 0.01 + 0.02 + 0.04 + 0.08 * 6


impairment = st.sampled_from(["ok", "ok", "ok", "drop", "dup", "late"])


@settings(max_examples=60, deadline=None)
@given(mode=st.sampled_from([Mode.GBN, Mode.SR]),
       script=st.lists(impairment, min_size=1, max_size=80),
       sizes=st.lists(st.integers(1, 2000), min_size=1, max_size=5),
       start=st.sampled_from([0, PSN_MASK - 3, 12345]))
def test_any_script_of_loss_duplication_and_reordering_delivers_exactly_once(mode, script, sizes, start):
    def fate(d: str, n: int, t: Transport) -> list[float]:
        what = script[n % len(script)] if n < 4 * len(script) else "ok"  # the network heals eventually
        return {"ok": [0.0], "drop": [], "dup": [0.0, 0.0005], "late": [0.003]}[what]

    # Enough retries that no script can exhaust them: this property is about recovery, not giving up.
    sim = Sim(mode, fate, initial_psn=start, retry_limit=40)
    data = messages(sizes, seed=len(script))
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)


# ---- loss recovery details ----


def drop_once(psns: set[int]) -> Fate:
    done: set[int] = set()

    def fate(d: str, n: int, t: Transport) -> list[float]:
        if d == "A" and t.bth.psn in psns and t.bth.psn not in done:
            done.add(t.bth.psn)
            return []
        return [0.0]

    return fate


def test_selective_repeat_timeout_resends_the_oldest_then_follows_partial_acks():
    """A lost last packet: the timer resends only the oldest unacknowledged packet (which the
    receiver already has); its ACK is partial, so the lost one follows at once. Two packets
    resent and one timeout, not the whole window."""
    sim = Sim(Mode.SR, drop_once({7}))
    data = messages([8 * 256])
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)
    assert sim.req.counters["timeouts"] == 1
    assert sim.req.counters["retransmitted"] == 2


def test_reordering_within_the_delay_causes_no_retransmission():
    """Per-packet priorities and spraying reorder packets: a hole that fills within reorder_delay
    is not NAKed, so nothing is resent (without the delay, selective repeat resends it)."""

    def late_every_fifth(d: str, n: int, t: Transport) -> list[float]:
        return [0.002] if d == "A" and t.bth.psn % 5 == 2 else [0.0]

    tolerant = Sim(Mode.SR, late_every_fifth, reorder_delay=0.005)
    eager = Sim(Mode.SR, late_every_fifth)
    data = messages([256 * 20])
    for sim in (tolerant, eager):
        post_all(sim, data)
        sim.run()
        check_delivery(sim, data)
    assert tolerant.req.counters["retransmitted"] == 0 and tolerant.resp.counters["out_of_order"] > 0
    assert eager.req.counters["retransmitted"] > 0


def test_a_real_hole_is_still_naked_after_the_delay():
    sim = Sim(Mode.SR, drop_once({3}), reorder_delay=0.005)
    data = messages([256 * 10])
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)
    assert sim.req.counters["retransmitted"] == 1 and sim.req.counters["timeouts"] == 0  # by NAK, not timeout


# ---- order-tolerant receive (DLCP: placed in any order, loss judged at a message's end) ----


def both_receivers(fate: Fate, data: list[bytes], **kw: object) -> dict[str, Sim]:
    """The same script through today's selective-repeat receiver (a hole judged reorder_delay after
    the first packet past it) and the order-tolerant one; both must deliver exactly."""
    sims = {"reorder-delay": Sim(Mode.SR, fate, **kw), "order-tolerant": Sim(Mode.SR, fate, order_tolerant=True, **kw)}  # type: ignore[arg-type]
    for sim in sims.values():
        post_all(sim, data)
        sim.run()
        check_delivery(sim, data)
    return sims


def test_a_message_overtaken_by_a_higher_priority_one_is_not_resent():
    """Strict priorities: message B (a front layer) overtakes message A (a back layer) queued in a
    lower class, by three reorder delays. Nothing is lost: the order-tolerant receiver waits for A
    (its end is not here, so its holes are not judged); today's receiver NAKs A and it is resent."""

    def priority(d: str, n: int, t: Transport) -> list[float]:
        return [0.006] if d == "A" and t.bth.psn < 8 else [0.0]

    sims = both_receivers(priority, messages([8 * 256, 8 * 256]), reorder_delay=0.002)
    assert sims["reorder-delay"].req.counters["retransmitted"] >= 8  # fails today: the whole of A resent
    tolerant = sims["order-tolerant"]
    assert tolerant.req.counters["retransmitted"] == 0 and tolerant.req.counters["timeouts"] == 0
    assert tolerant.resp.counters["out_of_order"] == 8 and tolerant.resp.counters["holes_judged"] == 0
    assert [c.imm for c in tolerant.resp.completions] == [0, 1]  # RC: completions in order


def sprayed(extra: float, pace: float = 0.0002) -> Fate:
    """Per-packet spraying over two paths: odd PSNs take one `extra` seconds slower; the sender's
    packets leave `pace` apart (a link's serialisation)."""

    def fate(d: str, n: int, t: Transport) -> list[float]:
        if d != "A":
            return [0.0]
        return [n * pace + (extra if t.bth.psn % 2 else 0.0)]

    return fate


def test_sprayed_packets_within_the_reordering_bound_are_never_resent():
    """Two paths 1.5 ms apart, holes judged 2 ms after their message's end: no packet is resent
    and none waits for a timer. Today's receiver judges every hole 2 ms after the first packet
    that passed a hole, and after that at once: it NAKs holes that are still on the slow path."""
    sims = both_receivers(sprayed(0.0015), messages([41 * 256, 41 * 256]), reorder_delay=0.002, window=32)
    assert sims["reorder-delay"].req.counters["retransmitted"] > 0  # fails today
    tolerant = sims["order-tolerant"]
    assert tolerant.req.counters["retransmitted"] == 0 and tolerant.req.counters["timeouts"] == 0
    assert tolerant.resp.counters["out_of_order"] > 20
    # placed on arrival (all but those that came before their message's RETH and waited for it)
    assert tolerant.resp.counters["placed_ahead"] > tolerant.resp.counters["out_of_order"] * 3 // 4


def test_packets_are_placed_on_arrival_once_their_message_address_is_known():
    cfg = QpConfig(qpn=2, remote_qpn=1, mtu=256, mode=Mode.SR, order_tolerant=True, reorder_delay=1.0)
    region = MemoryRegion.allocate(1, 4096)
    resp = OrderTolerantResponder(cfg, {1: region})
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=256, mode=Mode.SR))
    data = bytes(range(256)) * 4
    req.post_write(data, 0x100, 1, imm=9)
    p = req.transmit(0.0)
    assert resp.on_packet(p[2], 0.0) == [] and resp.counters["placed_ahead"] == 0  # no address yet: kept
    (ack,) = resp.on_packet(p[0], 0.0)  # the RETH: p[0] applied in order, p[2] placed at 0x100 + 2 x 256
    assert ack.bth.psn == 0
    assert bytes(region.buffer[0x300:0x400]) == data[512:768] and resp.counters["placed_ahead"] == 1
    assert resp.on_packet(p[3], 0.0) == [] and bytes(region.buffer[0x400:0x500]) == data[768:]
    assert not resp.completions and resp.deadline() == 1.0  # the end is here: its hole judged at 0 + 1 s
    (ack,) = resp.on_packet(p[1], 0.5)  # the hole fills in time: complete, nothing was judged
    assert ack.bth.psn == 3 and [c.imm for c in resp.completions] == [9] and resp.deadline() is None
    assert bytes(region.buffer[0x100:0x500]) == data and resp.counters["holes_judged"] == 0


def test_a_lost_packet_is_naked_when_its_message_end_has_waited():
    sim = Sim(Mode.SR, drop_once({3}), reorder_delay=0.005, order_tolerant=True)
    data = messages([256 * 10])
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)
    assert sim.req.counters["retransmitted"] == 1 and sim.req.counters["timeouts"] == 0  # by NAK, not timeout
    assert sim.resp.counters["holes_judged"] == 1


def test_a_lost_first_packet_is_judged_from_the_run_that_follows_it():
    """The first packet (with the RETH) is lost: its message's extent is the run of packets after it
    up to the LAST; the hole is NAKed after the delay, not left to the sender's timer."""
    sim = Sim(Mode.SR, drop_once({0}), reorder_delay=0.005, order_tolerant=True)
    data = messages([256 * 6])
    post_all(sim, data)
    sim.run()
    check_delivery(sim, data)
    assert sim.req.counters["retransmitted"] == 1 and sim.req.counters["timeouts"] == 0


def test_order_tolerant_receive_needs_selective_repeat():
    with pytest.raises(ValueError, match="selective repeat"):
        QpConfig(qpn=1, remote_qpn=2, mode=Mode.GBN, order_tolerant=True)
    assert isinstance(make_responder(QpConfig(qpn=1, remote_qpn=2, mode=Mode.SR, order_tolerant=True), {}),
                      OrderTolerantResponder)
    assert type(make_responder(QpConfig(qpn=1, remote_qpn=2, mode=Mode.SR), {})) is Responder


@settings(max_examples=60, deadline=None)
@given(script=st.lists(impairment, min_size=1, max_size=80),
       sizes=st.lists(st.integers(1, 2000), min_size=1, max_size=5),
       start=st.sampled_from([0, PSN_MASK - 3, 12345]),
       delay=st.sampled_from([0.0, 0.001, 0.004]))
@example(script=["drop"] * 6, sizes=[1], start=0, delay=0.0)  # once over 40 retries
@example(script=["drop"] * 80, sizes=[2000], start=PSN_MASK - 3, delay=0.004)  # the longest run of drops
def test_order_tolerant_any_script_of_loss_duplication_and_reordering_delivers_exactly_once(script, sizes, start,
                                                                                             delay):
    def fate(d: str, n: int, t: Transport) -> list[float]:
        what = script[n % len(script)] if n < 4 * len(script) else "ok"
        return {"ok": [0.0], "drop": [], "dup": [0.0, 0.0005], "late": [0.003]}[what]

    # The script impairs the first 4 x len(script) packets each way: an all-drop script loses that
    # many in a row in both directions (a one-packet message's every copy, then every ACK), so the
    # QP must be allowed that many timeouts in a row (hypothesis found ['drop'] x 6 over 40 retries).
    retries = 8 * len(script) + 8
    sim = Sim(Mode.SR, fate, initial_psn=start, retry_limit=retries, reorder_delay=delay, order_tolerant=True)
    data = messages(sizes, seed=len(script))
    post_all(sim, data)
    sim.run(limit=60.0 + retries * sim.req_cfg.rto_max)
    check_delivery(sim, data)


# ---- trimmed packets (DLCP: a switch drops a droppable packet's payload, forwards its headers) ----

RECEIVERS = {"selective-repeat": {}, "order-tolerant": {"order_tolerant": True}}
WARMUP = [4 * 256] * 3  # 12 packets received before the message under test: the QP's budget has room


def lossy(receiver: str, trim: Trim, fate: Fate = deliver, budget: float = 0.25) -> Sim:
    """A DLCP receiver (loss budget, reorder delay 3 ms) whose region holds 0xff before anything arrives,
    so that zeros in it were written."""
    sim = Sim(Mode.SR, fate, loss_budget=budget, reorder_delay=0.003, trim=trim, **RECEIVERS[receiver])
    sim.region.buffer[:] = b"\xff" * len(sim.region.buffer)
    return sim


def psns(*wanted: int) -> Trim:
    """Trim the first transmission of these PSNs (the only ones droppable: resends are not)."""
    return lambda t: t.bth.psn in wanted


def slices(data: bytes, mtu: int = 256) -> list[bytes]:
    return [data[i : i + mtu] for i in range(0, len(data), mtu)] or [b""]


def received(sim: Sim, data: list[bytes]) -> list[bytes]:
    offset, out = 0, []
    for d in data:
        out.append(bytes(sim.region.buffer[offset : offset + len(d)]))
        offset += len(d)
    return out


@pytest.mark.parametrize("receiver", RECEIVERS)
@pytest.mark.parametrize(("size", "index"), [(4 * 256 - 100, 0), (4 * 256 - 100, 1), (4 * 256 - 100, 3), (200, 0)],
                         ids=["first", "middle", "last", "only"])
def test_a_trimmed_packet_is_zero_filled_at_once(receiver, size, index):
    """A trimmed First (its RETH places the message), Middle, Last (the rest of the message: 156 bytes,
    with its immediate) or Only (a one-packet message dropped whole) is applied as zeros of its length
    the moment it arrives: no NAK, no resend, no reorder delay waited (3 ms; the run ends well before)."""
    data = messages([*WARMUP, size])
    target = 12 + index
    sim = lossy(receiver, psns(target))
    post_all(sim, data)
    sim.run()
    assert sim.trimmed == 1 and [c.ok for c in sim.req.completions] == [True] * 4
    got = received(sim, data)
    assert got[:3] == data[:3]
    want = slices(data[3])
    want[index] = bytes(len(want[index]))
    assert slices(got[3]) == want  # zeros exactly where the trimmed payload was, nothing else touched
    assert [c.zero_filled for c in sim.resp.completions] == [0, 0, 0, 1] and sim.resp.completions[3].imm == 3
    assert sim.req.counters["retransmitted"] == 0 and sim.req.counters["naks"] == 0
    assert sim.now < 0.003 and sim.resp.counters["holes_judged"] == 0


@pytest.mark.parametrize("receiver", RECEIVERS)
@pytest.mark.parametrize(("trim_at", "lose_at"), [(14, 17), (17, 14)], ids=["trimmed-ahead-of-a-hole", "behind-a-hole"])
def test_a_loss_without_notification_is_resent_never_zero_filled(receiver, trim_at, lose_at):
    """One packet trimmed, another lost silently (a full queue, fault injection) in the same message,
    either first: the trimmed one reads as zeros, the lost one is resent (by NAK) and exact."""
    data = messages([*WARMUP, 8 * 256])
    sim = lossy(receiver, psns(trim_at), drop_once({lose_at}))
    post_all(sim, data)
    sim.run()
    got = slices(received(sim, data)[3])
    want = slices(data[3])
    assert got[lose_at - 12] == want[lose_at - 12]
    want[trim_at - 12] = bytes(256)
    assert got == want and sim.resp.completions[3].zero_filled == 1
    assert sim.req.counters["retransmitted"] == 1 and sim.req.counters["timeouts"] == 0
    resent = [p for p in sim.sent_packets if p.bth.psn == lose_at]
    assert len(resent) == 2 and not resent[1].bth.resv7 & DROPPABLE


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_over_the_message_budget_a_trimmed_packet_is_naked_and_resent_not_droppable(receiver):
    """A budget of 25 % lets an 8-packet message lose 2 packets: the third trimmed one is NAKed when it is
    the expected PSN (not left to a timer) and resent without the droppable bit, so it gets through."""
    data = messages([*WARMUP, 8 * 256])
    sim = lossy(receiver, psns(13, 15, 16))
    post_all(sim, data)
    sim.run()
    got, want = slices(received(sim, data)[3]), slices(data[3])
    assert sim.resp.completions[3].zero_filled == 2 and sim.resp.counters["over_loss_budget"] == 1
    assert got[1] == got[3] == bytes(256) and got[4] == want[4]  # 13 and 15 zero-filled, 16 resent
    assert sim.req.counters["naks"] >= 1 and sim.req.counters["retransmitted"] == 1
    assert sim.req.counters["timeouts"] == 0
    resent = [p for p in sim.sent_packets if p.bth.psn == 16]
    assert len(resent) == 2 and resent[0].bth.resv7 & DROPPABLE and not resent[1].bth.resv7 & DROPPABLE


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_the_qp_budget_bounds_zero_filling_and_resends_are_never_droppable(receiver):
    """The switch trims every droppable packet: the receiver zero-fills no more than the budget of what it
    has received (none of a fresh QP's first packets), the rest is resent; resends are never droppable
    (a droppable resend would be trimmed again, forever)."""
    data = messages([1000, 256, 3 * 256, 100, 2000, 50, 256 * 6])
    sim = lossy(receiver, lambda t: True, budget=0.2)
    post_all(sim, data)
    sim.run()
    assert [c.ok for c in sim.req.completions] == [True] * len(data)
    zeroed, accepted = sim.resp.zero_filled, sim.resp.counters["accepted"]
    assert 0 < zeroed <= 0.2 * accepted and zeroed == sum(c.zero_filled for c in sim.resp.completions)
    assert sim.resp.completions[0].zero_filled == 0  # a fresh QP has no budget yet
    assert sim.req.counters["retransmitted"] == sim.trimmed - zeroed  # every trimmed packet not zero-filled
    first = {p.bth.psn for p in sim.sent_packets if p.bth.resv7 & DROPPABLE}
    resends = [p for p in sim.sent_packets if not p.bth.resv7 & DROPPABLE]
    assert len(first) == len(sim.sent_packets) - len(resends) and resends and all(p.bth.psn in first for p in resends)


def test_trimmed_packets_are_resent_by_a_receiver_without_a_budget():
    """Go-back-N or no loss budget: a trimmed packet is a loss like any other (the sum stays exact)."""
    for sim in (Sim(Mode.GBN, trim=psns(2, 5)), Sim(Mode.SR, trim=psns(2, 5))):
        data = messages([256 * 8])
        post_all(sim, data)
        sim.run()
        check_delivery(sim, data)
        assert sim.trimmed == 2 and sim.resp.zero_filled == 0 and sim.resp.counters["trimmed"] == 2


def test_a_resend_replaces_a_trimmed_copy_waiting_ahead_of_a_hole():
    """A trimmed packet buffered ahead of a hole, then the same PSN with its payload: the data is kept."""
    resp = OrderTolerantResponder(QpConfig(qpn=2, remote_qpn=1, mtu=256, mode=Mode.SR, order_tolerant=True,
                                           loss_budget=0.5, reorder_delay=1.0), {1: MemoryRegion.allocate(1, 4096)})
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=256, mode=Mode.SR))
    data = bytes(range(256)) * 4
    req.post_write(data, 0, 1, imm=1)
    p = req.transmit(0.0)
    resp.on_packet(trimmed(p[2]), 0.0)
    resp.on_packet(p[2], 0.0)
    resp.on_packet(p[0], 0.0)
    resp.on_packet(p[1], 0.0)
    resp.on_packet(p[3], 0.0)
    assert bytes(resp.regions[1].buffer[:1024]) == data and resp.zero_filled == 0


trim_impairment = st.sampled_from(["ok", "ok", "trim", "drop", "dup", "late"])


@settings(max_examples=60, deadline=None)
@example(receiver="selective-repeat", script=["trim", "drop"], sizes=[1, 257], budget=0.0, start=0)  # CI found it:
# the NAK voiding the SACK of a trimmed copy was lost, and a timeout never resent the SACKed oldest packet
@given(receiver=st.sampled_from(list(RECEIVERS)), script=st.lists(trim_impairment, min_size=1, max_size=60),
       sizes=st.lists(st.integers(1, 2000), min_size=1, max_size=6), budget=st.sampled_from([0.0, 0.1, 0.5]),
       start=st.sampled_from([0, PSN_MASK - 3]))
def test_any_script_with_trimming_delivers_every_message_exact_but_for_zero_filled_packets(receiver, script, sizes,
                                                                                          budget, start):
    """Loss, duplication, reordering and trimming in any mix: every message completes once, in order; each
    of its packets reads as what was sent or, for exactly the packets counted zero-filled, as zeros; and
    the receiver never zero-fills more than its budget."""
    steps = iter(range(10**6))

    def fate(d: str, n: int, t: Transport) -> list[float]:
        what = script[n % len(script)] if n < 4 * len(script) else "ok"
        return {"ok": [0.0], "trim": [0.0], "drop": [], "dup": [0.0, 0.0005], "late": [0.003]}[what]

    def trim(t: Transport) -> bool:
        k = next(steps)
        return k < 4 * len(script) and script[k % len(script)] == "trim"

    retries = 8 * len(script) + 8
    sim = Sim(Mode.SR, fate, initial_psn=start, retry_limit=retries, loss_budget=budget, reorder_delay=0.001,
              trim=trim, **RECEIVERS[receiver])
    sim.region.buffer[:] = b"\xff" * len(sim.region.buffer)
    data = messages(sizes, seed=len(script))
    post_all(sim, data)
    sim.run(limit=60.0 + retries * sim.req_cfg.rto_max)
    assert [c.ok for c in sim.req.completions] == [True] * len(data), sim.req.error
    assert [c.imm for c in sim.resp.completions] == list(range(len(data)))
    for c, sent, got in zip(sim.resp.completions, data, received(sim, data), strict=True):
        pieces = list(zip(slices(sent), slices(got), strict=True))
        assert all(g in (s, bytes(len(s))) for s, g in pieces)
        assert sum(g != s for s, g in pieces) == c.zero_filled
    assert sim.resp.zero_filled <= budget * sim.resp.counters["accepted"] + 1e-9
