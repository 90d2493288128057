"""Goodput of a long training run that meets failures: the share of the wall time that went into training
progress kept at the end, with two ways of surviving a failure.

- Checkpoint restart (`CheckpointRestart`): the job writes a checkpoint every `interval_s` of running, which
  stops it for `write_s`; every failure stops the job: the progress since the last complete checkpoint is
  lost and the job is down for `restart_s` (a failure while it is down starts the restart again).
- Recovery in place (`InPlace`): a worker that fails (its GPU, or a switch or link that was its only way
  into the fabric) is replaced by a spare: the iteration in flight is lost and the job waits `rejoin_s`. A
  switch or link whose loss leaves every worker connected is routed around: the job waits `reroute_s` (its
  reliable transport resends what was lost; no iteration is lost).
Either way, while a switch or link is out (until it is repaired: the fault's restart_s / down_s) iterations
take as long as on the fabric without it (`FabricCosts.degraded_s`, measured on ns-3: `gradswitch goodput`).

Progress is counted in seconds of intact-fabric training, so goodput = progress / wall time, and the wall time
splits exactly into progress + lost work + down time + checkpoint writes + the slowdown of degraded iterations
(`Goodput.accounted_s`). Deterministic: the same schedule and costs give the same figures.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import ClassVar

from gradswitch.topology.faults import FaultKind
from gradswitch.topology.model import Topology
from gradswitch.workload.failure_schedule import HOUR_S, FailureSchedule, element_class, workers_cut_off


class GoodputError(ValueError):
    """Costs that cannot be used: one line naming the value, what is allowed and what to do."""


@dataclass(frozen=True)
class FabricCosts:
    """The job's iteration on the intact fabric and, per element class (failure_schedule.element_class),
    with one element of that class gone."""

    iteration_s: float
    degraded_s: dict[str, float] = field(default_factory=dict)

    def slowdown(self, cls: str) -> float:
        if cls not in self.degraded_s:
            raise GoodputError(f"no degraded iteration time for a lost {cls}: measured for "
                               f"{', '.join(sorted(self.degraded_s)) or 'none'}; measure it (`gradswitch goodput`)")
        return max(1.0, self.degraded_s[cls] / self.iteration_s)


@dataclass(frozen=True)
class CheckpointRestart:
    interval_s: float  # running time between two checkpoints
    write_s: float  # the job stopped while one is written
    restart_s: float  # down after a failure: rescheduled, started, the checkpoint loaded

    name: ClassVar[str] = "checkpoint-restart"


@dataclass(frozen=True)
class InPlace:
    rejoin_s: float  # a spare replaces a failed worker and joins the job
    reroute_s: float  # a failed switch or link detected and routed around

    name: ClassVar[str] = "in-place"


Strategy = CheckpointRestart | InPlace


@dataclass(frozen=True)
class Goodput:
    strategy: str
    wall_s: float
    progress_s: float  # intact-fabric training seconds kept at the end
    lost_s: float  # progress made and then lost (rolled back to a checkpoint, or an iteration redone)
    down_s: float  # stopped: restarting, a spare joining, rerouting
    checkpoint_s: float  # stopped writing checkpoints
    degraded_s: float  # running, but slower than on the intact fabric (the extra time)
    failures: int  # failures that cost something (a worker or fabric element lost)
    restarts: int  # checkpoint restarts (a failure while down restarts again: counted again)

    @property
    def goodput(self) -> float:
        return self.progress_s / self.wall_s

    @property
    def accounted_s(self) -> float:
        return self.progress_s + self.lost_s + self.down_s + self.checkpoint_s + self.degraded_s

    def to_dict(self) -> dict[str, object]:
        return {"strategy": self.strategy, "goodput": self.goodput, "wall_h": self.wall_s / HOUR_S,
                "progress_h": self.progress_s / HOUR_S, "lost_h": self.lost_s / HOUR_S, "down_h": self.down_s / HOUR_S,
                "checkpoint_h": self.checkpoint_s / HOUR_S, "degraded_h": self.degraded_s / HOUR_S,
                "failures": self.failures, "restarts": self.restarts}


@dataclass(frozen=True)
class _Window:
    start: float
    end: float
    slowdown: float


class _Fabric:
    """The job's speed over the run: 1 / slowdown of the worst element out at a time."""

    def __init__(self, windows: list[_Window]) -> None:
        self.windows = windows
        edges = sorted({0.0, *(w.start for w in windows), *(w.end for w in windows)})
        self.edges = edges

    def slowdown_at(self, t: float) -> float:
        return max((w.slowdown for w in self.windows if w.start <= t < w.end), default=1.0)

    def progress(self, a: float, b: float) -> tuple[float, float]:
        """(progress, extra time) running from a to b: intact seconds gained, and the time beyond them."""
        if b <= a:
            return 0.0, 0.0
        if not self.windows:
            return b - a, 0.0
        cuts = [a, *(e for e in self.edges if a < e < b), b]
        gained = sum((y - x) / self.slowdown_at(x) for x, y in itertools.pairwise(cuts))
        return gained, (b - a) - gained


@dataclass(frozen=True)
class _Event:
    at_s: float
    worker: bool  # a worker lost (replaced by a spare in place); else a fabric element routed around


def _events(schedule: FailureSchedule, topo: Topology, hosts: list[str], costs: FabricCosts
            ) -> tuple[list[_Event], _Fabric]:
    events, windows = [], []
    for f in schedule.faults:
        if f.kind == FaultKind.WORKER_CRASH:
            events.append(_Event(f.at_s, True))
            continue
        if workers_cut_off(topo, hosts, f):
            events.append(_Event(f.at_s, True))  # its workers move to spares elsewhere: the fabric they use is whole
            continue
        events.append(_Event(f.at_s, False))
        for start, end in f.windows():
            windows.append(_Window(start, math.inf if end is None else end, costs.slowdown(element_class(topo, f))))
    return events, _Fabric(windows)


def goodput(schedule: FailureSchedule, topo: Topology, hosts: list[str], costs: FabricCosts,
            strategy: Strategy) -> Goodput:
    """The run of schedule.hours with its failures, surviving them with `strategy`."""
    problems = strategy_problems(strategy) + ([] if costs.iteration_s > 0 else
                                              [f"iteration_s = {costs.iteration_s}: seconds above 0"])
    if problems:
        raise GoodputError(problems[0])
    events, fabric = _events(schedule, topo, hosts, costs)
    end = schedule.hours * HOUR_S
    if isinstance(strategy, CheckpointRestart):
        return _checkpoint_restart(events, fabric, end, strategy)
    return _in_place(events, fabric, end, strategy, costs.iteration_s)


def strategy_problems(strategy: Strategy) -> list[str]:
    values = ({"interval_s": strategy.interval_s, "write_s": strategy.write_s, "restart_s": strategy.restart_s}
              if isinstance(strategy, CheckpointRestart) else
              {"rejoin_s": strategy.rejoin_s, "reroute_s": strategy.reroute_s})
    out = []
    for name, value in values.items():
        least_ok = value > 0 if name == "interval_s" else value >= 0
        if not (math.isfinite(value) and least_ok):
            out.append(f"{strategy.name}: {name} = {value}: seconds, {'above' if name == 'interval_s' else 'from'} 0")
    return out


def _checkpoint_restart(events: list[_Event], fabric: _Fabric, end: float, s: CheckpointRestart) -> Goodput:
    t, progress, saved, since = 0.0, 0.0, 0.0, 0.0
    lost = down = writing = degraded = 0.0
    restarts = 0
    times = [e.at_s for e in events if e.at_s < end]
    i = 0

    def run_to(b: float) -> None:
        nonlocal t, progress, degraded, since
        gained, extra = fabric.progress(t, b)
        progress += gained
        degraded += extra
        since += b - t
        t = b

    def fail() -> None:
        """At t: roll back to the last checkpoint and restart; failures while down restart it again."""
        nonlocal t, progress, since, lost, down, restarts, i
        lost += progress - saved
        progress, since = saved, 0.0
        up = t
        while True:
            restarts += 1
            i += 1
            up_at = up + s.restart_s
            if i < len(times) and times[i] < min(up_at, end):
                up = times[i]
                continue
            break
        up_at = min(up_at, end)
        down += up_at - t
        t = up_at

    while t < end:
        next_fail = times[i] if i < len(times) else math.inf
        due = t + (s.interval_s - since)
        stop = min(due, next_fail, end)
        run_to(stop)
        if t >= end:
            break
        if next_fail <= due:
            fail()
            continue
        write_end = t + s.write_s
        if next_fail < min(write_end, end):  # the write is lost with the failure
            writing += next_fail - t
            t = next_fail
            fail()
            continue
        writing += min(write_end, end) - t
        t = min(write_end, end)
        if write_end <= end:
            saved, since = progress, 0.0
    return Goodput(CheckpointRestart.name, end, progress, lost, down, writing, degraded, len(times), restarts)


def _in_place(events: list[_Event], fabric: _Fabric, end: float, s: InPlace, iteration_s: float) -> Goodput:
    t, progress = 0.0, 0.0
    lost = down = degraded = 0.0
    failures = 0
    for e in events:
        if e.at_s >= end:
            break
        at = max(e.at_s, t)  # one that came while the job waited is handled when it runs again
        gained, extra = fabric.progress(t, at)
        progress += gained
        degraded += extra
        t = at
        failures += 1
        if e.worker:
            redo = math.fmod(progress, iteration_s)  # the iteration in flight, done again with the spare
            lost += redo
            progress -= redo
        wait = min(s.rejoin_s if e.worker else s.reroute_s, end - t)
        down += wait
        t += wait
    gained, extra = fabric.progress(t, end)
    return Goodput(InPlace.name, end, progress + gained, lost, down, 0.0, degraded + extra, failures, 0)


def young_daly_interval_s(write_s: float, mtbf_s: float) -> float:
    """The checkpoint interval that maximises goodput to first order: sqrt(2 x write cost x MTBF)
    (J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974;
    J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3),
    2006, whose first term it is)."""
    return math.sqrt(2 * write_s * mtbf_s)

