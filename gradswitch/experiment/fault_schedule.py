"""Faults fired during a BMv2 run: each of a spec's faults at the jobs' go + at_s, on a thread of its own.

`FaultSchedule` does not implement a failure: it calls the mechanisms a run has (`Mechanisms`: the Testbed's
crash_switch / restart_switch / hang_switch / release_switch / set_link / set_link_rate, the slow-down file a
worker reads, and the supervisor's kill of a worker's process), notes when it did, listens to the controller's
health events where the control plane publishes them (when a dead switch or link was noticed, when traffic was
rerouted or the switch was back), and after the run says per fault what it did to the job: one
gradswitch.workload.fault_record.FaultRecord each.

A fault whose time comes after the jobs ended is not injected (no-effect), and so is one whose mechanism failed
at its first step (the kill or the SIGSTOP refused, the switch already gone): its record says `injected: false`
and why, and it never counts as recovered. Times are seconds after the go.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from gradswitch.protocol.heartbeat import HUNG_DETECT_BOUND_S
from gradswitch.topology.faults import SWITCH_FAULTS, WORKER_FAULTS, Fault, FaultKind
from gradswitch.workload.fault_record import FaultOutcome, FaultRecord

if TYPE_CHECKING:
    from gradswitch.experiment.testbed import Testbed

log = logging.getLogger(__name__)

# gradswitch.roce.qp.QpConfig.rto_max: the workers' QPs run with its default (a test keeps the two equal)
RTO_MAX_S = 1.0


def give_up_s(rto: float, retry_limit: int, rto_max: float = RTO_MAX_S) -> float:
    """How long a QP keeps retransmitting to a dead peer before it fails: its first timeout, doubled after each
    one up to rto_max, retry_limit + 1 times (gradswitch/roce/qp.py: a QP fails once its retries in a row pass
    retry_limit)."""
    return float(sum(min(rto * 2.0**i, rto_max) for i in range(retry_limit + 1)))


# The run's own end once its jobs stopped: the switches' counters read, what the run set undone, results.json
# written. Nothing of it waits on a hung switch once the controller named it so (its session refuses every call at
# once, gradswitch/control/p4rt/session.py; Thrift is not asked of a switch that is out): this is the loaded
# machine's time for the rest.
TEARDOWN_BOUND_S = 10.0


def hang_end_bound_s(rto: float, retry_limit: int, stop_deadline_s: float) -> float:
    """From a switch's hang until the run's results.json is written, when the job stops because of it
    (docs/faults.md, "A switch that hangs"): the job's first worker fails when its transport gives up on the hung
    switch (give_up_s) or the controller names it hung (HUNG_DETECT_BOUND_S; a job that cannot fall back stops
    then), whichever is later at worst; the rest of the job is gone within stop_deadline_s of that; then the
    teardown, TEARDOWN_BOUND_S."""
    return max(HUNG_DETECT_BOUND_S, give_up_s(rto, retry_limit)) + stop_deadline_s + TEARDOWN_BOUND_S


class Step(Enum):
    """One thing the schedule does at one time."""

    CRASH = "crash"  # a switch's process killed
    RESTART = "restart"  # ... started again
    HANG = "hang"  # a switch's process stopped (SIGSTOP)
    RELEASE = "release"  # ... let go on (SIGCONT)
    LINK_DOWN = "link-down"
    LINK_UP = "link-up"
    KILL = "kill"  # a worker's process killed
    SLOW = "slow"  # a worker slowed down


class HealthEvent(Protocol):
    """What the controller publishes (gradswitch/control/health.py): a kind (switch-down, switch-up, link-down,
    link-up, rerouted), what it is about, and when (time.monotonic())."""

    @property
    def kind(self) -> Any: ...

    @property
    def target(self) -> str: ...

    @property
    def at(self) -> float: ...


class LinkOutcome(Protocol):
    """What a link taken down or up says besides (gradswitch.net.network.LinkChange)."""

    @property
    def note(self) -> str | None: ...


@dataclass(frozen=True)
class Mechanisms:
    """How a run fails things; None: this run cannot (the fault is refused before it starts)."""

    crash_switch: Callable[[str], object] | None = None
    restart_switch: Callable[[str], object] | None = None
    hang_switch: Callable[[str], object] | None = None
    release_switch: Callable[[str], object] | None = None
    set_link: Callable[[str, str, bool], LinkOutcome | None] | None = None
    kill_worker: Callable[[int], str] | None = None  # rank -> who was killed ("worker 1 on h2")
    slow_worker: Callable[[int, Fault], object] | None = None  # rank, the slow-worker fault
    unslow_worker: Callable[[int, Fault], object] | None = None  # its link's rate given back after the run

    def runs(self, kind: FaultKind) -> bool:
        need: dict[FaultKind, tuple[object, ...]] = {
            FaultKind.SWITCH_CRASH: (self.crash_switch, self.restart_switch),
            FaultKind.SWITCH_HANG: (self.hang_switch, self.release_switch),
            FaultKind.LINK_DOWN: (self.set_link,), FaultKind.LINK_FLAP: (self.set_link,),
            FaultKind.WORKER_CRASH: (self.kill_worker,), FaultKind.SLOW_WORKER: (self.slow_worker,)}
        return all(m is not None for m in need[kind])


@dataclass(order=True)
class _Action:
    at_s: float
    order: int  # the order of the faults and their steps, for equal times
    step: Step = field(compare=False)
    fault: int = field(compare=False)  # its index in the schedule's faults


@dataclass
class _Fired:
    """What the schedule did for one fault."""

    injected_s: float | None = None
    detail: list[str] = field(default_factory=list)
    error: str | None = None  # the mechanism failed: this fault's one line
    not_injected: str | None = None  # its first step failed: it never happened (why)


def phase_line(done: Sequence[tuple[int, float, float]], out_from: float, out_to: float) -> str:
    """The job's median iteration before a fault, while its target was out and after it was back (iterations as
    (index, start, end) in seconds after the go), for the fault's detail line."""
    def median(times: list[float]) -> str:
        return f"{statistics.median(times):.3f} s ({len(times)})" if times else "- (0)"

    before = [e - s for _, s, e in done if e <= out_from]
    during = [e - s for _, s, e in done if e > out_from and s < out_to]
    after = [e - s for _, s, e in done if s >= out_to]
    return f"median iteration {median(before)} before, {median(during)} while out, {median(after)} after"


def plan_actions(faults: Sequence[Fault]) -> list[_Action]:
    """Every step of every fault, in the order they happen (ties: the faults' order)."""
    out: list[_Action] = []
    for i, f in enumerate(faults):
        if f.kind == FaultKind.SWITCH_CRASH:
            out.append(_Action(f.at_s, len(out), Step.CRASH, i))
            if f.restart_s is not None:
                out.append(_Action(f.at_s + f.restart_s, len(out), Step.RESTART, i))
        elif f.kind == FaultKind.SWITCH_HANG:
            out.append(_Action(f.at_s, len(out), Step.HANG, i))
            if f.release_s is not None:
                out.append(_Action(f.at_s + f.release_s, len(out), Step.RELEASE, i))
        elif f.kind in (FaultKind.LINK_DOWN, FaultKind.LINK_FLAP):
            for down, up in f.windows():
                out.append(_Action(down, len(out), Step.LINK_DOWN, i))
                if up is not None:
                    out.append(_Action(up, len(out), Step.LINK_UP, i))
        elif f.kind == FaultKind.WORKER_CRASH:
            out.append(_Action(f.at_s, len(out), Step.KILL, i))
        else:
            out.append(_Action(f.at_s, len(out), Step.SLOW, i))
    return sorted(out)


class FaultSchedule:
    """Fires `faults` from start() on (the runner's go); stop() when the jobs are over; records() after.

    `ranks`: fault -> the worker rank it names (worker faults only). `clock` and `wait` are time.monotonic
    and an Event's wait by default (a test may drive them)."""

    def __init__(self, faults: Sequence[Fault], mechanisms: Mechanisms, ranks: dict[int, int] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        missing = sorted({str(f.kind) for f in faults if not mechanisms.runs(f.kind)})
        if missing:
            raise ValueError(f"this run has no mechanism for {', '.join(missing)}")
        self.faults = list(faults)
        self.mechanisms = mechanisms
        self.ranks = ranks or {}
        self.clock = clock
        self.go: float | None = None
        self.fired = [_Fired() for _ in self.faults]
        self.health: list[tuple[float, str, str]] = []  # (seconds after go, kind, target)
        self.worker_exits: dict[int, float] = {}  # rank -> when the runner saw its process gone (after go)
        self.paths: list[tuple[float, str, str]] = []  # (seconds after go, path, switch): agreed changes of path
        self.stop_deadline_s: float | None = None  # how long the job's nodes may take to stop after one died
        self.since = "the start"  # what its times count from, for a person (the REPL's: "the command")
        self._actions = plan_actions(self.faults)
        self._restarted: set[int] = set()  # faults whose switch was restarted
        self._done = 0  # steps carried out (in order)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # ---- while the run runs ----

    def start(self) -> None:
        """The go: from now on each fault fires at its time."""
        self.go = self.clock()
        if self._actions:
            self._thread = threading.Thread(target=self._run, name="fault-schedule", daemon=True)
            self._thread.start()

    def run_due(self, wait: Callable[[float], bool]) -> None:
        """Carry out every step in order, waiting (wait(seconds) -> True: stop now) until each one's time."""
        assert self.go is not None, "start() first"
        for action in self._actions:
            delay = self.go + action.at_s - self.clock()
            if (delay > 0 and wait(delay)) or self._stop.is_set():
                return
            if self.fired[action.fault].not_injected is None:  # (a fault never injected has nothing to undo)
                self._do(action)
            self._done += 1

    def _run(self) -> None:
        self.run_due(self._stop.wait)

    def down_switches(self) -> set[str]:
        """The switches this schedule crashed or hung and has not restarted or let go on (their counters cannot be
        read: a hung one would not answer)."""
        down: set[str] = set()
        for action in self._actions:
            fired = self.fired[action.fault]
            if action.step in (Step.CRASH, Step.HANG) and fired.injected_s is not None:
                down.add(self.faults[action.fault].target)
        for action in self._actions:
            if action.step in (Step.RESTART, Step.RELEASE) and action.fault in self._restarted:
                down.discard(self.faults[action.fault].target)
        return down

    def stop(self, timeout: float = 30.0) -> None:
        """The jobs are over: nothing more fires (what was left is recorded as not injected)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def restore(self) -> list[str]:
        """After stop(): a switch this schedule crashed that was to restart, and a link it took down that was to
        come up, are put back now, so the network is whole for what runs next on it; returns what was."""
        if self._thread is not None and self._thread.is_alive():
            return []  # (still inside a mechanism past stop's timeout: leave it be)
        out: list[str] = []
        out_actions: list[_Action] = []
        for action in self._actions[self._done:]:
            f, fired = self.faults[action.fault], self.fired[action.fault]
            if fired.injected_s is None or action.step not in (Step.RESTART, Step.RELEASE, Step.LINK_UP):
                continue
            if action.step == Step.LINK_UP and any(a.fault == action.fault and a.step == Step.LINK_UP
                                                   for a in out_actions):
                continue
            self._do(action, restoring=True)
            out_actions.append(action)
            out.append(f"{f.label}: {action.step.value} at the run's end")
        self._done = len(self._actions)
        for i, f in enumerate(self.faults):  # a slow worker's link: its own rate again (its factor ends with it)
            if (f.kind == FaultKind.SLOW_WORKER and f.rate_mbps is not None and self.fired[i].injected_s is not None
                    and self.mechanisms.unslow_worker is not None and i in self.ranks):
                try:
                    self.mechanisms.unslow_worker(self.ranks[i], f)
                    out.append(f"{f.label}: its link's rate given back at the run's end")
                except Exception as e:
                    log.warning("fault %s: giving its link's rate back failed: %s: %s", f.label, type(e).__name__, e)
        return out

    def on_health(self, event: HealthEvent) -> None:
        """A subscriber of the controller's health events."""
        if self.go is None:
            return
        with self._lock:
            self.health.append((event.at - self.go, str(getattr(event.kind, "value", event.kind)), event.target))

    def path_changed(self, switch: str, path: str, at: float) -> None:
        """A job's workers agreed to change the path of their reductions because of `switch` (NetReduce: to
        "ring" while it is out, back to "switch"); at: time.monotonic()."""
        if self.go is not None:
            with self._lock:
                self.paths.append((at - self.go, path, switch))

    def worker_exited(self, rank: int, at: float) -> None:
        """The runner saw a worker's process gone (at: time.monotonic())."""
        if self.go is not None:
            self.worker_exits.setdefault(rank, at - self.go)

    def _do(self, action: _Action, restoring: bool = False) -> None:
        f = self.faults[action.fault]
        fired = self.fired[action.fault]
        m = self.mechanisms
        now_s = self.clock() - (self.go or 0.0)
        try:
            if action.step == Step.CRASH and m.crash_switch is not None:
                m.crash_switch(f.target)
            elif action.step == Step.RESTART and m.restart_switch is not None:
                m.restart_switch(f.target)
                self._restarted.add(action.fault)
                fired.detail.append(f"restarted at {now_s:.2f} s, back at {self.clock() - (self.go or 0.0):.2f} s")
            elif action.step == Step.HANG and m.hang_switch is not None:
                m.hang_switch(f.target)
                fired.detail.append(f"{f.target}'s switch process stopped (SIGSTOP) at {now_s:.2f} s")
            elif action.step == Step.RELEASE and m.release_switch is not None:
                m.release_switch(f.target)
                self._restarted.add(action.fault)
                fired.detail.append(f"let go on (SIGCONT) at {now_s:.2f} s, back at "
                                    f"{self.clock() - (self.go or 0.0):.2f} s")
            elif action.step in (Step.LINK_DOWN, Step.LINK_UP) and m.set_link is not None:
                a, b = f.link_ends()
                change = m.set_link(a, b, action.step == Step.LINK_UP)
                if change is not None and change.note:
                    fired.detail.append(change.note)
                    log.warning("fault %s: %s", f.label, change.note)
            elif action.step == Step.KILL and m.kill_worker is not None:
                fired.detail.append(f"killed {m.kill_worker(self.ranks[action.fault])} (SIGKILL)")
            elif action.step == Step.SLOW and m.slow_worker is not None:
                m.slow_worker(self.ranks[action.fault], f)
        except Exception as e:  # the mechanism failed: the fault says so, the run goes on
            fired.error = f"{action.step.value} failed: {type(e).__name__}: {e}"
            fired.detail.append(fired.error)
            log.warning("fault %s: %s", f.label, fired.error)
            if fired.injected_s is None:  # its first step: the fault never happened (not injected, never
                fired.not_injected = f"{fired.error} (at {now_s:.2f} s)"  # recovered: nothing follows from it)
            return
        if restoring:
            fired.detail.append(f"{action.step.value} at the run's end ({now_s:.2f} s)")
        if fired.injected_s is None:
            fired.injected_s = now_s
        # A person watching the run sees each step as it happens (the table names the fault again at the end).
        what = {Step.CRASH: f"{f.target}'s switch process killed (SIGKILL)", Step.RESTART: f"{f.target} restarted",
                Step.HANG: f"{f.target}'s switch process stopped (SIGSTOP)",
                Step.RELEASE: f"{f.target}'s switch process let go on (SIGCONT)",
                Step.LINK_DOWN: f"link {f.target} down", Step.LINK_UP: f"link {f.target} up",
                Step.KILL: fired.detail[-1] if fired.detail else f"worker {f.target} killed",
                Step.SLOW: f"worker {f.target} slowed"}[action.step]
        log.warning("fault %s at %.2f s after %s: %s", f.label, now_s, self.since, what)

    # ---- after the run ----

    def records(self, iterations: Sequence[tuple[int, float, float]], planned: int) -> list[FaultRecord]:
        """One FaultRecord per fault. iterations: the job's completed ones as (index, start, end) in
        time.monotonic(); planned: how many the job was to run."""
        go = self.go or 0.0
        done = [(i, s - go, e - go) for i, s, e in iterations]
        complete = len(done) >= planned
        return [self._record(i, done, complete, planned) for i in range(len(self.faults))]

    def _record(self, i: int, done: list[tuple[int, float, float]], complete: bool, planned: int) -> FaultRecord:
        f, fired = self.faults[i], self.fired[i]
        if fired.not_injected is not None:
            return FaultRecord.not_injected_because(f, fired.not_injected)
        if fired.injected_s is None:
            return FaultRecord.not_injected_because(f, "the jobs had ended before its time")
        at = fired.injected_s
        before = sum(1 for _, _, end in done if end <= at)
        detected = self._detected(i, at)
        if f.kind == FaultKind.SWITCH_HANG:  # the record names the switch hung (or says it was never named so)
            named = self._events(f, ("switch-hung",), at)
            fired.detail = [d for d in fired.detail if "named hung" not in d] + [
                f"{f.target} named hung by the control plane {named[0] - at:.2f} s after it stopped" if named else
                f"{f.target} never named hung by the control plane"]
        if not complete:
            lost = planned - len(done)
            what = "; ".join(fired.detail) or f"{f.kind} on {f.target}"
            gone = [t for t in self.worker_exits.values() if t >= at]
            stopped = max(gone) if gone else None
            within = "" if stopped is None else f"; every worker gone {stopped - at:.2f} s after it" + (
                "" if self.stop_deadline_s is None else f" (deadline {self.stop_deadline_s:.2f} s)")
            return FaultRecord(f, at, FaultOutcome.INTERRUPTED, detected, None, lost, None,
                               f"{what}: the job stopped after {len(done)} iterations ({before} completed before "
                               f"the fault){within}", stopped)
        hit = [(i, s, e) for i, s, e in done if e > at and s < self._end_of(f, at)]
        phases = phase_line(done, at, self._end_of(f, at))
        if f.kind == FaultKind.SLOW_WORKER:
            return FaultRecord(f, at, FaultOutcome.RECOVERED if hit else FaultOutcome.NO_EFFECT, detected, None, 0,
                               None, f"{len(hit)} iterations ran with the slow worker; {phases}")
        if not hit:
            hung = fired.detail[-1:] if f.kind == FaultKind.SWITCH_HANG else []
            return FaultRecord(f, at, FaultOutcome.NO_EFFECT, detected, None, 0, None,
                               "; ".join([*hung, "no iteration of the job ran while it was out"]))
        with self._lock:
            changes = sorted((t, path) for t, path, switch in self.paths if switch == f.target and t >= at)
        fallback = next(((t, p) for t, p in changes if p != "switch"), None)
        if fallback is not None:  # the job's reductions left the switch: they flowed again once it agreed
            returned = [t for t, p in changes if p == "switch" and t >= fallback[0]]
            again = f"; returned to the switch at {returned[0]:.2f} s" if returned else "; never returned to it"
            return FaultRecord(f, at, FaultOutcome.RECOVERED, detected, fallback[0], 0, fallback[1],
                               "; ".join([*fired.detail, f"{fallback[1]} from {fallback[0]:.2f} s{again}",
                                          f"{len(hit)} iterations overlapped it, every one completed", phases]))
        recovered = self._recovered(f, at)
        if recovered is None:  # no event says so: the first iteration that ended after it was back
            back = self._end_of(f, at)
            after = [e for _, _, e in hit if e >= back]
            recovered = min(after) if after else max(e for _, _, e in hit)
        return FaultRecord(f, at, FaultOutcome.RECOVERED, detected, recovered, 0, None,
                           "; ".join([*fired.detail, f"{len(hit)} iterations overlapped it, every one completed",
                                      phases]))

    def _end_of(self, f: Fault, at: float) -> float:
        """When the fault's target was back (inf: never in the run), from when it was injected."""
        ends = [up for _, up in f.windows()]
        return float("inf") if any(e is None for e in ends) else at + (max(e for e in ends if e is not None)
                                                                       - f.at_s)

    def _events(self, f: Fault, kinds: tuple[str, ...], at: float) -> list[float]:
        names = {f.target}
        if f.kind in (FaultKind.LINK_DOWN, FaultKind.LINK_FLAP):
            a, b = f.link_ends()
            names |= {f"{a}-{b}", f"{b}-{a}"}
        with self._lock:
            return sorted(t for t, kind, target in self.health
                          if kind in kinds and t >= at and (target in names or kind == "rerouted"))

    def _detected(self, i: int, at: float) -> float | None:
        f = self.faults[i]
        if f.kind in WORKER_FAULTS:
            gone = self.worker_exits.get(self.ranks.get(i, -1))
            return gone if gone is not None and gone >= at else None
        seen = self._events(f, ("switch-down", "switch-hung", "link-down"), at)
        return seen[0] if seen else None

    def _recovered(self, f: Fault, at: float) -> float | None:
        back = self._events(f, ("rerouted", "switch-up", "link-up"), at)
        return back[0] if back else None


REPL_KINDS = (*SWITCH_FAULTS, FaultKind.LINK_DOWN, FaultKind.LINK_FLAP)  # worker faults need a run's workers


def injector(net: Testbed, log_line: Callable[[str], None] = log.warning) -> Callable[[str], str]:
    """The REPL's `fault` on a running network: a fault's command line form (`@SECONDS` optional: now) checked
    against the network's topology (FaultError: one line) and fired on a schedule of its own, SECONDS from now;
    returns what the REPL prints. What it did is logged (log_line) as it happens."""
    from gradswitch.topology.faults import FaultError, fault_problems, parse_fault

    def inject(text: str) -> str:
        head = text.split(",", 1)[0]
        fault = parse_fault(text if "@" in head else text.replace(head, head + "@0", 1))
        if fault.kind not in REPL_KINDS:
            raise FaultError(f"fault {fault.label}: {fault.kind} needs a run's workers: give it to gradswitch "
                             f"experiment --fault (here: {', '.join(map(str, REPL_KINDS))})")
        problems = fault_problems((fault,), net.topo, 0)
        if problems:
            raise FaultError(problems[0])
        schedule = FaultSchedule([fault], Mechanisms(crash_switch=net.crash_switch, restart_switch=net.restart_switch,
                                                     hang_switch=net.hang_switch, release_switch=net.release_switch,
                                                     set_link=net.set_link))
        schedule.since = "the command"
        schedule.start()
        return f"fault {fault.label}: {'now' if fault.at_s == 0 else f'in {fault.at_s:g} s'}" + (
            "" if not fault.windows()[-1][1] else f", back {fault.windows()[-1][1]:g} s from now")

    return inject
