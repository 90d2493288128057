"""Faults as input (gradswitch/topology/faults.py): the command line's form, a spec's table, and the one-line
refusals."""

from __future__ import annotations

import pytest

from gradswitch.experiment.spec import SpecError, spec_from_dict
from gradswitch.topology.faults import Fault, FaultError, FaultKind, fault_from_dict, fault_problems, parse_fault
from gradswitch.topology.generators import build_topology

LEAFSPINE = build_topology("leafspine", leaves=2, spines=2, hosts_per_leaf=2)


def test_the_command_line_form_reads_every_kind_and_option_and_prints_back_the_same():
    cases = {
        "switch-crash:spine1@3,restart=5": Fault(FaultKind.SWITCH_CRASH, "spine1", 3.0, restart_s=5.0),
        "link-down:leaf1-spine2@2.5": Fault(FaultKind.LINK_DOWN, "leaf1-spine2", 2.5),
        "link-flap:spine1-leaf2@1,down=0.5,up=2,flaps=4": Fault(FaultKind.LINK_FLAP, "spine1-leaf2", 1.0, down_s=0.5,
                                                               up_s=2.0, flaps=4),
        "worker-crash:2@4s": Fault(FaultKind.WORKER_CRASH, "2", 4.0),
        "slow-worker:h3@0,factor=3,rate=5": Fault(FaultKind.SLOW_WORKER, "h3", 0.0, factor=3.0, rate_mbps=5.0),
    }
    for text, fault in cases.items():
        assert parse_fault(text) == fault
        assert parse_fault(fault.label) == fault
        assert fault_from_dict(fault.to_dict()) == fault


@pytest.mark.parametrize("text, says", [
    ("spine1@3", "write KIND:TARGET@SECONDS"),
    ("switch-crash:spine1", "write KIND:TARGET@SECONDS"),
    ("power-cut:spine1@3", "kind 'power-cut' is not one of switch-crash, switch-hang, link-down"),
    ("switch-crash:spine1@soon", "the time after @ = 'soon': a number"),
    ("switch-crash:spine1@3,reboot=2", "option 'reboot=2' is not one of restart="),
    ("link-flap:leaf1-spine1@1,flaps=2.5", "flaps = '2.5': a whole number"),
])
def test_a_bad_command_line_fault_is_one_line_naming_it_and_the_form(text, says):
    with pytest.raises(FaultError) as e:
        parse_fault(text)
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text, says", [
    ("switch-crash:spine3@1", "'spine3' is not a switch of this topology (its switches: leaf1, leaf2, spine1, spine2)"),
    ("switch-crash:h1@1", "'h1' is not a switch"),
    ("link-down:leaf1-leaf2@1", "'leaf1-leaf2' is not a link of this topology"),
    ("link-down:spine1@1", "'spine1' is not a link"),
    ("worker-crash:4@1", "'4' is not a worker: give its rank (0..3) or its host"),
    ("slow-worker:1@1", "says neither how slow"),
    ("slow-worker:1@1,factor=0.5", "factor=0.5: its computation at least 1 times as long"),
    ("switch-crash:spine1@1,restart=0", "restart=0.0: seconds above 0"),
    ("worker-crash:1@-1", "at -1.0 s: a time of 0 or more seconds"),
    ("link-down:leaf1-spine1@1,flaps=2", "flaps= does not apply to link-down (its options: down)"),
])
def test_a_fault_the_topology_cannot_run_is_refused_naming_the_target_and_what_exists(text, says):
    problems = fault_problems((parse_fault(text),), LEAFSPINE, workers=4)
    assert len(problems) == 1 and says in problems[0], problems


def test_good_faults_have_no_problem_and_links_read_in_either_order():
    good = tuple(parse_fault(t) for t in ("switch-crash:spine1@3", "link-down:spine2-leaf1@1,down=2",
                                          "worker-crash:h2@1", "slow-worker:3@0,factor=2"))
    assert fault_problems(good, LEAFSPINE, workers=4) == []


def test_windows_say_when_the_target_is_out():
    assert parse_fault("switch-crash:spine1@3,restart=5").windows() == [(3.0, 8.0)]
    assert parse_fault("link-down:leaf1-spine1@2").windows() == [(2.0, None)]
    assert parse_fault("link-flap:leaf1-spine1@1,down=0.5,up=1,flaps=2").windows() == [(1.0, 1.5), (2.5, 3.0)]


def test_a_spec_takes_faults_as_tables_or_as_the_command_lines_strings_and_refuses_bad_ones_in_one_line():
    spec = spec_from_dict({"topo": "leafspine", "faults": [{"kind": "switch-crash", "target": "spine1", "at_s": 3},
                                                          "worker-crash:1@2"]})
    assert spec.faults.faults == (Fault(FaultKind.SWITCH_CRASH, "spine1", 3.0), Fault(FaultKind.WORKER_CRASH, "1", 2.0))
    with pytest.raises(SpecError, match=r"faults\[0\]\.kind = 'meteor': one of switch-crash"):
        spec_from_dict({"faults": [{"kind": "meteor", "target": "s1", "at_s": 1}]})
    with pytest.raises(SpecError, match=r"faults\[0\]: give at_s"):
        spec_from_dict({"faults": [{"kind": "switch-crash", "target": "s1"}]})
    problems = spec_from_dict({"topo": "leafspine", "faults": ["switch-crash:spine7@1"]}).problems()
    assert any("'spine7' is not a switch" in p for p in problems), problems


def test_a_fault_record_says_the_times_to_detect_and_recover_and_reads_back():
    from gradswitch.workload.fault_record import FaultOutcome, FaultRecord

    record = FaultRecord(parse_fault("switch-crash:spine1@3,restart=5"), 3.01, FaultOutcome.RECOVERED, detected_s=3.2,
                         recovered_s=3.9, iterations_lost=1, fallback="ring", detail="NetReduce fell back to ring")
    assert record.time_to_detect_s == pytest.approx(0.19) and record.time_to_recover_s == pytest.approx(0.89)
    assert FaultRecord.from_dict(record.to_dict()) == record
    assert record.to_dict()["label"] == "switch-crash:spine1@3,restart=5"


def test_a_patch_has_short_stable_names_of_its_own() -> None:
    """Linux takes interface names of 15 characters at most; a link's patch is named alike in every process
    (Testbed.set_link finds the one the network made), and two links never share one."""
    from gradswitch.net.patch_links import Patch

    a = Patch.between("leaf1-eth3", "spine1-eth1")
    assert a == Patch.between("leaf1-eth3", "spine1-eth1") != Patch.between("leaf1-eth4", "spine2-eth1")
    long = Patch.between("edge0_0-eth12", "aggregate0_1-eth12")
    assert all(len(n) <= 15 for p in (a, long) for n in (p.a_end, p.b_end, p.bridge))
    assert len({a.a_end, a.b_end, a.bridge}) == 3


def test_a_switch_hang_reads_from_every_form_with_its_release_and_prints_back_the_same():
    hang = Fault(FaultKind.SWITCH_HANG, "spine1", 3.0, release_s=5.0)
    assert parse_fault("switch-hang:spine1@3,release=5") == hang and hang.label == "switch-hang:spine1@3,release=5"
    assert fault_from_dict(hang.to_dict()) == hang
    assert fault_from_dict({"kind": "switch-hang", "target": "spine1", "at_s": 3, "release_s": 5}) == hang
    spec = spec_from_dict({"topo": "leafspine", "faults": ["switch-hang:spine1@3"]})
    assert spec.faults.faults == (Fault(FaultKind.SWITCH_HANG, "spine1", 3.0),) and spec.problems() == []
    assert hang.windows() == [(3.0, 8.0)] and parse_fault("switch-hang:spine1@3").windows() == [(3.0, None)]
    assert fault_problems((hang,), LEAFSPINE, workers=4) == []


@pytest.mark.parametrize("text, says", [
    ("switch-hang:spine3@1", "fault switch-hang:spine3@1: 'spine3' is not a switch of this topology (its switches: "
                             "leaf1, leaf2, spine1, spine2)"),
    ("switch-hang:h1@1", "'h1' is not a switch"),
    ("switch-hang:spine1@1,release=0", "release=0.0: seconds above 0 (leave it out: stays hung)"),
    ("switch-hang:spine1@1,restart=2", "restart= does not apply to switch-hang (its options: release)"),
    ("switch-crash:spine1@1,release=2", "release= does not apply to switch-crash (its options: restart)"),
    ("link-down:leaf1-spine1@1,release=2", "release= does not apply to link-down (its options: down)"),
])
def test_a_switch_hang_the_topology_cannot_run_is_refused_in_one_line(text, says):
    problems = fault_problems((parse_fault(text),), LEAFSPINE, workers=4)
    assert len(problems) == 1 and says in problems[0] and "\n" not in problems[0], problems


def test_a_bad_switch_hang_on_the_command_line_is_one_line():
    with pytest.raises(FaultError) as e:
        parse_fault("switch-hang:spine1@3,release=soon")
    assert "release = 'soon': a number" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(FaultError) as e:
        parse_fault("switch-hang:spine1@3,resume=2")
    assert "option 'resume=2' is not one of restart=, release=" in str(e.value)
    with pytest.raises(FaultError, match="kind 'switch-hung' is not one of switch-crash, switch-hang, link-down"):
        parse_fault("switch-hung:spine1@3")


def test_a_fault_not_injected_is_no_effect_says_why_and_never_recovered():
    from gradswitch.workload.fault_record import FaultOutcome, FaultRecord

    fault = parse_fault("switch-hang:spine1@3")
    record = FaultRecord.not_injected_because(fault, "hang failed: NetworkError: switch spine1 is not running")
    assert not record.injected and record.outcome == FaultOutcome.NO_EFFECT
    raw = record.to_dict()
    assert raw["injected"] is False and raw["not_injected"].startswith("hang failed: NetworkError")
    assert FaultRecord.from_dict(raw) == record
    with pytest.raises(ValueError, match=r"not injected \(the switch was gone\), so no-effect, not recovered"):
        FaultRecord(fault, 3.0, FaultOutcome.RECOVERED, not_injected="the switch was gone")
    ok = FaultRecord(fault, 3.0, FaultOutcome.RECOVERED)
    assert ok.injected and ok.to_dict()["injected"] is True and ok.to_dict()["not_injected"] is None
