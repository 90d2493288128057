"""A training iteration as frameworks run it, with the emulated cluster's computation on the clock.

Per iteration each worker runs the forward pass layer by layer, then backward from the last
layer to the first; a layer's gradients exist when its backward ends. Reductions (the plan's
ops: buckets or partitions, gradswitch/workload/plan.py) start in the job's global order as soon as
their gradients exist, while backward goes on (wait-free backpropagation), at most
`in_flight` at a time. The next forward pass waits for every reduced gradient
(`sync = iteration`) or, layer by layer, for that layer's (`sync = layer`).

Computation is emulated: a layer "computes" by waiting for the clock while the transport keeps
running (`Scheduler._advance` polls the engine and resumes every reduction whose condition
holds), never by sleeping blind. Computation times are the compute model's real seconds
stretched by the run's dilation D. The exact check of every result element runs while the
emulated GPU computes (the host's CPU is free then) when it is expected to end before the computation
does, or after the last iteration.

`Scheduler` is the timing logic alone, driven through a `Runtime`: `TrainingLoop` is the
runtime of a worker process (its Comm, its collective, its gradients); tests drive the
scheduler on a simulated clock.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np

from gradswitch.hosts.check_cost import CheckCost
from gradswitch.hosts.comm import Collective, Comm, Wait
from gradswitch.hosts.slowdown import Slowdown, run_dir_of
from gradswitch.workload.encoding import Encoder, IterationCheck, Reduced, job_profile
from gradswitch.workload.floats import ExponentArray, FloatArray
from gradswitch.workload.gradients import Int32Array, Profile
from gradswitch.workload.job import Sync, Training
from gradswitch.workload.plan import Layer, Op, Plan, op_mark, plan
from gradswitch.workload.records import CheckKind, IterationRecord, WrongResult, crash_if_asked, crashes_after
from gradswitch.workload.timeline import Event, EventKind, IterationTiming, timings

POLL_S = 0.01  # longest single wait for packets
BACKGROUND_SLACK_S = 0.02  # host work (result checks) only when the emulated GPU is busy at least this long

ReductionGen = Generator[Wait, None, None]


class Runtime(Protocol):
    """What the scheduler needs from a worker: a clock, a way to let the transport run, reductions."""

    def now(self) -> float: ...

    def wait(self, max_wait: float, what: str) -> None:
        """Let communication progress for at most max_wait seconds (less when something happens)."""

    def start(self, iteration: int, op: Op) -> ReductionGen:
        """Begin reducing op; the generator yields what it waits for and ends when the op is done."""

    def gradients(self, iteration: int, layer: Layer) -> None:
        """Backward of `layer` has just produced its gradients."""

    def background(self, budget_s: float) -> bool:
        """Do one piece of host work (e.g. check a result) expected to take at most budget_s; False when there is
        none that fits."""


@dataclass
class Scheduler:
    """One worker's iterations: computation on the clock, reductions in the plan's order."""

    plan: Plan
    training: Training
    runtime: Runtime
    timeout: float  # an iteration that takes longer fails
    slowdown: Callable[[], float] = lambda: 1.0  # this worker's slow-worker factor, read once per iteration
    events: list[Event] = field(default_factory=list)
    bounds: list[tuple[float, float]] = field(default_factory=list)
    _running: dict[int, tuple[ReductionGen, Wait, float, int]] = field(default_factory=dict)
    _complete: set[int] = field(default_factory=set)
    _produced: set[int] = field(default_factory=set)  # layers whose gradients exist (this iteration)
    _next: int = 0  # next op of the current iteration to start
    _iteration: int = 0
    _deadline: float = 0.0
    _gpu_free: float | None = None  # when the emulated GPU finishes what it was given

    def __post_init__(self) -> None:
        ops = self.plan.ops
        self._layer_ops = self.plan.layer_ops()
        self._op_layers = [{self.plan.tensor_layer[t] for t in op.tensors} for op in ops]
        # exponent mode: a values op needs its tensors' codes reduced first
        codes_of: dict[int, int] = {}
        self._deps: list[set[int]] = []
        for op in ops:
            if op.codes:
                codes_of.update({t: op.index for t in op.tensors})
                self._deps.append(set())
            else:
                self._deps.append({codes_of[t] for t in op.tensors if t in codes_of})
        self._dilation = self.training.dilation
        self._slowdown = 1.0  # the slow-worker factor of the current iteration (gradswitch/hosts/slowdown.py)

    # ---- reductions ----

    def _may_start(self, i: int) -> bool:
        window = self.training.in_flight
        return (self._op_layers[i] <= self._produced and self._deps[i] <= self._complete
                and (i < window or i - window in self._complete))

    def _pump(self) -> None:
        """Start what may start (in order), resume what may resume, until nothing changes."""
        rt = self.runtime
        ops = self.plan.ops
        progressed = True
        while progressed:
            progressed = False
            while self._next < len(ops) and self._may_start(self._next):
                op = ops[self._next]
                gen = rt.start(self._iteration, op)
                lane = min(set(range(self.training.in_flight + 1)) - {r[3] for r in self._running.values()})
                self._running[op.index] = (gen, (lambda: True), rt.now(), lane)
                self._next += 1
                progressed = True
            for i, (gen, wait, started, lane) in list(self._running.items()):
                if not wait():
                    continue
                progressed = True
                try:
                    self._running[i] = (gen, gen.send(None), started, lane)
                except StopIteration:
                    del self._running[i]
                    self._complete.add(i)
                    self.events.append(Event(self._iteration, EventKind.OP, f"op {i}", started, rt.now(), lane))

    def _advance(self, done: Callable[[], bool] | None, until: float | None, what: str) -> bool:
        """Keep reductions going until done() holds or the clock reaches `until` (computation).
        True when done() held at once (nothing was waited for)."""
        rt = self.runtime
        first = True
        while True:
            self._pump()
            now = rt.now()
            if done is not None and done():
                return first
            first = False
            if until is not None and now >= until:
                return first
            if now > self._deadline:
                running = ", ".join(f"op {i}" for i in sorted(self._running)) or "none"
                raise TimeoutError(f"iteration {self._iteration} took over {self.timeout:.1f} s waiting for {what} "
                                   f"(reductions in progress: {running}; next to start: op {self._next})")
            budget = None if until is None else until - now - BACKGROUND_SLACK_S
            if budget is not None and budget > 0 and rt.background(budget):
                continue
            rt.wait(POLL_S if until is None else max(0.0, min(POLL_S, until - now)), what)

    def _may_forward(self, layer: Layer) -> bool:
        """May the next forward pass compute `layer` (the reductions it needs are done)?"""
        if self.training.sync == Sync.ITERATION:
            return len(self._complete) == len(self.plan.ops)
        return self._layer_ops[layer.index] <= self._complete

    def _compute(self, iteration: int, kind: EventKind, layer: Layer, seconds: float, waited: bool) -> float:
        """The emulated GPU computes `layer`: it starts when the GPU is free (or, if it had to wait for a
        gradient, now) and ends `seconds` x D later on the clock. The GPU's timeline is what was modelled:
        this loop noticing an end a little late does not delay the next layer. Returns the start."""
        now = self.runtime.now()
        start = now if waited or self._gpu_free is None else min(now, self._gpu_free)
        end = start + seconds * self._dilation * self._slowdown
        self._advance(None, end, f"{kind} of {layer.name}")
        self._gpu_free = end
        self.events.append(Event(iteration, kind, layer.name, start, end))
        return start

    # ---- iterations ----

    def run(self, iterations: int, finished: Callable[[int], None] = lambda i: None) -> list[IterationTiming]:
        """Run the iterations; `finished(i)` is called when iteration i's end is known."""
        layers = self.plan.layers
        starts: list[float] = []
        for it in range(iterations):
            self._deadline = self.runtime.now() + self.timeout
            self._slowdown = self.slowdown()
            for layer in layers:
                waited = False
                if it > 0:
                    waited = not self._advance(lambda layer=layer: self._may_forward(layer), None,  # type: ignore[misc]
                                               f"the reduced gradients of {layer.name} (iteration {it - 1})")
                start = self._compute(it, EventKind.FORWARD, layer, layer.forward_s, waited)
                if layer.index == 0:
                    starts.append(start)
                    if it > 0:
                        self.bounds.append((starts[it - 1], start))  # iteration it-1 is complete: kept on a failure
                        finished(it - 1)
            self._new_iteration(it)
            for layer in reversed(layers):
                self._compute(it, EventKind.BACKWARD, layer, layer.backward_s, False)
                self.runtime.gradients(it, layer)
                self._produced.add(layer.index)
        immediate = self._advance(lambda: self._may_forward(layers[0]), None,
                                  f"the reduced gradients (iteration {iterations - 1})")
        last_end = self._gpu_free if immediate and self._gpu_free is not None else self.runtime.now()
        self._advance(lambda: len(self._complete) == len(self.plan.ops), None, "the last reductions")
        self.bounds.append((starts[-1], last_end))
        finished(iterations - 1)
        return timings(self.events, self.bounds)

    def _new_iteration(self, it: int) -> None:
        """Backward of iteration `it` begins: every reduction of the previous one is complete, since
        each layer's forward needed its gradients (either sync)."""
        assert it == 0 or (len(self._complete) == len(self.plan.ops) and not self._running)
        self._iteration = it
        self._produced = set()
        self._complete = set()
        self._next = 0


# ---- the worker's runtime ----


@dataclass
class _Tensor:
    """One logical tensor of one iteration on this worker, from its gradient to its checked sum."""

    gradient: Int32Array | FloatArray
    send: Int32Array  # what its values ops carry (exponent mode: known once the codes are reduced)
    saturated: int
    codes_send: Int32Array | None = None
    codes_sum: Int32Array | None = None
    exponents: ExponentArray | None = None
    total: Int32Array | None = None
    left: int = 0  # elements of its values still being reduced


def op_data(op: Op, tensors: dict[int, _Tensor]) -> Int32Array:
    parts = []
    for p in op.pieces:
        t = tensors[p.tensor]
        source = t.codes_send if p.codes else t.send
        assert source is not None
        parts.append(source[p.lo : p.hi])
    return np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, dtype=np.int32)


class TrainingLoop:
    """A worker's training iterations (JobConfig.training): the Runtime of its Scheduler."""

    def __init__(self, comm: Comm, collective: Collective) -> None:
        self.comm = comm
        self.cfg = comm.cfg
        assert self.cfg.training is not None
        self.training: Training = self.cfg.training
        self.collective = collective
        self.plan = plan(self.cfg)
        self.profile: Profile = job_profile(self.cfg)
        self.encoder = Encoder(self.cfg)
        self.ranks = [w.node_id for w in self.cfg.workers]
        self.rank = comm.me.node_id
        self.largest_op = max(op.elements for op in self.plan.ops)
        self.in_flight = self.training.in_flight
        self.scheduler = Scheduler(self.plan, self.training, self, self.cfg.iteration_timeout,
                                   Slowdown(run_dir_of(comm), self.rank).factor)
        self.tensors: dict[int, dict[int, _Tensor]] = {}  # iteration -> logical tensor -> state
        self.pending: list[tuple[int, int]] = []  # (iteration, tensor) reduced, not yet checked
        self.cost = CheckCost()
        self.checks: dict[int, IterationCheck] = {}
        self.zero_filled: dict[int, int] = {}
        self._zero_at_start = 0
        self.lossy = comm.dlcp is not None and comm.dlcp.drop
        self._ahead: dict[int, Int32Array | FloatArray] = {}  # DLCP: this iteration's gradients not yet produced

    # ---- Runtime ----

    def now(self) -> float:
        return time.monotonic()

    def wait(self, max_wait: float, what: str) -> None:
        self.comm.step(max_wait, what)

    def gradients(self, iteration: int, layer: Layer) -> None:
        if iteration not in self.tensors and self.comm.dlcp is not None:
            # Backward's first layer: DLCP's magnitude thresholds need the whole iteration's gradient
            # before its first write, so it is generated now and handed out layer by layer.
            self._ahead = {j: self.encoder.gradient(n, self.rank, iteration, j)
                           for j, n in enumerate(self.plan.elements)}
            self.comm.set_magnitudes(iteration, [self.encoder.magnitude_values(x) for x in self._ahead.values()])
        state = self.tensors.setdefault(iteration, {})
        for j in layer.tensors:
            ahead = self._ahead.pop(j, None)
            x = ahead if ahead is not None else self.encoder.gradient(self.plan.elements[j], self.rank, iteration, j)
            first, saturated = self.encoder.first_wire(x)
            if self.encoder.exponent:
                state[j] = _Tensor(x, np.zeros(0, dtype=np.int32), 0, codes_send=first, left=self.plan.elements[j])
            else:
                state[j] = _Tensor(x, first, saturated, left=self.plan.elements[j])

    def start(self, iteration: int, op: Op) -> ReductionGen:
        seq = iteration * len(self.plan.ops) + op.index
        state = self.tensors[iteration]
        data = op_data(op, state)
        result = yield from self.collective.reduce_op(iteration, op.index, seq, data, op_mark(self.cfg, op))
        offset = 0
        for p in op.pieces:
            t = state[p.tensor]
            got = result[offset : offset + p.elements]
            offset += p.elements
            if p.codes:
                t.codes_sum = got.copy()
                t.send, t.exponents, t.saturated = self.encoder.values_wire(t.gradient, t.codes_sum)
                continue
            if t.total is None:
                t.total = np.zeros(self.plan.elements[p.tensor], dtype=np.int32)
            t.total[p.lo : p.hi] = got
            t.left -= p.elements
            if t.left == 0:
                self.pending.append((iteration, p.tensor))

    def background(self, budget_s: float = math.inf) -> bool:
        """Check the oldest reduced tensor if its check is expected to take at most budget_s: a host busy past the
        computation would answer its peers late (their writes unacknowledged past the RTO: spurious timeouts, whole
        windows resent), as the graph engine's checks are budgeted (gradswitch/hosts/check_cost.py)."""
        if not self.pending:
            return False
        iteration, j = self.pending[0]
        values = self.plan.elements[j] * (len(self.ranks) + 1)  # every member's gradient made, and the sum compared
        if self.cost.estimate_s(values) > budget_s:
            return False
        self.pending.pop(0)
        began = time.monotonic()
        self._check(iteration, j)
        self.cost.record(values, time.monotonic() - began)
        return True

    def _check(self, iteration: int, j: int) -> None:
        t = self.tensors[iteration].pop(j)
        assert t.total is not None
        got = Reduced(t.total, t.codes_sum, t.exponents, t.saturated)
        want, reference = self.encoder.expected(self.plan.elements[j], self.ranks, iteration, j)
        c = self.checks.setdefault(iteration, IterationCheck()).add(self.encoder, got, want, reference)
        if c.wrong_elements and not self.lossy:
            raise WrongResult(f"{self.comm.me.host}: iteration {iteration}: tensor {j}: {c.wrong_elements} wrong "
                              "elements", self._records(self.scheduler.bounds or []))

    # ---- the loop ----

    def run(self, progress: Callable[[int], None] = lambda i: None) -> list[IterationRecord]:
        def finished(i: int) -> None:
            self.zero_filled[i] = self.comm.zero_filled - self._zero_at_start
            self._zero_at_start = self.comm.zero_filled
            progress(i)
            if crashes_after(self.cfg, self.comm.me.node_id, i):
                # its iteration ended with its outputs; what it wrote its peers is delivered before it dies (as the
                # loops that drain every iteration): else a peer may lack its last writes and lose the iteration
                self.comm.drain()
            crash_if_asked(self.cfg, self.comm.me.node_id, i)

        self.scheduler.run(self.cfg.iterations, finished)
        while self.pending:  # what the computation did not leave time for
            self.background()
        self.comm.drain()
        records = self._records(self.scheduler.bounds)
        bad = [r for r in records if not r.correct]
        if bad:
            raise WrongResult(f"{self.comm.me.host}: iteration {bad[0].index}: {bad[0].wrong_elements} wrong elements",
                              records)
        return records

    @property
    def records(self) -> list[IterationRecord]:
        """The iterations completed so far, every reduction of each checked (what a node keeps when its run
        fails: a peer died, the job was aborted). A wrong sum found here stays in its iteration's record."""
        with contextlib.suppress(WrongResult):
            while self.pending:  # reduced, not yet checked
                self.background()
        done = {i for i, c in self.checks.items() if c.checked == len(self.plan.elements)}
        return [r for r in self._records(self.scheduler.bounds) if r.index in done]

    def _records(self, bounds: list[tuple[float, float]]) -> list[IterationRecord]:
        records = []
        for t in timings(self.scheduler.events, bounds):
            c = self.checks.get(t.index, IterationCheck())
            ok = c.checked == len(self.plan.elements) and c.correct(self.comm.dlcp)
            extra = {"compute_s": t.compute_s, "comm_s": t.comm_s, "exposed_comm_s": t.exposed_comm_s,
                     "overlap": t.overlap, "zero_filled_packets": float(self.zero_filled.get(t.index, 0)),
                     "relative_error": c.relative_error}
            check = CheckKind.EXACT if c.checked else CheckKind.NONE
            records.append(IterationRecord(t.index, t.start, t.end, ok, c.wrong, c.err, c.saturated, extra,
                                           check=check))
        return records

    def extra(self) -> dict[str, object]:
        """The worker's timeline (every iteration) and plan figures, for the runner's report."""
        return {"timeline": [asdict(e) for e in self.scheduler.events],
                "plan": {"ops": len(self.plan.ops), "layers": len(self.plan.layers),
                         "largest_op_elements": self.largest_op}}
