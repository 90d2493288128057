"""What a run's NetReduce jobs do when a switch of theirs dies or comes back (RunSettings subscribes it to the
controller's health events, gradswitch/control/health.py).

- The job's aggregation switch (a spine above the leaves) is down: its workers are told to fall back to ring
  all-reduce (gradswitch/hosts/fallback.py: the signal file of the job's run directory, next odd epoch); once every
  worker has announced (they stopped sending to the switches), the job's cells on the switches still up are
  cleared, so no reduction is left half summed in them.
- It is back (the controller pushed its pipeline and every entry again, its registers start empty; a hung one
  let go on once it had gone through what it was sent while stopped, gradswitch/control/drain.py): once every
  worker has agreed on the fallback, the job's cells on every switch of its tree are cleared again and the
  workers are told to return (next even epoch).
- A switch a worker is attached to (a rack's only switch, a leaf) is down: ring cannot reach that worker either,
  so the job is stopped at once with one line naming the switch and its workers (the run directory's abort file,
  which every worker reads a few times a second), instead of timing out on retransmissions.

The health callback only queues the event: the signals and the register writes are made on a thread of the
watch's own (a subscriber must not write to the fabric from the controller's thread).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradswitch.control.control_plane import ControlPlane
from gradswitch.control.health import HealthEvent, HealthKind
from gradswitch.formats import check_format
from gradswitch.hosts.fallback import MIN_WORKERS, PathSignal, ReductionPath, all_announced, path_of_epoch, write_signal

log = logging.getLogger(__name__)

POLL_S = 0.01
RECORDS_FILE = "netreduce-paths.json"  # in a job's run directory: what the watch did (PathRecord)
# RECORDS_FILE's `format`, beside its `records`; a file written before it had one (a bare list of the records)
# reads as 1
RECORDS_FORMAT = 1


@dataclass
class PathRecord:
    """One change the watch made a job's workers make (times: time.monotonic())."""

    job: int
    path: ReductionPath | None  # ring (fallback), switch (return); None: the job was stopped
    switch: str
    noticed_at: float  # the health event's time
    signalled_at: float  # when the signal (or the abort) was written
    cells_cleared_at: float | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"job": self.job, "path": None if self.path is None else str(self.path), "switch": self.switch,
                "noticed_at": self.noticed_at, "signalled_at": self.signalled_at,
                "cells_cleared_at": self.cells_cleared_at, "detail": self.detail}


def read_records(path: Path) -> list[dict[str, Any]]:
    """A job's RECORDS_FILE: PathRecord.to_dict of each change, in order (FormatError: of another format than
    RECORDS_FORMAT)."""
    raw = json.loads(path.read_text())
    if isinstance(raw, list):  # written before the file had `format`: format 1's records
        raw = {"records": raw}
    records: list[dict[str, Any]] = check_format(raw, path, "NetReduce watch's records", RECORDS_FORMAT,
                                                 missing_is=1)["records"]
    return records


@dataclass
class _Job:
    job: int
    workers: int
    run_dir: Path  # the job's run directory, shared with its workers
    timeout: float  # how long to wait for its workers' announcements (the job's iteration timeout)
    falls_back: bool = True  # an all-reduce job (a graph's reduce-scatter or all-gather job has no fallback)
    epoch: int = 0
    lost: str | None = None  # the aggregation switch it fell back from


@dataclass
class NetReduceWatch:
    control: ControlPlane
    jobs: dict[int, _Job] = field(default_factory=dict)
    records: list[PathRecord] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    _events: queue.Queue[HealthEvent | None] = field(default_factory=queue.Queue)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def add_job(self, job: int, workers: int, run_dir: Path, timeout: float, falls_back: bool = True) -> None:
        self.jobs[job] = _Job(job, workers, run_dir, timeout, falls_back)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="netreduce-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread; each job's records go to its run directory (RECORDS_FILE) when it has any."""
        self._stop.set()
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        for j in self.jobs.values():
            mine = [r.to_dict() for r in self.records if r.job == j.job]
            if mine:
                j.run_dir.mkdir(parents=True, exist_ok=True)
                (j.run_dir / RECORDS_FILE).write_text(json.dumps({"format": RECORDS_FORMAT, "records": mine},
                                                                 indent=1))

    def on_health(self, event: HealthEvent) -> None:
        """The controller's subscriber: queue it (returns at once)."""
        if event.kind in (HealthKind.SWITCH_DOWN, HealthKind.SWITCH_HUNG, HealthKind.SWITCH_UP):
            self._events.put(event)

    # ---- the watch's thread ----

    def _run(self) -> None:
        while not self._stop.is_set():
            event = self._events.get()
            if event is None:
                return
            try:
                # a hung switch is out as a dead one is (the controller routes around it)
                if event.kind in (HealthKind.SWITCH_DOWN, HealthKind.SWITCH_HUNG):
                    self.switch_down(event.target, event.at)
                else:
                    self.switch_up(event.target, event.at)
            except Exception:  # a run's jobs go on (or stop on their own deadlines): logged, not raised here
                log.exception("NetReduce jobs: handling %s failed", event.describe())

    def _wait_announced(self, j: _Job) -> bool:
        """Until every worker of the job announced its epoch (False: the deadline passed or the run ends)."""
        deadline = self.clock() + j.timeout
        while not all_announced(j.run_dir, j.job, j.epoch, j.workers):
            if self._stop.is_set() or self.clock() > deadline:
                return False
            self._stop.wait(POLL_S)
        return True

    def switch_down(self, switch: str, at: float) -> None:
        for j in self.jobs.values():
            active = self.control.netreduce.jobs.get(j.job)
            if active is None or switch not in active.switches:
                continue
            if switch != active.aggregation_switch or active.switches[switch].role != "spine":
                self._stop_job(j, switch, at, [w for w in active.workers
                                               if self.control.fabric.topo.attachment(w)[0] == switch])
                continue
            if j.workers < MIN_WORKERS:
                self._stop_job(j, switch, at, [], f"a job of {j.workers} workers has no ring to fall back to (it "
                               f"needs {MIN_WORKERS}: gradswitch/hosts/fallback.py)")
                continue
            if not j.falls_back:
                self._stop_job(j, switch, at, [], "its reduce-scatter or all-gather has no fallback to ring")
                continue
            if path_of_epoch(j.epoch) == ReductionPath.RING:
                continue  # already on ring
            j.epoch += 1
            j.lost = switch
            write_signal(j.run_dir, j.job, PathSignal(j.epoch, switch, f"switch-down {switch}"))
            record = PathRecord(j.job, ReductionPath.RING, switch, at, self.clock())
            self.records.append(record)
            log.warning("NetReduce job %d: its aggregation switch %s is down: its workers fall back to ring "
                        "all-reduce", j.job, switch)
            if self._wait_announced(j):  # every worker stopped sending to the switches: free the job's cells
                cleared = self.control.netreduce.reset_cells(j.job)
                record.cells_cleared_at = self.clock()
                record.detail = f"cells cleared on {', '.join(cleared) or 'no switch'}"

    def switch_up(self, switch: str, at: float) -> None:
        for j in self.jobs.values():
            if j.lost != switch or path_of_epoch(j.epoch) != ReductionPath.RING:
                continue
            if not self._wait_announced(j):  # the fallback must be agreed before the return is signalled
                log.warning("NetReduce job %d: %s is back, but its workers did not all fall back in %.0f s: "
                            "they stay on ring", j.job, switch, j.timeout)
                continue
            cleared = self.control.netreduce.reset_cells(j.job)  # the restarted switch's, and the leaves' again
            cleared_at = self.clock()
            j.epoch += 1
            j.lost = None
            write_signal(j.run_dir, j.job, PathSignal(j.epoch, switch, f"switch-up {switch}"))
            self.records.append(PathRecord(j.job, ReductionPath.SWITCH, switch, at, self.clock(), cleared_at,
                                           f"cells cleared on {', '.join(cleared)}"))
            log.warning("NetReduce job %d: %s is back: its workers return to in-network aggregation", j.job, switch)

    def _stop_job(self, j: _Job, switch: str, at: float, hosts: list[str], reason: str = "") -> None:
        why = (f"NetReduce job {j.job}: switch {switch} is down and "
               + (f"{', '.join(hosts)} {'is' if len(hosts) == 1 else 'are'} attached to it: neither in-network "
                  "aggregation nor ring all-reduce can reach them" if hosts
                  else f"it aggregated the job: {reason or 'no other path'}") + "; the job stops")
        abort = j.run_dir / "abort"
        if not abort.exists():
            j.run_dir.mkdir(parents=True, exist_ok=True)
            abort.write_text(why)
        self.records.append(PathRecord(j.job, None, switch, at, self.clock(), detail=why))
        log.error("%s", why)
