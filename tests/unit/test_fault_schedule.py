"""The fault schedule's order and records (a driven clock: the order only; the proof that faults fire on a real
network is tests/mininet/test_faults_bmv2.py), the report's marks, and the deadlines derived from the transport."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from gradswitch.control.control_plane import ControlPlane
from gradswitch.control.control_socket import ControlServer, attach_faults
from gradswitch.control.dlcp_settings import DlcpSettings
from gradswitch.control.load_balancing import LoadBalancing
from gradswitch.control.netreduce_jobs import NetReduceJobs
from gradswitch.control.repl import Repl
from gradswitch.experiment import fault_schedule, report, supervisor
from gradswitch.experiment.fault_schedule import FaultSchedule, Mechanisms, Step, give_up_s, plan_actions
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.hosts import comm
from gradswitch.roce.qp import QpConfig
from gradswitch.topology.faults import parse_fault
from gradswitch.topology.generators import leafspine
from gradswitch.workload.fault_record import FaultOutcome, FaultRecord
from gradswitch.workload.job import JobConfig
from gradswitch.workload.worker_result import WorkerResult


class Clock:
    """A clock the test drives: wait(s) moves it on by s."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def wait(self, seconds: float) -> bool:
        self.t += seconds
        return False


class Calls:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.log: list[tuple[float, str]] = []

    def note(self, what: str) -> str:
        self.log.append((round(self.clock() - 100.0, 6), what))
        return what

    def link(self, a: str, b: str, up: bool) -> None:
        self.note(f"{a}-{b} {'up' if up else 'down'}")

    def mechanisms(self) -> Mechanisms:
        return Mechanisms(crash_switch=lambda s: self.note(f"crash {s}"),
                          restart_switch=lambda s: self.note(f"restart {s}"),
                          hang_switch=lambda s: self.note(f"hang {s}"),
                          release_switch=lambda s: self.note(f"release {s}"),
                          set_link=self.link,
                          kill_worker=lambda r: self.note(f"kill {r}").replace("kill", "worker") + f" on h{r + 1}",
                          slow_worker=lambda r, f: self.note(f"slow {r} x{f.factor:g}"))


def fire(texts: list[str], ranks: dict[int, int] | None = None) -> tuple[FaultSchedule, Calls]:
    clock = Clock()
    calls = Calls(clock)
    schedule = FaultSchedule([parse_fault(t) for t in texts], calls.mechanisms(), ranks, clock=clock)
    schedule.go = clock()
    schedule.run_due(clock.wait)
    return schedule, calls


def test_steps_fire_in_time_order_across_faults() -> None:
    _, calls = fire(["link-flap:leaf1-spine1@1,down=0.5,up=1,flaps=2", "switch-crash:spine2@1.2,restart=2",
                     "worker-crash:1@4", "slow-worker:2@0,factor=3"], ranks={2: 1, 3: 2})
    assert calls.log == [(0.0, "slow 2 x3"), (1.0, "leaf1-spine1 down"), (1.2, "crash spine2"),
                         (1.5, "leaf1-spine1 up"), (2.5, "leaf1-spine1 down"), (3.0, "leaf1-spine1 up"),
                         (3.2, "restart spine2"), (4.0, "kill 1")]


def test_a_link_down_without_down_s_stays_down_and_a_crash_without_restart_stays_crashed() -> None:
    steps = [a.step for a in plan_actions([parse_fault("link-down:leaf1-spine1@1"),
                                           parse_fault("switch-crash:spine1@2")])]
    assert steps == [Step.LINK_DOWN, Step.CRASH]


def test_down_switches_are_those_crashed_and_not_restarted() -> None:
    schedule, _ = fire(["switch-crash:spine1@1", "switch-crash:spine2@1,restart=1"])
    assert schedule.down_switches() == {"spine1"}


def test_a_fault_after_the_jobs_ended_is_not_injected() -> None:
    clock = Clock()
    calls = Calls(clock)
    schedule = FaultSchedule([parse_fault("worker-crash:1@1"), parse_fault("switch-crash:spine1@50")],
                             calls.mechanisms(), {0: 1}, clock=clock)
    schedule.go = clock()
    ended_at = 10.0

    def wait(seconds: float) -> bool:  # the jobs end at 10 s: stop() during the wait
        if clock() - 100.0 + seconds > ended_at:
            clock.t = 100.0 + ended_at
            return True
        return clock.wait(seconds)

    schedule.run_due(wait)
    assert calls.log == [(1.0, "kill 1")]
    records = schedule.records([(0, 100.0, 100.5)], planned=20)
    assert records[0].outcome == FaultOutcome.INTERRUPTED and records[0].iterations_lost == 19
    assert records[1].outcome == FaultOutcome.NO_EFFECT and "not injected" in records[1].detail


def test_a_worker_crash_is_detected_when_its_process_is_seen_gone() -> None:
    schedule, _ = fire(["worker-crash:h2@2"], ranks={0: 1})
    schedule.worker_exited(1, 100.0 + 2.07)
    (record,) = schedule.records([(i, 100.0 + i * 0.5, 100.5 + i * 0.5) for i in range(4)], planned=10)
    assert record.outcome == FaultOutcome.INTERRUPTED
    assert record.time_to_detect_s == pytest.approx(0.07)
    assert "killed worker 1 on h2" in record.detail and "4 iterations (4 completed before" in record.detail


@dataclasses.dataclass(frozen=True)
class Event:
    kind: str
    target: str
    at: float


def test_a_switch_crash_the_job_rode_through_is_recovered_at_the_controller_s_reroute() -> None:
    schedule, _ = fire(["switch-crash:spine1@1"])
    for kind, at in (("switch-down", 1.01), ("rerouted", 1.06)):
        schedule.on_health(Event(kind, "spine1", 100.0 + at))
    iterations = [(i, 100.0 + i * 0.4, 100.0 + (i + 1) * 0.4) for i in range(10)]
    (record,) = schedule.records(iterations, planned=10)
    assert record.outcome == FaultOutcome.RECOVERED
    assert record.time_to_detect_s == pytest.approx(0.01) and record.time_to_recover_s == pytest.approx(0.06)
    assert record.detail.endswith("median iteration 0.400 s (2) before, 0.400 s (8) while out, - (0) after")


def test_the_phases_split_at_the_outage() -> None:
    done = [(0, 0.0, 1.0), (1, 1.0, 2.0), (2, 2.0, 5.0), (3, 5.0, 6.5), (4, 6.5, 7.0)]
    assert fault_schedule.phase_line(done, 2.5, 5.0) == (
        "median iteration 1.000 s (2) before, 3.000 s (1) while out, 1.000 s (2) after")


def test_a_fault_with_no_mechanism_is_refused() -> None:
    with pytest.raises(ValueError, match="no mechanism for switch-crash"):
        FaultSchedule([parse_fault("switch-crash:spine1@1")], Mechanisms(kill_worker=lambda r: ""))


def test_the_give_up_time_follows_the_qp_s_doubling_timeouts() -> None:
    assert QpConfig(1, 1).rto_max == fault_schedule.RTO_MAX_S  # the workers' QPs run with the default
    assert give_up_s(0.02, 7) == pytest.approx(0.02 + 0.04 + 0.08 + 0.16 + 0.32 + 0.64 + 1.0 + 1.0)
    cfg = JobConfig.__dataclass_fields__
    deadline = supervisor.stop_deadline_s([cast(JobConfig, type("C", (), {"rto": cfg["rto"].default,
                                                                        "retry_limit": cfg["retry_limit"].default}))])
    assert deadline == pytest.approx(give_up_s(0.02, 7) + supervisor.ABORT_CHECK_S + 1.0)


def test_the_abort_check_interval_is_the_workers() -> None:
    source = Path(comm.__file__).read_text()
    assert f"self._next_abort_check = now + {supervisor.ABORT_CHECK_S}" in source


def _worker(nid: int, n: int, progress: int | None = None) -> WorkerResult:
    its = [{"index": i, "start": 10.0 + i, "end": 10.5 + i, "time_s": 0.5, "correct": True, "wrong_elements": 0,
            "max_abs_error": 0.0, "saturated": 0, "extra": {}, "check": "exact"} for i in range(n)]
    out: dict[str, Any] = {"node_id": nid, "host": f"h{nid + 1}", "role": "worker", "ok": False, "iterations": its}
    if progress is not None:
        out["progress"] = progress
        out["error"] = "no result: it was killed (SIGKILL)"
    return cast(WorkerResult, out)


def test_iterations_a_killed_worker_completed_are_kept_from_its_peers_records() -> None:
    assert report.completed_by(_worker(1, 0, progress=3)) == 3
    results = {0: _worker(0, 3), 1: _worker(1, 0, progress=3), 2: _worker(2, 4)}
    n = min(report.completed_by(r) for r in results.values())
    assert n == 3
    it = report._iteration(1, [r["iterations"][1] for r in results.values() if r["iterations"]], 3)
    assert it["reported_by"] == 2 and it["correct"] is True


def test_with_faults_names_the_fault_first_and_marks_what_it_overlapped() -> None:
    fault = parse_fault("worker-crash:1@1.2")
    record = FaultRecord(fault, 1.2, FaultOutcome.INTERRUPTED, 1.25, None, 7, None, "killed worker 1 on h2")
    body = {"iterations": [{"index": 0, "start": 10.0, "end": 11.0}, {"index": 1, "start": 11.0, "end": 12.0}],
            "errors": {"worker 0 (h1)": "JobAborted: worker 1 on h2 was killed"}}
    out = report.with_faults(cast(Results, body), [record], go=10.0)
    assert next(iter(out["errors"])) == "fault worker-crash:1@1.2"
    assert out["errors"]["fault worker-crash:1@1.2"].startswith(
        "interrupted: injected at 1.20 s, detected after 0.05 s")
    assert "faults" not in out["iterations"][0] and out["iterations"][1]["faults"] == ["worker-crash:1@1.2"]
    assert out["fault_outcome"] == "interrupted"
    assert FaultRecord.from_dict(out["faults"][0]) == record


def test_a_netreduce_job_that_fell_back_to_ring_recovered_when_its_workers_agreed() -> None:
    schedule, _ = fire(["switch-crash:spine1@1,restart=2"])
    schedule.on_health(Event("rerouted", "spine1", 100.0 + 1.05))
    schedule.path_changed("spine1", "ring", 100.0 + 1.3)
    schedule.path_changed("spine1", "switch", 100.0 + 3.9)
    (record,) = schedule.records([(i, 100.0 + i * 0.5, 100.5 + i * 0.5) for i in range(10)], planned=10)
    assert record.outcome == FaultOutcome.RECOVERED and record.fallback == "ring"
    assert record.time_to_recover_s == pytest.approx(0.3)  # the fallback, not the controller's reroute
    assert "returned to the switch at 3.90 s" in record.detail


class _Net:
    """What the REPL's injector needs of a Testbed: its topology and the three switch and link mechanisms, here
    recorded (their effect on real switches: tests/mininet/test_switch_faults.py)."""

    def __init__(self) -> None:
        self.topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
        self.calls: list[str] = []
        self.done = threading.Event()

    def crash_switch(self, name: str) -> None:
        self.calls.append(f"crash {name}")
        self.done.set()

    def restart_switch(self, name: str) -> None:
        self.calls.append(f"restart {name}")

    def hang_switch(self, name: str) -> None:
        self.calls.append(f"hang {name}")
        self.done.set()

    def release_switch(self, name: str) -> None:
        self.calls.append(f"release {name}")

    def set_link(self, a: str, b: str, up: bool) -> None:
        self.calls.append(f"{a}-{b} {'up' if up else 'down'}")
        self.done.set()


def fault_repl(inject: bool = True) -> tuple[Repl, list[str], _Net]:
    fabric: Any = type("F", (), {"switch_names": lambda self: ["leaf1", "leaf2", "spine1", "spine2"]})()
    net = _Net()
    out: list[str] = []
    control = ControlPlane(fabric, NetReduceJobs(fabric), DlcpSettings(fabric), LoadBalancing(fabric))
    return Repl(control, out=out.append, inject=fault_schedule.injector(cast(Any, net)) if inject else None), out, net


def test_the_repl_fires_a_fault_now_without_a_time() -> None:
    r, out, net = fault_repl()
    r.onecmd("fault switch-crash:spine1")
    assert out == ["fault switch-crash:spine1@0: now"]
    assert net.done.wait(10) and net.calls == ["crash spine1"]


def test_the_repl_says_when_a_delayed_link_fault_comes_back() -> None:
    r, out, net = fault_repl()
    r.onecmd("fault link-down:spine1-leaf2@0,down=30")
    assert out == ["fault link-down:spine1-leaf2@0,down=30: now, back 30 s from now"]
    assert net.done.wait(10) and net.calls == ["spine1-leaf2 down"]


@pytest.mark.parametrize(("line", "says"), [
    ("fault switch-crash:spine9", "'spine9' is not a switch of this topology (its switches: leaf1, leaf2, spine1"),
    ("fault link-down:leaf1-leaf2@1", "'leaf1-leaf2' is not a link of this topology"),
    ("fault worker-crash:1@2", "worker-crash needs a run's workers: give it to gradswitch experiment --fault"),
    ("fault switch-crush:spine1", "kind 'switch-crush' is not one of switch-crash, switch-hang, link-down"),
    ("fault switch-crash:spine1 link-down:leaf1-spine1", "one fault per command"),
    ("fault", "usage: fault KIND:TARGET[@SECONDS]"),
])
def test_a_bad_repl_fault_is_one_line_and_fires_nothing(line: str, says: str) -> None:
    r, out, net = fault_repl()
    r.onecmd(line)
    assert len(out) == 1 and out[0].startswith("error: ") and says in out[0], out
    assert net.calls == []


def test_a_repl_without_a_network_says_where_faults_are_fired() -> None:
    r, out, _ = fault_repl(inject=False)
    r.onecmd("fault switch-crash:spine1")
    assert len(out) == 1 and "attach to a `gradswitch net` network, which fires them" in out[0]
    out.clear()
    r.onecmd("help")
    assert any(line.strip().startswith("fault KIND:TARGET[@SECONDS]") for line in out)


def test_what_was_due_to_come_back_after_the_jobs_is_put_back_at_their_end() -> None:
    clock = Clock()
    calls = Calls(clock)
    schedule = FaultSchedule([parse_fault("switch-crash:spine1@1,restart=100"),
                              parse_fault("link-flap:leaf1-spine2@2,down=1,up=1,flaps=20"),
                              parse_fault("link-down:leaf2-spine2@3")], calls.mechanisms(), clock=clock)
    schedule.go = clock()
    schedule.run_due(lambda s: clock.wait(s) if clock() - 100.0 + s <= 4.5 else True)  # the jobs end at 4.5 s
    assert schedule.down_switches() == {"spine1"}
    assert [what for _, what in calls.log] == ["crash spine1", "leaf1-spine2 down", "leaf1-spine2 up",
                                               "leaf2-spine2 down", "leaf1-spine2 down"]
    calls.log.clear()
    restored = schedule.restore()
    # spine1 restarted, the flapping link up once; the link that was down for good stays down
    assert [what for _, what in calls.log] == ["leaf1-spine2 up", "restart spine1"]
    assert len(restored) == 2 and schedule.down_switches() == set()
    assert schedule.restore() == []  # once


def test_a_slow_worker_s_link_gets_its_rate_back_after_the_run() -> None:
    clock = Clock()
    calls = Calls(clock)
    mechanisms = dataclasses.replace(calls.mechanisms(), unslow_worker=lambda r, f: calls.note(f"unslow {r}"))
    schedule = FaultSchedule([parse_fault("slow-worker:2@1,rate=5"), parse_fault("slow-worker:3@1,factor=2")],
                             mechanisms, {0: 2, 1: 3}, clock=clock)
    schedule.go = clock()
    schedule.run_due(clock.wait)
    assert schedule.restore() == ["slow-worker:2@1,rate=5: its link's rate given back at the run's end"]
    assert [what for _, what in calls.log] == ["slow 2 x1", "slow 3 x2", "unslow 2"]


def test_a_workers_fault_in_an_execution_graph_run_on_bmv2_is_refused_in_one_line() -> None:
    spec = spec_from_dict({"workload_et": "traces/ag", "workers": 4, "faults": ["worker-crash:1@2"]})
    assert spec.problems() == ["fault worker-crash:1@2: an execution-graph run (workload_et) on BMv2 runs switch and "
                               "link faults, not a worker's: leave it out, or run it with the loop or a training "
                               "workload"]
    assert spec_from_dict({"workload_et": "traces/ag", "workers": 4, "faults": ["switch-crash:s1@2"]}).problems() == []


def test_a_mechanism_that_fails_to_inject_is_named_in_the_fault_s_record_as_not_injected() -> None:
    """A fault whose injection failed is recorded as not injected, never as recovered (nor as
    what stopped the job: the job's own failure is its own)."""
    clock = Clock()

    def set_link(a: str, b: str, up: bool) -> None:
        raise RuntimeError("thrift port 9090: read timeout")

    schedule = FaultSchedule([parse_fault("link-down:leaf1-spine1@1")], Mechanisms(set_link=set_link), clock=clock)
    schedule.go = clock()
    schedule.run_due(clock.wait)
    (record,) = schedule.records([(0, 100.0, 100.5)], planned=5)
    assert record.outcome == FaultOutcome.NO_EFFECT and not record.injected
    assert record.not_injected is not None
    assert record.not_injected.startswith("link-down failed: RuntimeError: thrift port 9090: read timeout (at 1.00 s)")
    assert record.to_dict()["injected"] is False


def test_a_switch_hang_whose_sigstop_fails_is_not_injected_even_when_the_job_completes() -> None:
    clock = Clock()
    released: list[str] = []

    def hang(switch: str) -> None:
        raise RuntimeError(f"switch {switch} is not running")  # (Testbed.hang_switch: the switch already gone)

    schedule = FaultSchedule([parse_fault("switch-hang:spine1@1,release=2")],
                             Mechanisms(hang_switch=hang, release_switch=released.append), clock=clock)
    schedule.go = clock()
    schedule.run_due(clock.wait)
    assert released == []  # nothing to let go on: it never hung
    assert schedule.down_switches() == set()
    iterations = [(i, 100.0 + i * 0.5, 100.5 + i * 0.5) for i in range(10)]  # every iteration, across its window
    (record,) = schedule.records(iterations, planned=10)
    assert record.outcome == FaultOutcome.NO_EFFECT and not record.injected
    assert record.not_injected == "hang failed: RuntimeError: switch spine1 is not running (at 1.00 s)"
    out = report.with_faults(cast(Results, {"iterations": [{"index": 0, "start": 10.0, "end": 12.0}], "errors": {}}),
                             [record], go=10.0)
    assert out["fault_outcome"] == "no-effect" and out["faults"][0]["injected"] is False
    assert "faults" not in out["iterations"][0]  # no iteration ran while it was 'out': it never was


def test_a_switch_hang_stops_then_releases_and_is_down_until_released() -> None:
    schedule, calls = fire(["switch-hang:spine1@1,release=2", "switch-hang:spine2@1.5"])
    assert calls.log == [(1.0, "hang spine1"), (1.5, "hang spine2"), (3.0, "release spine1")]
    assert schedule.down_switches() == {"spine2"}
    steps = [a.step for a in plan_actions([parse_fault("switch-hang:spine1@1,release=2")])]
    assert steps == [Step.HANG, Step.RELEASE]


def test_a_switch_hang_s_record_names_the_switch_hung_when_the_control_plane_did() -> None:
    schedule, _ = fire(["switch-hang:spine1@1"])
    schedule.on_health(Event("switch-hung", "spine1", 100.0 + 1.0 + 4.2))
    schedule.worker_exited(0, 100.0 + 4.3)
    (record,) = schedule.records([(i, 100.0 + i * 0.4, 100.0 + (i + 1) * 0.4) for i in range(2)], planned=10)
    assert record.outcome == FaultOutcome.INTERRUPTED and record.injected and record.iterations_lost == 8
    assert record.time_to_detect_s == pytest.approx(4.2)
    assert "spine1's switch process stopped (SIGSTOP) at 1.00 s" in record.detail
    assert "spine1 named hung by the control plane 4.20 s after it stopped" in record.detail
    assert "the job stopped after 2 iterations" in record.detail

    unseen, _ = fire(["switch-hang:spine2@1"])
    (record,) = unseen.records([(0, 100.0, 100.4)], planned=5)
    assert "spine2 never named hung by the control plane" in record.detail and record.detected_s is None


def test_what_was_hung_and_due_to_be_released_is_let_go_on_at_the_jobs_end() -> None:
    clock = Clock()
    calls = Calls(clock)
    schedule = FaultSchedule([parse_fault("switch-hang:spine1@1,release=100")], calls.mechanisms(), clock=clock)
    schedule.go = clock()
    schedule.run_due(lambda s: clock.wait(s) if clock() - 100.0 + s <= 4.5 else True)
    assert schedule.down_switches() == {"spine1"}
    assert schedule.restore() == ["switch-hang:spine1@1,release=100: release at the run's end"]
    assert [what for _, what in calls.log] == ["hang spine1", "release spine1"] and schedule.down_switches() == set()


def test_the_repl_hangs_a_switch_and_lets_it_go_on() -> None:
    r, out, net = fault_repl()
    r.onecmd("fault switch-hang:spine1,release=30")
    assert out == ["fault switch-hang:spine1@0,release=30: now, back 30 s from now"]
    assert net.done.wait(10) and net.calls == ["hang spine1"]


def test_an_attached_repl_fires_faults_through_the_control_socket() -> None:
    _, _, net = fault_repl()
    fabric: Any = type("F", (), {"switch_names": lambda self: ["leaf1", "leaf2", "spine1", "spine2"]})()
    control = ControlPlane(fabric, NetReduceJobs(fabric), DlcpSettings(fabric), LoadBalancing(fabric))
    run_dir = Path(tempfile.mkdtemp(prefix="gs-faults-", dir="/tmp"))  # a short path: a Unix socket's limit
    try:
        with ControlServer(control, run_dir, inject=fault_schedule.injector(cast(Any, net))):
            inject = attach_faults(run_dir)
            assert inject is not None
            out: list[str] = []
            r = Repl(control, out=out.append, inject=inject)  # as `gradswitch repl` makes it, with the proxy
            r.onecmd("fault link-down:leaf2-spine2")
            r.onecmd("fault switch-crash:spine7")  # refused over there: the same one line here
            assert out[0] == "fault link-down:leaf2-spine2@0: now"
            assert out[1].startswith("error: fault switch-crash:spine7@0: 'spine7' is not a switch"), out
            assert net.done.wait(10) and net.calls == ["leaf2-spine2 down"]
        with ControlServer(control, run_dir):
            assert attach_faults(run_dir) is None  # a network served without an injector
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_what_taking_a_link_down_took_besides_is_in_the_faults_detail() -> None:
    """A set_link that had to restart a switch (Testbed: BMv2's port_remove deadlocked) says so; the record keeps it."""
    from gradswitch.net.network import LinkChange

    clock = Clock()
    note = "spine1's BMv2 did not give up port 1 within 2 s: spine1 was restarted with its end of the link down"
    changes = iter([LinkChange(clock(), note), LinkChange(clock())])
    schedule = FaultSchedule([parse_fault("link-down:leaf1-spine1@1,down=1")],
                             Mechanisms(set_link=lambda a, b, up: next(changes)), clock=clock)
    schedule.go = clock()
    schedule.run_due(clock.wait)
    assert schedule.fired[0].detail.count(note) == 1
