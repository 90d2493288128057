"""Faults on the simulator (docs/faults.md "On the simulator"): a run's faults (gradswitch/topology/faults.py Fault) as
the configuration's `fault_schedule`, each resolved on the topology and job 1 (a switch or link fault's windows from
Fault.windows(), a worker fault's node and host), and what gradswitch-sim measured per fault (`faults` in its results)
read back as gradswitch.workload.fault_record.FaultRecord, the record both backends report.

The simulated control plane notices a dead switch and routes around it `switch_detect_s` after its crash, and a
link's change of state `link_detect_s` after it (routes around it, or back over it): the time from the failure until
the BMv2 controller has pushed its new routes (gradswitch/control/health.py, gradswitch/control/fabric.py). The
defaults are the medians bench/switch_faults.py measured on BMv2 (bench/results/switch-faults.json `switch_reroute_s`,
`link_reroute_s`, rounded to 10 ms; tests/unit/test_sim_faults.py keeps them equal).

A hung switch (switch-hang: on BMv2 its process stopped) forwards and answers nothing from its at_s until its
release (if any), as a crashed one does; the control plane names it hung and routes around it
`switch_hang_detect_s` after it stopped: the BMv2 controller's heartbeat bound (gradswitch/protocol/heartbeat.py
HUNG_DETECT_BOUND_S, the worst case: a switch that stopped just after it answered). What the job does then follows
from its transport, as for a crash; its record names the switch hung."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gradswitch.protocol.heartbeat import HUNG_DETECT_BOUND_S
from gradswitch.sim.sim_keys import CfgFault, CfgFaultSchedule, CfgWindow
from gradswitch.topology.faults import SWITCH_FAULTS, WORKER_FAULTS, Fault, FaultKind, worker_rank
from gradswitch.topology.model import Topology
from gradswitch.workload.fault_record import FaultOutcome, FaultRecord
from gradswitch.workload.job import JobConfig
from gradswitch.workload.worker_result import WorkerResult

# From a switch's crash until the routes around it are pushed: the controller sees its P4Runtime stream end
# (the kernel resets the killed process's connection) and rewrites the live switches' routes and groups.
SWITCH_DETECT_S = 0.03
# From a link's loss of carrier until the routes are pushed: the controller watches its switch ports' carrier.
LINK_DETECT_S = 0.04
# From a switch's hang until the routes around it are pushed: the heartbeat's bound (its deadlines missed in a row).
SWITCH_HANG_DETECT_S = HUNG_DETECT_BOUND_S


class SimFaultError(ValueError):
    """A fault the simulator cannot carry out on this run (one line naming it)."""


@dataclass(frozen=True)
class SimFault:
    """What the simulator measured for one fault (gs-fault-schedule.cc Results), seconds after the jobs' start."""

    label: str
    injected_s: float | None  # None: the run had ended before its time
    detected_s: float | None  # when the control plane had routed around it (a worker crash: when its job stopped)
    recovered_s: float | None  # when the last queue pair it stalled made progress again
    first_stall_s: float | None  # when the first of them learnt of a loss (a timeout, or a NAK of a gap)
    stalled_qps: int  # queue pairs that learnt of a loss because of it (a timeout or a NAK) and resent
    resumed_qps: int  # of which made progress again
    lost_packets: int  # packets it dropped (arriving at the dead switch or link, or queued there)
    out_at_end: bool  # its target was still out when the run ended
    # a switch crash under NetReduce jobs aggregating there: "ring" once their workers agreed to fall back, when,
    # and when every one of their workers had completed a reduction on the ring (gs-netreduce-worker.cc); with a
    # restart, when they agreed to return to the switch and when every one had completed a reduction there again
    fallback: str | None = None
    fallback_s: float | None = None
    ring_recovered_s: float | None = None
    returned_s: float | None = None
    switch_recovered_s: float | None = None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SimFault:
        return cls(str(raw["label"]), raw["injected_s"], raw["detected_s"], raw["recovered_s"], raw["first_stall_s"],
                   int(raw["stalled_qps"]), int(raw["resumed_qps"]), int(raw["lost_packets"]), bool(raw["out_at_end"]),
                   raw.get("fallback"), raw.get("fallback_s"), raw.get("ring_recovered_s"), raw.get("returned_s"),
                   raw.get("switch_recovered_s"))


def fault_json(fault: Fault, topo: Topology, jobs: list[JobConfig]) -> CfgFault:
    """One fault as gradswitch-sim reads it: its kind, label and time, and its resolved target."""
    out: CfgFault = {"label": fault.label, "at_s": fault.at_s, "kind": str(fault.kind)}  # in this order (the bytes)
    if fault.kind in WORKER_FAULTS:
        job = jobs[0]
        hosts = [n.host for n in job.workers]
        rank = worker_rank(fault, topo, hosts)
        if rank is None:
            raise SimFaultError(f"fault {fault.label}: {fault.target!r} is not a worker of job {job.job_id} "
                                f"(its ranks 0..{len(hosts) - 1}, on {', '.join(hosts)})")
        out["job"], out["node"], out["host"] = job.job_id, job.workers[rank].node_id, hosts[rank]
        if fault.kind == FaultKind.SLOW_WORKER:
            out["factor"] = fault.factor
            out["rate_bps"] = None if fault.rate_mbps is None else fault.rate_mbps * 1e6
        return out
    windows: list[CfgWindow] = [{"from_s": a, "to_s": b} for a, b in fault.windows()]
    if fault.kind in SWITCH_FAULTS:
        if not topo.is_switch(fault.target):
            raise SimFaultError(f"fault {fault.label}: {fault.target!r} is not a switch of {topo.name}")
        out["switch"], out["windows"] = fault.target, windows
        return out
    a, b = fault.link_ends()
    if not any({lk.a, lk.b} == {a, b} for lk in topo.links):
        raise SimFaultError(f"fault {fault.label}: {fault.target!r} is not a link of {topo.name}")
    out["kind"] = "link-down"  # a flap is a link down in several windows
    out["a"], out["b"], out["windows"] = a, b, windows
    return out


def schedule_json(faults: tuple[Fault, ...], topo: Topology, jobs: list[JobConfig], switch_detect_s: float,
                  link_detect_s: float, switch_hang_detect_s: float = SWITCH_HANG_DETECT_S) -> CfgFaultSchedule:
    """The configuration's `fault_schedule`."""
    return {"switch_detect_s": switch_detect_s, "link_detect_s": link_detect_s,
            "switch_hang_detect_s": switch_hang_detect_s,
            "faults": [fault_json(f, topo, jobs) for f in faults]}


def sim_faults(raw: dict[str, Any]) -> list[SimFault]:
    """What the simulator measured per fault (none without faults)."""
    return [SimFault.from_dict(f) for f in raw.get("faults", [])]


def _completed(node: WorkerResult) -> int:
    return len(node["iterations"])


def _job_failure(nodes: dict[int, WorkerResult]) -> str | None:
    """The first error of a node that failed of itself (not stopped by another's failure, not a crash fault)."""
    for node_id in sorted(nodes):
        error = nodes[node_id].get("error") or ""
        if not nodes[node_id]["ok"] and not error.startswith("stopped:") and "(fault worker-crash" not in error:
            return f"node {node_id} on {nodes[node_id]['host']}: {error}"
    return None


def fault_records(faults: tuple[Fault, ...], measured: list[SimFault], nodes: dict[int, dict[int, WorkerResult]],
                  jobs: list[JobConfig], ended_s: float) -> list[FaultRecord]:
    """Per fault what it did to the run (both backends' record): its outcome from what the simulator measured and
    how the jobs ended; iterations lost are those it cut short (a job stopped in the middle of one). ended_s: when
    the run's last node was done (the simulator's sim_s), which for an interrupted job is when it stopped."""
    if len(measured) != len(faults):
        raise SimFaultError(f"the simulator reported {len(measured)} faults for the {len(faults)} it was given")
    failures = {cfg.job_id: _job_failure(nodes[cfg.job_id]) for cfg in jobs}
    out = []
    for fault, m in zip(faults, measured, strict=True):
        if m.injected_s is None:
            out.append(FaultRecord.not_injected_because(fault, "the jobs had ended before its time"))
            continue
        if fault.kind == FaultKind.SWITCH_HANG:
            out.append(_named_hung(fault, m, _record(fault, m, nodes, jobs, ended_s, failures)))
            continue
        out.append(_record(fault, m, nodes, jobs, ended_s, failures))
    return out


def _named_hung(fault: Fault, m: SimFault, record: FaultRecord) -> FaultRecord:
    """A hang's record, its detail naming the switch hung (and when the control plane named it so)."""
    assert m.injected_s is not None
    named = ("never named hung by the control plane" if m.detected_s is None else
             f"named hung by the control plane {m.detected_s - m.injected_s:.3f} s after it stopped")
    line = f"{fault.target} hung (forwarded and answered nothing) at {m.injected_s:.3f} s, {named}"
    return replace(record, detail=f"{line}; {record.detail}" if record.detail else line)


def _record(fault: Fault, m: SimFault, nodes: dict[int, dict[int, WorkerResult]], jobs: list[JobConfig],
            ended_s: float, failures: dict[int, str | None]) -> FaultRecord:
    """One injected fault's record (fault_records)."""
    assert m.injected_s is not None
    if fault.kind == FaultKind.WORKER_CRASH:
        job = jobs[0]
        workers = [nodes[job.job_id][w.node_id] for w in job.workers]
        done = min(_completed(w) for w in workers)
        crashed = next(w for w in workers if (w.get("error") or "").startswith("crashed at"))
        return FaultRecord(fault, m.injected_s, FaultOutcome.INTERRUPTED, m.detected_s, None,
                           int(done < job.iterations), None,
                           f"worker {crashed['node_id']} on {crashed['host']} crashed: job {job.job_id} "
                           f"stopped after {done} of {job.iterations} iterations, kept",
                           job_stopped_s=ended_s)  # its peers stop at once (the runner's abort)
    if fault.kind == FaultKind.SLOW_WORKER:
        return FaultRecord(fault, m.injected_s, FaultOutcome.RECOVERED, None, None, 0, None,
                           "the job went on at the slow worker's pace")
    failed = {job: why for job, why in failures.items() if why is not None}
    if failed:
        job_id, why = next(iter(failed.items()))
        lost = int(min(_completed(n) for n in nodes[job_id].values() if n["role"] == "worker") <
                   next(c.iterations for c in jobs if c.job_id == job_id))
        return FaultRecord(fault, m.injected_s, FaultOutcome.INTERRUPTED, m.detected_s, None, lost, None,
                           f"job {job_id} stopped: {why}", ended_s)
    if m.fallback is not None:  # (its workers left the switch: an effect, whether a packet was lost or not)
        return FaultRecord(fault, m.injected_s, FaultOutcome.RECOVERED, m.detected_s, m.ring_recovered_s, 0,
                           m.fallback, f"NetReduce fell back to {m.fallback} (workers agreed at "
                           f"{m.fallback_s:.3f} s, every worker's first {m.fallback} reduction done at "
                           f"{_seconds(m.ring_recovered_s)}){_return(m)}; {m.lost_packets} packets lost at "
                           "the switch")
    if m.stalled_qps == 0 and m.lost_packets == 0:
        return FaultRecord(fault, m.injected_s, FaultOutcome.NO_EFFECT, m.detected_s, None, 0, None,
                           "none of the jobs' packets crossed it while it was out")
    how = "rerouted, " if m.detected_s is not None else ""
    return FaultRecord(fault, m.injected_s, FaultOutcome.RECOVERED, m.detected_s, m.recovered_s, 0, None,
                       f"{how}{m.lost_packets} packets lost, resent by {m.stalled_qps} queue pairs (RC "
                       "retransmission)")


def _seconds(t: float | None) -> str:
    return "never" if t is None else f"{t:.3f} s"


def _return(m: SimFault) -> str:
    if m.returned_s is None:
        return ", never back on the switch"
    return (f", back on the switch from {m.returned_s:.3f} s (every worker's first reduction there done at "
            f"{_seconds(m.switch_recovered_s)})")


@dataclass(frozen=True)
class PhaseThroughput:
    """Iterations per second (1 / their mean time) of the iterations that ended before a fault, that ran while it
    was being recovered from (injected until recovered, or detected where nothing stalled), and that started after;
    None where no iteration falls in a phase."""

    before: float | None
    during: float | None
    after: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {"before": self.before, "during": self.during, "after": self.after}


def phase_throughput(iterations: list[tuple[float, float]], record: FaultRecord) -> PhaseThroughput:
    """The job's throughput around one fault, from its iterations' (start, end), seconds after the jobs' start."""
    a = record.injected_s
    b = next((t for t in (record.recovered_s, record.detected_s) if t is not None), a)

    def rate(spans: list[tuple[float, float]]) -> float | None:
        total = sum(e - s for s, e in spans)
        return len(spans) / total if spans and total > 0 else None

    return PhaseThroughput(rate([(s, e) for s, e in iterations if e <= a]),
                           rate([(s, e) for s, e in iterations if s < max(b, a) and e > a]),
                           rate([(s, e) for s, e in iterations if s >= b]))


def sim_fault_problems(faults: tuple[Fault, ...], netreduce: bool, ranks: int, graph: bool) -> list[str]:
    """The faults the simulator does not run on this job, one line each (spec.problems refuses them before
    anything starts)."""
    out = []
    for f in faults:
        if graph and f.kind in WORKER_FAULTS:
            out.append(f"fault {f.label}: the simulator's graph engine (workload_et) runs switch and link faults, "
                       "not a worker's: leave it out, or run it with the loop or a training workload")
        elif graph and netreduce:
            out.append(f"fault {f.label}: the simulator's graph engine runs a trace's in-network collectives (algo = "
                       "netreduce) without faults (no fallback to ring yet): leave it out, or run the trace with "
                       "algo = ring")
        elif netreduce and f.kind in SWITCH_FAULTS and ranks > 1:
            out.append(f"fault {f.label}: a NetReduce job's fallback to ring on the simulator needs all its workers "
                       f"on one rank, not ranks = {ranks}: run it with ranks = 1")
    return out
