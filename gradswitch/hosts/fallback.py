"""NetReduce falls back to ring all-reduce when its aggregating switch dies, and returns when it is back.

The signal (control plane -> workers) is a file of the run directory, `netreduce-path-<job>.json`, that the
runner's RunSettings writes (gradswitch/experiment/network_settings.py) when the controller reports the job's
aggregation switch down or up: an epoch number and the path it asks for. Odd epochs ask for ring, even ones
(from 2) for the switch again. Workers poll it (a stat a few times a second, from every turn of their transport).

Granularity: one reduction (one `reduce_op`: a bucket or partition of an iteration). Every worker numbers its
reductions alike (they start in the same order), holds the input of each until no one can need it again, and
several are in flight at once; an iteration boundary would make the fallback wait for the next iteration while
the in-flight reductions hang on a dead switch.

Agreement: which path each reduction took must be the same on every worker, or a reduction half done by the
switch on one worker and by ring on another mixes. On seeing a new epoch, a worker announces one number in
`netreduce-agree-<job>-<epoch>-<rank>` and waits for all N announcements (reductions it has not finished stay
where they are meanwhile):
- fallback (odd epoch): the first reduction it has not finished. F = the smallest of the N; every reduction
  from F on goes by ring, on every worker. Below F every worker has its result. A reduction some workers
  finished by the switch but another did not is redone by ring everywhere from the inputs the workers kept
  (the ones that had it take part and drop the ring's copy): every sum exact. The worker stops sending to the
  switch when it announces (its job QP's requests are dropped, so its retransmissions never exhaust their
  retries against a dead switch).
- return (even epoch): the next reduction it would start, and its next message number. R = the largest; every
  reduction from R on goes through the switch again, whose cells the controller cleared before writing the
  signal; every worker's job QPs restart at the PSN of message K (the largest next message number, plus a
  window of gap so that nothing of the old messages can be mistaken for a new one).
Ring reductions run one at a time, in reduction order, in the direction opposite NetReduce's (rank r writes to
r - 1), on the halves of the job QPs NetReduce leaves unused: no new QP, no new switch entry, and nothing the
switch mistakes for a contribution. So a job needs at least 3 workers to fall back (with 2 the reverse ring is
NetReduce's own connection).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

import numpy as np

from gradswitch.formats import check_format
from gradswitch.hosts.comm import Comm, OpGen, Wait
from gradswitch.hosts.ring import ring_steps
from gradswitch.hosts.whole_file import write_whole
from gradswitch.protocol.choice import Choice
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.worker_result import FallbackEntry, PathChangeEntry

POLL_S = 0.02  # how often a worker reads the signal file
SIGNAL_FORMAT = 1  # the signal file's `format` (a file of one run: written and read by the same gradswitch)
RING_RKEY = 0x52494E46  # "RINF": the fallback ring's region (not a NetReduce job's key, 0x4E52....)
MIN_WORKERS = 3  # a reverse ring distinct from the job's connections


class ReductionPath(Choice):
    SWITCH = "switch"
    RING = "ring"


def path_of_epoch(epoch: int) -> ReductionPath:
    """Epoch 0 (the start) and every even epoch: the switch; odd epochs: ring."""
    return ReductionPath.RING if epoch % 2 else ReductionPath.SWITCH


@dataclass(frozen=True)
class PathSignal:
    """What the control plane asks of a job's workers: the path for `epoch` (path_of_epoch), and why."""

    epoch: int
    switch: str  # the switch whose loss (or return) it is
    reason: str

    @property
    def path(self) -> ReductionPath:
        return path_of_epoch(self.epoch)

    def to_dict(self) -> dict[str, object]:
        return {"epoch": self.epoch, "path": str(self.path), "switch": self.switch, "reason": self.reason}


def signal_file(run_dir: Path, job: int) -> Path:
    return run_dir / f"netreduce-path-{job}.json"


def agree_file(run_dir: Path, job: int, epoch: int, rank: int) -> Path:
    return run_dir / f"netreduce-agree-{job}-{epoch}-{rank}"


def finished_file(run_dir: Path, job: int, rank: int) -> Path:
    """Written by a worker that finished its iterations; it leaves once every worker's is there."""
    return run_dir / f"netreduce-finished-{job}-{rank}"


def write_signal(run_dir: Path, job: int, signal: PathSignal) -> None:
    write_whole(signal_file(run_dir, job), json.dumps({"format": SIGNAL_FORMAT, **signal.to_dict()}))


def read_signal(run_dir: Path, job: int) -> PathSignal | None:
    """The job's signal, None before the first (FormatError: of another format than SIGNAL_FORMAT)."""
    path = signal_file(run_dir, job)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    d = check_format(raw, path, "NetReduce path signal", SIGNAL_FORMAT)
    return PathSignal(int(d["epoch"]), str(d["switch"]), str(d["reason"]))


@dataclass(frozen=True)
class Announcement:
    """One worker's number for an epoch's agreement (docs above), and its next message number (return)."""

    reduction: int
    message: int


def announce(run_dir: Path, job: int, epoch: int, rank: int, a: Announcement) -> None:
    write_whole(agree_file(run_dir, job, epoch, rank), f"{a.reduction} {a.message}")


def announcements(run_dir: Path, job: int, epoch: int, workers: int) -> list[Announcement] | None:
    """Every worker's announcement for the epoch, or None while one is missing."""
    out = []
    for rank in range(workers):
        try:
            reduction, message = agree_file(run_dir, job, epoch, rank).read_text().split()
        except FileNotFoundError:
            return None
        out.append(Announcement(int(reduction), int(message)))
    return out


def all_announced(run_dir: Path, job: int, epoch: int, workers: int) -> bool:
    return all(agree_file(run_dir, job, epoch, rank).exists() for rank in range(workers))


class ReverseRing:
    """Ring all-reduce, one reduction at a time, rank r writing to r - 1 and receiving from r + 1 (the job QPs'
    halves NetReduce does not use); reduction number `r` names its writes (gradswitch/hosts/ring.py's step tags)."""

    def __init__(self, comm: Comm, rank: int, ranks: list[int], largest: int) -> None:
        self.comm = comm
        self.n = len(ranks)
        self.rank = rank
        self.to = ranks[(rank - 1) % self.n]
        self.frm = ranks[(rank + 1) % self.n]
        self.steps = 2 * (self.n - 1)
        self.slot_bytes = max(4, -(-largest // self.n) * 4)
        self.region = comm.register(RING_RKEY, 2 * self.steps * self.slot_bytes)

    def _va(self, r: int, step: int) -> int:
        return ((r % 2) * self.steps + step) * self.slot_bytes

    def reduce_op(self, r: int, data: Int32Array) -> OpGen:
        acc: Int32Array = data.astype(np.int32).copy()
        if len(acc) > self.slot_bytes // 4 * self.n:
            raise ValueError(f"reduction {r}: {len(acc)} values, more than the fallback ring's slots hold")
        # The ring runs backwards: rank r's "next" is r - 1, so chunks are indexed by the position in that ring.
        return (yield from ring_steps(self.comm, acc, (-self.rank) % self.n, self.n, self.to, self.frm, r, RING_RKEY,
                                      self.region, partial(self._va, r)))


class SwitchPath(Protocol):
    """What the fallback needs of a NetReduce worker."""

    @property
    def next_message(self) -> int: ...

    def switch_op(self, data: Int32Array) -> OpGen:
        """The in-network all-reduce of data (its messages get the next message numbers)."""

    def abandon(self) -> None:
        """Stop sending to the switch: drop every request of the job QP (nothing retransmitted)."""

    def resume(self, message: int) -> None:
        """Both job QPs restart at message `message`'s PSN; the next message gets that number."""


@dataclass
class PathChange:
    """One agreed change of path, as the worker's result reports it (times: time.monotonic())."""

    epoch: int
    path: ReductionPath
    switch: str
    from_reduction: int  # the first reduction that took the new path
    signalled_at: float  # when this worker saw the signal (and, for a fallback, stopped sending to the switch)
    agreed_at: float  # when every worker's announcement was in

    def to_dict(self) -> PathChangeEntry:
        return {"epoch": self.epoch, "path": str(self.path), "switch": self.switch,
                "from_reduction": self.from_reduction, "signalled_at": self.signalled_at, "agreed_at": self.agreed_at}


MESSAGE_GAP = 64  # message numbers skipped at a return (more than any window: AGG_MAX_CREDITS x 2)


@dataclass
class Fallback:
    """One worker's choice of path for every reduction (module docstring)."""

    comm: Comm
    switch: SwitchPath
    run_dir: Path
    job: int
    rank: int
    workers: int
    ring: ReverseRing
    clock: Callable[[], float] = time.monotonic
    segments: list[tuple[int, ReductionPath]] = field(default_factory=lambda: [(0, ReductionPath.SWITCH)])
    epoch: int = 0
    pending: int | None = None  # the epoch announced, while waiting for the others
    pending_since: float = 0.0
    pending_switch: str = ""
    announced_next: int = 0  # (return) the next reduction when this worker announced
    next_r: int = 0
    completed: set[int] = field(default_factory=set)  # reductions whose result this worker has
    inputs: dict[int, tuple[int, Int32Array]] = field(default_factory=dict)  # r -> (iteration, input)
    ring_next: int = 0  # the next reduction the ring runs (ring reductions run one at a time, in order)
    ring_done: set[int] = field(default_factory=set)
    redo: Generator[Wait, None, Int32Array] | None = None  # a finished reduction the ring redoes for the others
    redo_wait: Wait | None = None
    paths: dict[int, ReductionPath] = field(default_factory=dict)  # reduction -> the path that gave its result
    iteration_of: dict[int, int] = field(default_factory=dict)
    redone: int = 0
    changes: list[PathChange] = field(default_factory=list)
    _next_poll: float = 0.0

    # ---- the signal and the agreement ----

    def poll(self) -> bool:
        """Read the signal (at most every POLL_S), announce, conclude an agreement, drive a redo. Never blocks;
        True when something changed."""
        changed = self._drive_redo()
        now = self.clock()
        if now < self._next_poll:
            return changed
        self._next_poll = now + POLL_S
        if self.pending is None:
            signal = read_signal(self.run_dir, self.job)
            if signal is not None and signal.epoch > self.epoch:
                self._announce(self.epoch + 1, signal.switch, now)
                changed = True
        if self.pending is not None:
            got = announcements(self.run_dir, self.job, self.pending, self.workers)
            if got is not None:
                self._agree(got)
                changed = True
        return changed

    def _first_unfinished(self) -> int:
        return min((r for r in range(self.next_r) if r not in self.completed), default=self.next_r)

    def _announce(self, epoch: int, switch: str, now: float) -> None:
        self.pending, self.pending_since, self.pending_switch = epoch, now, switch
        if path_of_epoch(epoch) == ReductionPath.RING:
            self.switch.abandon()
            a = Announcement(self._first_unfinished(), self.switch.next_message)
        else:
            self.announced_next = self.next_r
            a = Announcement(self.next_r, self.switch.next_message)
        announce(self.run_dir, self.job, epoch, self.rank, a)

    def _agree(self, got: list[Announcement]) -> None:
        assert self.pending is not None
        epoch, path = self.pending, path_of_epoch(self.pending)
        if path == ReductionPath.RING:
            start = min(a.reduction for a in got)
            self.ring_next = start
            self.ring_done = {r for r in self.ring_done if r < start}
        else:
            start = max(a.reduction for a in got)
            self.switch.resume(max(a.message for a in got) + MESSAGE_GAP)
        self.segments.append((start, path))
        self.changes.append(PathChange(epoch, path, self.pending_switch, start, self.pending_since, self.clock()))
        self.epoch, self.pending = epoch, None

    def decided(self, r: int) -> bool:
        """Is reduction r's path known (no agreement pending that could change it)?"""
        if self.pending is None:
            return True
        return path_of_epoch(self.pending) == ReductionPath.SWITCH and r < self.announced_next

    def path_of(self, r: int) -> ReductionPath:
        return next(p for start, p in reversed(self.segments) if start <= r)

    # ---- reductions ----

    def reduce_op(self, iteration: int, data: Int32Array) -> OpGen:
        """One reduction, by the switch or by ring as agreed; its result is exact either way."""
        r = self.next_r
        self.next_r += 1
        self.iteration_of[r] = iteration
        self.inputs[r] = (iteration, data.copy())
        for old in [k for k, (it, _) in self.inputs.items() if it < iteration - 1]:
            del self.inputs[old]  # no worker can need them again (see the module docstring)
        self.poll()
        while True:
            if not self.decided(r):
                yield partial(self._decided_now, r)
                continue
            if self.path_of(r) == ReductionPath.SWITCH:
                result = yield from self._by_switch(r, data)
                if result is None:
                    continue  # abandoned: the agreement sends it to ring
                return self._finish(r, ReductionPath.SWITCH, result)
            while self.ring_next != r:  # earlier ring reductions first, one at a time
                yield partial(self._ring_turn, r)
            result = yield from self._ring_step(self.ring.reduce_op(r, data))
            self.ring_done.add(r)
            self.ring_next = r + 1
            return self._finish(r, ReductionPath.RING, result)

    def _finish(self, r: int, path: ReductionPath, result: Int32Array) -> Int32Array:
        self.completed.add(r)
        self.paths[r] = path
        return result

    def _decided_now(self, r: int) -> bool:
        self.poll()
        return self.decided(r)

    def _ring_turn(self, r: int) -> bool:
        self.poll()
        return self.ring_next == r

    def _by_switch(self, r: int, data: Int32Array) -> Generator[Wait, None, Int32Array | None]:
        """The in-network path, given up (None) as soon as a fallback is announced or agreed for r."""
        gen = self.switch.switch_op(data)
        try:
            wait = next(gen)
            while True:
                yield partial(self._switch_ready, wait, r)
                if not self.decided(r) or self.path_of(r) != ReductionPath.SWITCH:
                    gen.close()  # (before it posts anything more: the job QP's requests are dropped)
                    return None
                if wait():
                    wait = gen.send(None)
        except StopIteration as done:
            out: Int32Array = done.value
            return out

    def _switch_ready(self, wait: Wait, r: int) -> bool:
        self.poll()  # (another reduction's poll may have seen the signal: the state, not poll's answer, decides)
        return wait() or not (self.decided(r) and self.path_of(r) == ReductionPath.SWITCH)

    def _ring_step(self, gen: OpGen) -> Generator[Wait, None, Int32Array]:
        """Run a ring reduction, resuming it only when what it waits for is there (and polling meanwhile)."""
        try:
            wait = next(gen)
            while True:
                yield partial(self._ring_ready, wait)
                if wait():
                    wait = gen.send(None)
        except StopIteration as done:
            out: Int32Array = done.value
            return out

    def _ring_ready(self, wait: Wait) -> bool:
        self.poll()
        return wait()

    def _drive_redo(self) -> bool:
        """A reduction this worker finished by the switch but the agreement sends to ring: it takes part with its
        kept input (the others need its share), driven from the transport's turns, since no reduction of its
        scheduler waits for it."""
        changed = False
        while True:
            if self.redo is None:
                r = self.ring_next
                if not (r in self.completed and r not in self.ring_done and self.path_of(r) == ReductionPath.RING
                        and self.pending is None):
                    return changed
                if r not in self.inputs:
                    raise RuntimeError(f"reduction {r}: redone by ring, but its input is no longer kept")
                self.redo = self.ring.reduce_op(r, self.inputs[r][1])
                self.redo_wait = None
            if self.redo_wait is not None and not self.redo_wait():
                return changed
            try:
                self.redo_wait = next(self.redo) if self.redo_wait is None else self.redo.send(None)
                changed = True
            except StopIteration:
                self.ring_done.add(self.ring_next)
                self.ring_next += 1
                self.redone += 1
                self.redo, self.redo_wait = None, None
                changed = True

    # ---- the end of the run ----

    def settle(self, done: Callable[[], bool], timeout: float) -> None:
        """Before the worker leaves: keep answering agreements and redoing until `done` (every worker finished
        its iterations), so that a worker that finished by the switch is there for those whose reductions the
        switch's loss sent to ring."""
        def settled() -> bool:
            self.comm.collect()
            self.poll()  # (announces, agrees and redoes for the others meanwhile)
            return done()  # every worker has every result: no agreement or redo is needed by anyone any more

        self.comm.engine.run_until(settled, timeout,
                                   "the other workers to finish (NetReduce fallback)", self.comm.aborted)

    def report(self) -> FallbackEntry:
        by_iteration: dict[int, int] = {}
        for r, p in self.paths.items():
            if p == ReductionPath.RING:
                by_iteration[self.iteration_of[r]] = by_iteration.get(self.iteration_of[r], 0) + 1
        return {"by_switch": sum(1 for p in self.paths.values() if p == ReductionPath.SWITCH),
                "by_ring": sum(1 for p in self.paths.values() if p == ReductionPath.RING),
                "redone_for_others": self.redone,
                "ring_by_iteration": {str(k): v for k, v in sorted(by_iteration.items())},
                "changes": [c.to_dict() for c in self.changes]}

    def ring_reductions(self, iteration: int) -> int:
        return sum(1 for r, p in self.paths.items() if p == ReductionPath.RING and self.iteration_of[r] == iteration)
