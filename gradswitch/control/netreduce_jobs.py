"""NetReduce job life cycle in the controller: create, status, teardown.

Each job gets, on every switch it uses, a region of aggregator cells (its quota: 2 x credits
x packets per message) and one context slot per member QP; `create` resets the region (so a
job never sees a previous job's sums), installs the plan of gradswitch/control/controls/netreduce.py
and rolls everything back if any write fails; `teardown` deletes the entries and resets the
registers. Registers are not writable over P4Runtime on BMv2, so resets go through Thrift
(gradswitch/control/bmv2_thrift.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from gradswitch.control.bmv2_thrift import Bmv2Thrift
from gradswitch.control.controls import netreduce as nr
from gradswitch.control.fabric import Fabric
from gradswitch.control.p4rt import Entity, SwitchError
from gradswitch.protocol.netreduce import DEFAULT_CREDITS, JobLayout
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.paths import BMV2_JSON
from gradswitch.topology.model import Topology

log = logging.getLogger(__name__)


class JobError(RuntimeError):
    """A job that cannot be created or found: says why (quota, ids, topology)."""


@cache
def register_names() -> dict[str, str]:
    """Short register name -> the full name BMv2's Thrift API wants."""
    program = json.loads(Path(BMV2_JSON).read_text())
    return {r["name"].split(".")[-1]: r["name"] for r in program.get("register_arrays", [])}


@dataclass
class SwitchState:
    base_cell: int
    cells: int
    member_ids: dict[str, int]
    entries: list[Entity]
    role: str


@dataclass
class ActiveJob:
    layout: JobLayout
    workers: tuple[str, ...]
    aggregation_switch: str
    switches: dict[str, SwitchState] = field(default_factory=dict)


def _used_cells(jobs: list[ActiveJob], switch: str) -> list[tuple[int, int]]:
    return sorted((s.base_cell, s.cells) for j in jobs for sw, s in j.switches.items() if sw == switch)


def _allocate_cells(jobs: list[ActiveJob], switch: str, cells: int) -> int:
    """First fit of a region of `cells` in the switch's aggregator memory."""
    start = 0
    for base, size in _used_cells(jobs, switch):
        if base - start >= cells:
            break
        start = max(start, base + size)
    if start + cells > CONFIG.AGG_CELLS:
        in_use = sum(s for _, s in _used_cells(jobs, switch))
        raise JobError(f"{switch}: no room for {cells} aggregator cells ({CONFIG.AGG_CELLS} in all, {in_use} in use)")
    return start


def _allocate_members(jobs: list[ActiveJob], switch: str, keys: list[str]) -> dict[str, int]:
    used = {i for j in jobs for sw, s in j.switches.items() if sw == switch for i in s.member_ids.values()}
    free = [i for i in range(CONFIG.AGG_MAX_QPS) if i not in used]
    if len(free) < len(keys):
        raise JobError(f"{switch}: no room for {len(keys)} more member QPs ({CONFIG.AGG_MAX_QPS} in all)")
    return dict(zip(keys, free, strict=False))


def place_job(topo: Topology, job: int, workers: list[str] | tuple[str, ...], credits: int,
              others: list[ActiveJob], spine: str | None = None,
              scatter: bool = False, gather: bool = False, quorum: int | None = None,
              deadline_us: int = 0) -> ActiveJob:
    """A job planned and given its regions and member slots next to `others`: the entries of
    every switch, ready to install (what `create` installs, and what trace tests replay). `quorum`: k of N, a cell's
    sum leaves once k workers are in (None: all of them; docs/faults.md, "Stragglers: k of N"), or `deadline_us`
    after its first contribution (0: never)."""
    if any(o.layout.job == job for o in others):
        raise JobError(f"job {job} exists; tear it down first")
    layout = JobLayout(job, len(workers), credits, scatter, gather, quorum, deadline_us)
    plan = nr.plan_job(topo, layout, tuple(workers), spine)
    active = ActiveJob(layout, tuple(workers), plan.aggregation_switch)
    for sw, sp in plan.switches.items():
        base = _allocate_cells(others, sw, layout.cells)
        members = _allocate_members(others, sw, sp.member_keys)
        active.switches[sw] = SwitchState(base, layout.cells, members, nr.bind(sp, layout, base, members),
                                          sp.role_name)
    return active


@dataclass(frozen=True)
class SwitchPart:
    """What one switch holds for a job."""

    role: str  # flat, leaf or spine
    cells: tuple[int, int]  # first and last aggregator cell of the job's region
    member_qps: int  # context slots (one per member QP)

    @property
    def cell_count(self) -> int:
        return self.cells[1] - self.cells[0] + 1


@dataclass(frozen=True)
class JobInfo:
    """A NetReduce job as the controller placed it."""

    job: int
    workers: tuple[str, ...]
    credits: int
    rkey: int
    initial_psn: int
    aggregation_switch: str
    switches: dict[str, SwitchPart]


@dataclass(frozen=True)
class SwitchActivity:
    """A job's counters and the cells it uses on one switch, read now."""

    part: SwitchPart
    cells_in_use: int
    events: dict[str, int]


@dataclass(frozen=True)
class JobStatus:
    info: JobInfo
    switches: dict[str, SwitchActivity]


class NetReduceJobs:
    """The NetReduce jobs of one fabric."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.jobs: dict[int, ActiveJob] = {}

    # ---- registers ----

    def _reset(self, switch: str, state: SwitchState) -> None:
        """The job's cells and context slots back to zero."""
        names = register_names()
        port = self.fabric.addresses[switch].thrift_port
        with Bmv2Thrift(port) as thrift:
            first, last = state.base_cell, state.base_cell + state.cells - 1
            # 0 is the one value the Thrift API (64-bit) writes whole into a bit<AGG_WORD_BITS> cell.
            for reg in (*nr.VALUES, *nr.REGISTERS_PER_CELL):
                thrift.register_write_range(names[reg], first, last, 0)
            for mid in state.member_ids.values():
                start = mid * CONFIG.AGG_MAX_CREDITS
                thrift.register_write_range(names[nr.QP_CONTEXT], start, start + CONFIG.AGG_MAX_CREDITS - 1, 0)

    # ---- life cycle ----

    def create(self, job: int, workers: list[str] | tuple[str, ...], credits: int = DEFAULT_CREDITS,
               spine: str | None = None, scatter: bool = False, gather: bool = False,
               quorum: int | None = None, deadline_us: int = 0) -> JobInfo:
        """`scatter` (`gather`): the job's messages may also be reduce-scatter (all-gather) ones (docs/netreduce.md)."""
        active = place_job(self.fabric.topo, job, workers, credits, list(self.jobs.values()), spine, scatter, gather,
                           quorum, deadline_us)
        self.jobs[job] = active  # reserve the allocations while installing
        installed: list[tuple[str, list[Entity]]] = []
        try:
            for sw, state in active.switches.items():
                self._reset(sw, state)
                # A job number used again starts from no events (its status showed the last one's).
                self.fabric.clear_counter(sw, nr.JOB_EVENTS, nr.job_event_indices(job))
                self.fabric.insert(sw, state.entries)
                installed.append((sw, state.entries))
        except BaseException:
            for sw, entries in reversed(installed):
                try:
                    self.fabric.delete(sw, list(reversed(entries)))
                except SwitchError:
                    log.exception("rollback of job %d on %s failed", job, sw)
            del self.jobs[job]
            raise
        log.info("netreduce job %d: %d workers, %d credits, aggregation at %s", job, len(workers), credits,
                 active.aggregation_switch)
        return self.describe(job)

    def teardown(self, job: int) -> None:
        active = self._job(job)
        errors = []
        for sw, state in active.switches.items():
            try:
                self.fabric.delete(sw, list(reversed(state.entries)))
                if self.fabric.is_up(sw):  # a dead switch's registers went with its process
                    self._reset(sw, state)
            except (SwitchError, RuntimeError) as e:
                errors.append(f"{sw}: {e}")
        del self.jobs[job]
        if errors:
            raise JobError(f"job {job} torn down with errors: " + "; ".join(errors))

    def reset_cells(self, job: int) -> list[str]:
        """The job's cells and per-QP contexts back to empty on every switch of its tree that is up, its entries
        kept: what a NetReduce job's fallback to ring frees (no reduction is left half summed in a cell) and what
        its return to the switches starts from (gradswitch/hosts/fallback.py). Returns the switches reset."""
        active = self._job(job)
        done = []
        for sw, state in active.switches.items():
            if self.fabric.is_up(sw):
                self._reset(sw, state)
                done.append(sw)
        return done

    # ---- looking ----

    def _job(self, job: int) -> ActiveJob:
        try:
            return self.jobs[job]
        except KeyError:
            raise JobError(f"no NetReduce job {job} (jobs: {sorted(self.jobs) or 'none'})") from None

    def describe(self, job: int) -> JobInfo:
        a = self._job(job)
        return JobInfo(job, a.workers, a.layout.credits, a.layout.rkey, a.layout.initial_psn, a.aggregation_switch,
                       {sw: SwitchPart(s.role, (s.base_cell, s.base_cell + s.cells - 1), len(s.member_ids))
                        for sw, s in a.switches.items()})

    def list(self) -> list[JobInfo]:
        return [self.describe(j) for j in sorted(self.jobs)]

    def events(self, switch: str, job: int) -> dict[str, int]:
        names = nr.event_names()
        cells = self.fabric.read_counter(switch, nr.JOB_EVENTS)
        indices = nr.job_event_indices(job)
        return {name: cells[indices[i]].packets for i, name in names.items() if indices[i] in cells}

    def port_events(self, switch: str) -> dict[int, dict[str, int]]:
        """NetReduce's events on a switch by ingress port (non-zero ones): where refused packets came in."""
        return nr.events_by_owner({i: c.packets for i, c in self.fabric.read_counter(switch, nr.PORT_EVENTS).items()})

    def slots_in_use(self, switch: str, job: int) -> int:
        state = self._job(job).switches[switch]
        with Bmv2Thrift(self.fabric.addresses[switch].thrift_port) as thrift:
            cells = thrift.register_read_all(register_names()[nr.CELLS])
        bitmap = (1 << CONFIG.AGG_MAX_MEMBERS) - 1  # a cell's contribution bitmap: its state's low bits
        return sum(1 for c in cells[state.base_cell : state.base_cell + state.cells] if c & bitmap)

    def status(self, job: int) -> JobStatus:
        """Its switches' counters and cells now (a switch that is down holds none: left out)."""
        info = self.describe(job)
        return JobStatus(info, {sw: SwitchActivity(part, self.slots_in_use(sw, job), self.events(sw, job))
                                for sw, part in info.switches.items() if self.fabric.is_up(sw)})
