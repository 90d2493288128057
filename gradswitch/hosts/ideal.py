"""The iteration a job would have on the emulated cluster if every reduction ran at its link-rate bound.

The same plan and the same scheduler as a worker (gradswitch/workload/plan.py, gradswitch/hosts/iteration.py),
driven on a simulated clock in real seconds: computation as the compute model says, and each
reduction taking its link-rate bound at the emulated rate (ring 2(N-1)S/(N B), PS N S/(P B),
NetReduce S/B), one after another on the link in the plan's order (a reduction starts when the
link is free). No per-packet or per-message cost, no loss. The ratio of a run's measured
real-equivalent iteration to this one is the testbed's own overhead; the ratio between two
algorithms' ideal iterations is what the algorithms alone would give.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace

from gradswitch.hosts.iteration import ReductionGen, Scheduler
from gradswitch.workload.job import JobConfig
from gradswitch.workload.plan import Layer, Op, allreduce_bound_s, plan


@dataclass
class LinkModel:
    """A scheduler runtime whose clock moves only when the scheduler waits, to the next event."""

    op_s: dict[int, float]  # op index -> seconds on the link
    t: float = 0.0
    link_free: float = 0.0
    _ends: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    def wait(self, max_wait: float, what: str) -> None:
        until = self.t + max_wait
        while self._ends and self._ends[0] <= self.t:
            heapq.heappop(self._ends)
        self.t = min(until, self._ends[0]) if self._ends else until

    def start(self, iteration: int, op: Op) -> ReductionGen:
        begin = max(self.t, self.link_free)
        done = self.link_free = begin + self.op_s[op.index]
        heapq.heappush(self._ends, done)
        yield lambda: self.t >= done - 1e-12

    def gradients(self, iteration: int, layer: Layer) -> None:
        pass

    def background(self, budget_s: float) -> bool:
        return False


@dataclass(frozen=True)
class Ideal:
    """A steady-state iteration at the reductions' link-rate bounds (real seconds)."""

    iteration_s: float
    link_busy_s: float  # the busiest link's time carrying the iteration's gradients

    @property
    def link_load(self) -> float:
        """The busiest link's load over the iteration: what a link-bound run with this computation reaches."""
        return min(1.0, self.link_busy_s / self.iteration_s) if self.iteration_s > 0 else 0.0


def ideal_iteration_s(cfg: JobConfig, iterations: int = 3) -> float:
    """Real seconds of a steady-state iteration of a training job at its reductions' link-rate bounds."""
    return ideal(cfg, iterations).iteration_s


def ideal(cfg: JobConfig, iterations: int = 3) -> Ideal:
    """A training job's iteration with every reduction at its link-rate bound: the second to last of
    `iterations` simulated ones (the first warms up; the last has no next forward to end it)."""
    if iterations < 3:
        raise ValueError(f"iterations = {iterations}: the ideal needs at least 3 (a warm-up, one, and a next)")
    tr = cfg.training
    if tr is None:
        raise ValueError("the job does not train (JobConfig.training is None)")
    p = plan(cfg)
    rate = tr.emulate.link_gbps * 1e9 / 8
    workers, servers = len(cfg.workers), len(cfg.servers)
    op_s = {op.index: allreduce_bound_s(cfg.algo, workers, servers, 4 * op.elements / cfg.scale, rate)
            for op in p.ops}
    scheduler = Scheduler(p, replace(tr, dilation=1.0), LinkModel(op_s), timeout=1e9)
    return Ideal(scheduler.run(iterations)[-2].time_s, sum(op_s.values()))
