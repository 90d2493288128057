"""The RC transport's two implementations agree: gradswitch/roce/qp.py (the testbed's hosts) and the simulator's RcQp
(gradswitch/sim/ns3/model/gs-qp.cc) run the same scripted exchanges and must send the same packets.

Each scenario is one requester QP and one responder QP over a scripted wire (tests/ns3/qp_script.py): the same
transport settings, the same posted WRITEs, the same fixed delay, and the same actions on the k-th packet of
each direction (drop, duplicate, delay, trim). `run_python` drives gradswitch/roce/qp.py with an event loop of its own,
`run_simulator` the simulator's `gs-qp-script` (ns-3's event loop); the two traces are compared by
`differences`:

Compared (a wire without a rate: `Level.PACKETS`):
- every packet each side put on the wire, in order: data packets' PSN, opcode, AckReq, retransmission flag,
  payload and wire bytes; ACKs' and NAKs' PSN, kind, NAK code, MSN and SACK; what the wire did to it;
- when each was sent, each completion's time, to 1 ns (both clocks are picoseconds; the QPs' timers convert
  seconds to picoseconds each its own way, so they may differ by a picosecond, never more);
- the completions each side reported: the requester's work requests in order and whether each succeeded,
  the responder's WRITEs (length, immediate, address, packets zero-filled, the bytes it holds);
- both sides' counters (but gradswitch/roce/qp.py's `rnr_naks` and `placed_ahead`, which tests/unit/test_sim_counters.py
  documents as Python's only), the failure's reason, whether the requester is idle, its RTO and smoothed RTT
  at the end (to 1e-9 relative).
Not compared: an ACK's credit field (gradswitch/roce/qp.py writes "no credits", the simulator models none), the DLCP
class bits of a data packet (a marker's business, absent here), the QP numbers in the packets (the simulator's packets
name nodes) and the order of events of the two directions at one instant (each direction is compared on its own).

With a rate (`Level.OUTCOME`) the two NICs differ by design (docs/simulator.md: the simulator's NIC pulls one
packet when its link is free, gradswitch/roce/qp.py hands a whole batch to the kernel's queue), so an ACK arriving
while a batch waits changes what the simulator sends next and not what Python's queue holds: those scenarios compare
what the applications saw (completions, bytes, failure, packets accepted and zero-filled) and nothing else.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from typing import Any

import pytest

from gradswitch.roce.psn import PSN_MASK
from gradswitch.roce.qp import Mode
from gradswitch.sim.build import qp_script_binary
from tests.ns3.qp_script import (
    Level,
    Message,
    NicPull,
    Scenario,
    Trace,
    TransportSettings,
    WireAction,
    WireRule,
    differences,
    on,
    run_python,
    run_simulator,
)

pytestmark = pytest.mark.ns3

DROP, DUP, DELAY, TRIM = WireAction.DROP, WireAction.DUPLICATE, WireAction.DELAY, WireAction.TRIM
GBN = TransportSettings(Mode.GBN)
SR = TransportSettings(Mode.SR)
# 7 us one way against a 1 ms RTO: no timer falls due at the instant a packet arrives (the drivers refuse such
# a tie: which goes first would be the event lists' choice, not the transport's).
DELAY_S = 7e-6
# One WRITE of each shape: First/Middle/Last with immediate (5 packets), Only (1), First/Last without (2).
THREE = (Message(5 * 1024 - 8, imm=0x11), Message(100), Message(2048, at_s=30e-6, imm=0x22))
EIGHT = (Message(8 * 1024, imm=1),)
# 4 packets, 8 packets, and 4 more posted when the first 4 are acknowledged.
AFTER_FIRST = (Message(4096, imm=1), Message(8192, imm=2), Message(4096, imm=3, after=0))


def replace_t(t: TransportSettings, **changes: Any) -> TransportSettings:
    return replace(t, **changes)


def _s(name: str, t: TransportSettings, messages: tuple[Message, ...], **kw: Any) -> Scenario:
    return Scenario(name, t, messages, delay_s=DELAY_S, **kw)


def scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    for t in (GBN, SR):
        m = str(t.mode)
        out += [
            _s(f"clean-{m}", t, THREE),
            _s(f"one-data-loss-{m}", t, THREE, data=(on(2, DROP),)),
            _s(f"two-holes-{m}", t, EIGHT, data=(on(1, DROP), on(4, DROP))),
            _s(f"a-resend-lost-{m}", t, EIGHT, data=(on(2, DROP), on(8, DROP))),
            _s(f"first-ack-lost-{m}", t, EIGHT, acks=(on(0, DROP),)),
            _s(f"every-ack-lost-once-{m}", t, THREE, acks=(WireRule(0, DROP, 3),)),
            _s(f"data-duplicated-{m}", t, THREE, data=(on(1, DUP), on(4, DUP, by_s=19.5e-6))),
            _s(f"ack-duplicated-{m}", t, EIGHT, acks=(on(0, DUP, by_s=3e-6),)),
            _s(f"reordered-in-window-{m}", t, EIGHT, data=(on(1, DELAY, by_s=5e-6), on(5, DELAY, by_s=1e-6))),
            _s(f"ack-overtaken-{m}", t, EIGHT, acks=(on(0, DELAY, by_s=9e-6),)),
            _s(f"last-packet-lost-{m}", replace_t(t, ack_every=8), (Message(3 * 1024, imm=5),),
               data=(on(2, DROP),)),
            _s(f"tail-of-window-lost-{m}", t, EIGHT, data=(WireRule(5, DROP, 7),)),
            _s(f"retry-limit-{m}", replace_t(t, retry_limit=3), THREE, data=(WireRule(2, DROP),)),
            _s(f"acks-never-arrive-{m}", replace_t(t, retry_limit=2), THREE, acks=(WireRule(0, DROP),)),
            _s(f"window-caps-flight-{m}", replace_t(t, window=8, ack_every=2), (Message(40 * 1024, imm=9),),
               data=(on(3, DROP), on(17, DROP))),
            # The tail lost again and again (go-back-N resends 3 packets a timeout, selective repeat 1): the RTO
            # doubles (up to rto_max), a retry limit of 5 is not reached.
            _s(f"rto-doubles-then-recovers-{m}", replace_t(t, ack_every=8, retry_limit=5), (Message(3 * 1024),),
               data=(WireRule(2, DROP, 8 if t.mode == Mode.GBN else 6),)),
            _s(f"rto-max-caps-doubling-{m}", replace_t(t, ack_every=8, retry_limit=5, rto_max_s=2.5e-3),
               (Message(3 * 1024),), data=(WireRule(2, DROP, 8 if t.mode == Mode.GBN else 6),)),
            # A floor below the RTT: the RTO is the estimate (srtt + 4 rttvar) of RTTs the delays vary.
            _s(f"rto-from-rtt-estimate-{m}", replace_t(t, rto_s=20e-6), (*THREE, Message(4096, at_s=200e-6)),
               data=(on(3, DELAY, by_s=3.3e-6), on(6, DELAY, by_s=11.1e-6), on(9, DROP)),
               acks=(on(1, DELAY, by_s=1.7e-6),)),
            _s(f"nak-lost-{m}", t, THREE, data=(on(2, DROP),), acks=(on(0, DROP),)),
            _s(f"stop-and-wait-{m}", replace_t(t, window=1, ack_every=1), THREE, data=(on(3, DROP),),
               acks=(on(5, DROP),)),
            # A copy so late that the responder is more than 4 windows past it: out of its window, ignored.
            _s(f"stale-copy-out-of-window-{m}", replace_t(t, window=4, ack_every=1), (Message(24 * 1024),),
               data=(on(0, DUP, by_s=301e-6),)),
            _s(f"first-packet-lost-{m}", t, THREE, data=(on(0, DROP),)),
            _s(f"whole-message-lost-{m}", t, THREE, data=(WireRule(5, DROP, 5),)),
            _s(f"psn-wraps-{m}", t, EIGHT, initial_psn=PSN_MASK - 2, data=(on(3, DROP),)),
            _s(f"psn-wraps-ack-lost-{m}", t, THREE, initial_psn=PSN_MASK - 5, acks=(on(1, DROP),)),
            # DLCP: trimmed packets zero-filled within the loss budget (max(1, floor(0.25 x 8)) = 2 a message),
            # NAKed without a SACK beyond it and resent whole.
            _s(f"trimmed-within-budget-{m}", replace_t(t, loss_budget=0.25), EIGHT,
               data=(on(2, TRIM), on(5, TRIM))),
            _s(f"trimmed-over-budget-{m}", replace_t(t, loss_budget=0.25), EIGHT,
               data=(on(1, TRIM), on(2, TRIM), on(3, TRIM))),
            _s(f"trimmed-without-budget-{m}", t, EIGHT, data=(on(4, TRIM),)),
            _s(f"trimmed-last-{m}", replace_t(t, loss_budget=0.25), EIGHT, data=(on(7, TRIM),)),
        ]
    out += [
        # Selective repeat: a trimmed copy past a hole is SACKed, then NAKed (no loss budget) once the hole is
        # filled; that NAK lost, the timeout must resend the SACKed packet the responder reneged on (a bug fixed
        # in both by hand once).
        _s("sr-reneged-sack", SR, EIGHT, data=(on(1, DROP), on(2, TRIM)), acks=(on(6, DROP),)),
        _s("sr-trim-behind-hole-within-budget", replace_t(SR, loss_budget=0.25), EIGHT,
           data=(on(1, DROP), on(2, TRIM))),
        # Holes judged reorder_delay after the first packet past them (DLCP's reordering), not at once.
        _s("sr-reorder-delay", replace_t(SR, reorder_delay_s=41e-6), EIGHT,
           data=(on(1, DELAY, by_s=19.5e-6), on(4, DROP))),
        # DLCP's order-tolerant receiver: a hole is judged reorder_delay after its message's last packet arrived.
        _s("order-tolerant-reordering", replace_t(SR, order_tolerant=True, reorder_delay_s=31e-6), THREE,
           data=(on(1, DELAY, by_s=19.5e-6),)),
        _s("order-tolerant-loss", replace_t(SR, order_tolerant=True, reorder_delay_s=31e-6), THREE,
           data=(on(1, DROP), on(3, DROP))),
        _s("sr-reorder-delay-resend-lost", replace_t(SR, reorder_delay_s=41e-6), EIGHT,
           data=(on(2, DROP), on(8, DROP))),
        # The first packet (its RETH) lost: the run after it, up to its message's last packet, gives the hole's
        # message (no RETH needed to judge it).
        _s("order-tolerant-first-lost", replace_t(SR, order_tolerant=True, reorder_delay_s=31e-6), THREE,
           data=(on(0, DROP),)),
        # A whole message lost behind a complete one: the hole's extent is unknown, the requester's timer recovers.
        _s("order-tolerant-whole-message-lost", replace_t(SR, order_tolerant=True, reorder_delay_s=31e-6), THREE,
           data=(on(5, DROP),)),
        _s("order-tolerant-no-delay", replace_t(SR, order_tolerant=True), THREE, data=(on(1, DROP), on(3, DROP))),
        _s("order-tolerant-trimmed", replace_t(SR, order_tolerant=True, reorder_delay_s=31e-6, loss_budget=0.2),
           THREE, data=(on(1, DROP), on(2, TRIM))),
        # A DLCP job's selective repeat without reordering (loss budget, no reorder delay): holes NAKed at once,
        # the packet that arrived SACKed (the simulator SACKed its first buffered packet instead: the requester
        # learnt of no later hole, and the second one waited for the RTO).
        _s("sr-loss-budget-hole", replace_t(SR, loss_budget=0.1), EIGHT, data=(on(1, DROP),)),
        _s("sr-loss-budget-two-holes", replace_t(SR, loss_budget=0.1), EIGHT, data=(on(1, DROP), on(4, DROP))),
    ]
    for t in (GBN, SR):
        m = str(t.mode)
        out += [
            # The application posts its next WRITE when one completes: the simulator's job nodes from within
            # RcQp's callback, gradswitch/roce/qp.py's once they have collected the completion. Completed by an ACK, the
            # simulator's NIC may take the new packets at once (GsDevice::Kick); completed by a NAK, after the
            # NAK's event (at once: reentrant()).
            _s(f"post-on-completion-{m}", t, AFTER_FIRST, pull=NicPull.AT_ONCE),
            _s(f"post-on-completion-by-nak-{m}", t, AFTER_FIRST, data=(on(4, DROP),), acks=(on(0, DROP),)),
        ]
    return out


def paced() -> list[Scenario]:
    """At 1 Gb/s a 1 KiB packet takes 8.6 us on the link, longer than the 7 us delay: ACKs come back while the
    requester's packets still queue, where the two NICs differ by design."""
    out = []
    for t in (GBN, SR):
        m = str(t.mode)
        out += [
            _s(f"paced-clean-{m}", t, THREE + EIGHT, rate_bps=1e9),
            _s(f"paced-loss-{m}", t, (*THREE, Message(16 * 1024, imm=3)), rate_bps=1e9,
               data=(on(2, DROP), on(12, DROP)), acks=(on(2, DROP),)),
        ]
    return out


def reentrant() -> list[Scenario]:
    """A NAK acknowledges the first WRITE; the application posts its next one from the completion callback and
    the simulator's NIC, its link free, pulls at once (GsDevice::Kick). RcQp reports the completion once the NAK
    is handled whole (its go-back, or its hole's resend, first), as gradswitch/roce/qp.py's applications see it."""
    return [_s(f"post-from-callback-during-nak-{t.mode}", t, AFTER_FIRST, pull=NicPull.AT_ONCE,
               data=(on(4, DROP),), acks=(on(0, DROP),)) for t in (GBN, SR)]


SCENARIOS = {s.name: s for s in scenarios() + reentrant()}
PACED = {s.name: s for s in paced()}


def _explain(s: Scenario, py: Trace, ns: Trace, diffs: list[str]) -> str:
    head = f"{s.name}: gradswitch/roce/qp.py and the simulator's RcQp disagree:"
    return "\n".join([head, *diffs, py.table(), ns.table()])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_both_transports_send_the_same_packets(name, tmp_path):
    s = SCENARIOS[name]
    py, ns = run_python(s), run_simulator(s, tmp_path)
    diffs = differences(py, ns)
    assert not diffs, _explain(s, py, ns, diffs)


@pytest.mark.parametrize("name", sorted(PACED))
def test_paced_exchanges_end_the_same(name, tmp_path):
    s = PACED[name]
    py, ns = run_python(s), run_simulator(s, tmp_path)
    diffs = differences(py, ns, Level.OUTCOME)
    assert not diffs, _explain(s, py, ns, diffs)
    assert py.error is None and ns.error is None and len(py.sent) == len(s.messages)


def test_a_bad_scenario_is_one_error_line(tmp_path):
    doc = _s("bad", GBN, EIGHT).to_json()
    doc["data"] = [{"first": 0, "last": None, "action": "explode", "by_s": 0.0}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run([str(qp_script_binary()), "--scenario", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: scenario.data[0].action = 'explode': not one of drop, duplicate, delay, trim"
