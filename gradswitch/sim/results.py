"""The simulator's results turned into what the testbed's processes write: per job and node the result a
worker's result-<id>.json holds (gradswitch/workload/worker_result.py WorkerResult: iterations as
gradswitch.workload.records.IterationRecord, stats as gradswitch/hosts/comm.py Comm.stats, a training worker's timeline
and plan), and per switch the counters gradswitch/experiment/counters.py takes from BMv2 (drops by reason, [rx packets,
tx packets, tx bytes] per port, seconds), so gradswitch/experiment/report.summarize builds results.json unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from gradswitch.formats import check_format
from gradswitch.sim import sim_schema
from gradswitch.sim.faults import SimFault, sim_faults
from gradswitch.sim.sim_settings import CheckMode
from gradswitch.workload.job import JobConfig
from gradswitch.workload.plan import plan
from gradswitch.workload.records import CheckKind, IterationRecord
from gradswitch.workload.timeline import Event, EventKind, timings
from gradswitch.workload.worker_result import WorkerResult, iteration_entry, worker_result

# sim-results.json's `format` (gradswitch/sim/sim_schema.py, with every key of the results; gs-simulation.cc's
# Simulation::LocalResults writes it from gs-keys.h)
RESULTS_FORMAT = sim_schema.RESULTS_FORMAT
NodeResult = WorkerResult  # as gradswitch/hosts/main.py writes it (gradswitch/workload/worker_result.py)


class PortCounters(TypedDict):
    """One switch port over the run, as the simulator counts it (gs-simulation.cc)."""

    rx_packets: int
    rx_bytes: int  # frame bytes it received
    tx_packets: int
    tx_bytes: int  # frame bytes it sent
    drops: int  # packets its queue dropped
    busy_s: float  # seconds it was sending
    max_queue_bytes: int


class BackgroundTraffic(TypedDict):
    """The bulk TCP flows' totals (gs-tcp.cc)."""

    flows: int
    mss: int
    bytes: int
    seconds: float
    goodput_mbps: float
    retransmissions: int
    model: str


@dataclass(frozen=True)
class SimSpeed:
    """How fast the simulator ran."""

    wall_s: float
    sim_s: float
    events: int
    events_per_s: float
    packet_hops: int
    packet_hops_per_s: float
    peak_rss_mb: float


@dataclass(frozen=True)
class RankStats:
    """One MPI rank of a distributed run: what it simulated and what that cost."""

    rank: int
    hosts: int
    switches: int
    job_nodes: int
    wall_s: float
    events: int
    packet_hops: int
    cut_links: int  # its ends of links cut between ranks
    cut_tx_packets: int  # packets it sent to other ranks over them
    cut_rx_packets: int  # and received from them
    allgather_us: float  # one MPI_Allgather among the ranks, timed before the run (a barrier window's cost)
    setup_rss_mb: float  # peak memory once the network and its jobs were built, before the run
    peak_rss_mb: float


@dataclass(frozen=True)
class MpiStats:
    """How a run was distributed (docs/simulator.md "Distributed over MPI ranks")."""

    ranks: int
    sync: str  # barrier or null-message
    lookahead_s: float  # the smallest delay of a cut link
    cut_links: int
    per_rank: tuple[RankStats, ...]


def mpi_stats(raw: dict[str, Any]) -> MpiStats | None:
    m = raw.get("mpi")
    if m is None:
        return None
    ranks = tuple(RankStats(r["rank"], r["hosts"], r["switches"], r["job_nodes"], r["wall_s"], r["events"],
                            r["packet_hops"], r["cut_links"], r["cut_tx_packets"], r["cut_rx_packets"],
                            r["allgather_us"], r["setup_rss_mb"], r["peak_rss_mb"])
                  for r in m["per_rank"])
    return MpiStats(m["ranks"], m["sync"], m["lookahead_s"], m["cut_links"], ranks)


@dataclass(frozen=True)
class SimResult:
    nodes: dict[int, dict[int, NodeResult]]  # job id -> node id -> the worker/server result dict
    checks: dict[int, CheckMode]  # job id -> the check its packets carried
    switches: dict[str, Any]  # switch -> counters in the BMv2 snapshot-delta schema, plus netreduce/dlcp events
    background: BackgroundTraffic | None  # bulk TCP
    speed: SimSpeed
    time_limit_hit: bool
    raw: dict[str, Any]  # the simulator's own results document
    mpi: MpiStats | None = None  # a run over MPI ranks: the partition and each rank's cost
    ports: dict[str, dict[int, PortCounters]] = field(default_factory=dict)  # switch -> port -> its counters
    faults: tuple[SimFault, ...] = ()  # what each of the run's faults did, in their order (gradswitch/sim/faults.py)

    def ok(self) -> bool:
        return not self.time_limit_hit and all(n.get("ok") for job in self.nodes.values() for n in job.values())


def _records(node: dict[str, Any], cfg: JobConfig, check: CheckMode) -> list[IterationRecord]:
    """The node's iterations as IterationRecords, with the check the job's packets carried."""
    kind = CheckKind(str(check))
    its = node.get("iterations", [])
    out = []
    if cfg.training is not None and node.get("timeline") is not None:
        events = [Event(e["iteration"], EventKind(e["kind"]), e["name"], e["start"], e["end"], e["lane"])
                  for e in node["timeline"]]
        bounds = [(float(s), float(e)) for s, e in node.get("bounds", [])]
        by_index = {it["index"]: it for it in its}
        for t in timings(events, bounds):
            if t.index not in by_index:  # ended, not every reduction checked: the run stopped there
                continue
            it = by_index[t.index]
            extra = {"compute_s": t.compute_s, "comm_s": t.comm_s, "exposed_comm_s": t.exposed_comm_s,
                     "overlap": t.overlap, "zero_filled_packets": float(it.get("zero_filled_packets", 0)),
                     "relative_error": float(it.get("relative_error", 0.0))}
            out.append(IterationRecord(t.index, t.start, t.end, bool(it.get("correct", False)),
                                       int(it.get("wrong_elements", 0)), 0.0, 0, extra, check=kind))
        return out
    for it in its:
        extra = {"zero_filled_packets": float(it["zero_filled_packets"]), "relative_error": float(it["relative_error"])}
        out.append(IterationRecord(it["index"], it["start"], it["end"], bool(it["correct"]), int(it["wrong_elements"]),
                                   float(it["max_abs_error"]), int(it["saturated"]), extra, check=kind))
    return out


def node_result(node: dict[str, Any], cfg: JobConfig, check: CheckMode) -> NodeResult:
    """One node's result as gradswitch/hosts/main.py writes it (gradswitch/workload/worker_result.py). The simulator
    adds int32
    values (or digests): an exact check that found no wrong element found no error either, so
    max_abs_error is 0 there; where it is not known (a digest, no check, wrong elements) it is None."""
    iterations = []
    for r in _records(node, cfg, check):
        record = iteration_entry(r)
        if check != CheckMode.EXACT or r.wrong_elements:
            record["max_abs_error"] = None
        iterations.append(record)
    extra: dict[str, object] = {key: node[key] for key in ("netreduce", "keys_served", "deliveries") if key in node}
    if cfg.training is not None and node["role"] == "worker":
        p = plan(cfg)
        extra["timeline"] = node.get("timeline", [])
        extra["plan"] = {"ops": len(p.ops), "layers": len(p.layers),
                         "largest_op_elements": max(op.elements for op in p.ops)}
    return worker_result(node["node_id"], node["host"], node["role"], node["ok"], iterations, node["stats"], extra,
                         error=node.get("error") or None)


def switch_counters(raw: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Per switch: what gradswitch/experiment/counters.py delta() gives for BMv2 ([rx packets, tx packets,
    tx bytes] per port; drops by reason; the seconds they cover), and the simulator's extras."""
    out: dict[str, Any] = {}
    for name, sw in raw.items():
        ports = {int(p): [c["rx_packets"], c["tx_packets"], c["tx_bytes"]] for p, c in sw["ports"].items()}
        entry: dict[str, Any] = {"drops": dict(sw.get("drops", {})), "ports": ports, "seconds": seconds,
                                 "queues": {int(p): {"drops": c["drops"], "max_queue_bytes": c["max_queue_bytes"],
                                                     "busy_s": c["busy_s"]} for p, c in sw["ports"].items()}}
        if "netreduce" in sw:
            entry["netreduce_events"] = sw["netreduce"]
        if "dlcp" in sw:
            entry["dlcp"] = {int(job): events for job, events in sw["dlcp"].items()}
        out[name] = entry
    return out


def parse(raw: dict[str, Any], jobs: list[JobConfig], path: Path | str = "sim-results.json") -> SimResult:
    """The simulator's results (`path`: the file they came from, for FormatError when its format is not
    RESULTS_FORMAT) for `jobs`."""
    check_format(raw, path, "simulator's results", RESULTS_FORMAT)
    by_id = {cfg.job_id: cfg for cfg in jobs}
    nodes: dict[int, dict[int, NodeResult]] = {}
    checks: dict[int, CheckMode] = {}
    for job in raw["jobs"]:
        cfg = by_id[job["job_id"]]
        checks[cfg.job_id] = CheckMode(job["check"])
        nodes[cfg.job_id] = {n["node_id"]: node_result(n, cfg, checks[cfg.job_id]) for n in job["nodes"]}
    speed = SimSpeed(raw["wall_s"], raw["sim_s"], raw["events"], raw["events_per_s"], raw["packet_hops"],
                     raw["packet_hops_per_s"], raw["peak_rss_mb"])
    ports = {name: {int(p): PortCounters(rx_packets=int(c["rx_packets"]), rx_bytes=int(c["rx_bytes"]),
                                         tx_packets=int(c["tx_packets"]), tx_bytes=int(c["tx_bytes"]),
                                         drops=int(c["drops"]), busy_s=float(c["busy_s"]),
                                         max_queue_bytes=int(c["max_queue_bytes"]))
                     for p, c in sw["ports"].items()}
             for name, sw in raw["switches"].items()}
    bg = raw.get("background")
    background = None if bg is None else BackgroundTraffic(
        flows=int(bg["flows"]), mss=int(bg["mss"]), bytes=int(bg["bytes"]), seconds=float(bg["seconds"]),
        goodput_mbps=float(bg["goodput_mbps"]), retransmissions=int(bg["retransmissions"]), model=str(bg["model"]))
    return SimResult(nodes, checks, switch_counters(raw["switches"], raw["sim_s"]), background, speed,
                     bool(raw["time_limit_hit"]), raw, mpi_stats(raw), ports, tuple(sim_faults(raw)))
