"""tests/ns3/qp_script.py without the simulator: its scenarios speak the simulator's transport format, its wire does
what the scenario says, it refuses ties, and `differences` sees a changed packet (the conformance test itself,
against gs-qp-script, is tests/ns3/test_transport_conformance.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradswitch.roce.qp import Mode
from gradswitch.sim.sim_config import transport_json
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role
from tests.ns3.qp_script import (
    Level,
    Message,
    Scenario,
    ScenarioError,
    TransportSettings,
    WireAction,
    differences,
    fnv1a,
    message_values,
    on,
    run_python,
)

ONE = (Message(4 * 1024, imm=7),)


def test_transport_settings_have_the_simulators_keys():
    nodes = (Node(0, Role.WORKER, "h1", "10.0.0.1"), Node(1, Role.WORKER, "h2", "10.0.0.2"))
    job = JobConfig(Algorithm.RING, nodes)
    assert set(TransportSettings().to_json()) == set(transport_json(job))


def test_the_wire_drops_duplicates_delays_and_trims_the_packets_it_is_told_to():
    s = Scenario("wire", TransportSettings(Mode.SR, loss_budget=0.5), ONE, delay_s=7e-6,
                 data=(on(0, WireAction.DUPLICATE, 1e-6), on(1, WireAction.DROP), on(2, WireAction.TRIM),
                       on(3, WireAction.DELAY, 3e-6)))
    t = run_python(s)
    assert [p.fate for p in t.data[:4]] == ["duplicated", "dropped", "trimmed", "delayed"]
    assert t.responder_counters["duplicates"] == 1 and t.responder_counters["trimmed"] == 1
    assert t.data[4].psn == 1 and t.data[4].retx  # the dropped packet resent
    assert [c.ok for c in t.sent] == [True] and t.received[0].length == 4096


def test_a_clean_exchange_delivers_the_bytes_posted():
    t = run_python(Scenario("clean", TransportSettings(), ONE, delay_s=7e-6))
    assert t.received[0].fnv == fnv1a(message_values(0, 4096)) and t.received[0].imm == 7
    assert [p.ack_req for p in t.data] == [False, False, False, True]
    assert t.sent[0].t_ps == 14_000_000  # the ACK of the last packet, one round trip after it left


def test_a_timer_due_when_a_packet_arrives_is_refused():
    # 10 us one way, a 20 us RTO: the ACK of the window comes back as its timer falls due
    s = Scenario("tie", TransportSettings(rto_s=20e-6), ONE, delay_s=10e-6)
    with pytest.raises(ScenarioError, match="timer"):
        run_python(s)


def test_differences_see_a_changed_packet_and_ignore_it_at_the_outcome_level():
    t = run_python(Scenario("one-loss", TransportSettings(Mode.SR), ONE, delay_s=7e-6,
                            data=(on(1, WireAction.DROP),)))
    assert differences(t, t) == []
    changed = replace(t, implementation="changed", data=(*t.data[:2], replace(t.data[2], ack_req=True), *t.data[3:]))
    assert any("data packet #2" in d for d in differences(t, changed))
    assert differences(t, changed, Level.OUTCOME) == []


def test_a_bad_scenario_is_refused():
    with pytest.raises(ValueError, match="multiple of 4"):
        Scenario("odd", TransportSettings(), (Message(6),))
    with pytest.raises(ValueError, match="only data packets"):
        Scenario("trim-ack", TransportSettings(), ONE, acks=(on(0, WireAction.TRIM),))
    with pytest.raises(ValueError, match="earlier message"):
        Scenario("after-itself", TransportSettings(), (Message(4, after=0),))
