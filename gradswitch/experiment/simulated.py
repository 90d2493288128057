"""`gradswitch experiment --backend ns3`: the same spec's jobs on the ns-3 simulator (docs/simulator.md).

The spec is placed on its topology exactly as for BMv2 (placement.py: the same hosts, ranks and job
configurations), what the run sets on the switches becomes the simulator's settings (`sim_settings`:
loss, the RoCE class, load balancing, DLCP, background TCP, TensorLights), gradswitch.sim runs the binary,
and its per-node results go through the same report.summarize as the workers' result files: the
same results.json (with `backend` and the simulator's speed), table, plots and timeline.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

from gradswitch.experiment import results_file
from gradswitch.experiment.links import shaped_directions
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.report import Usage, summarize, with_faults, write_report
from gradswitch.experiment.results_file import Results, SimulatorFigures
from gradswitch.experiment.run_plan import RunPlan, plan_run
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec
from gradswitch.experiment.timeline import write_timeline
from gradswitch.sim import SimError, SimResult
from gradswitch.sim import read as read_result
from gradswitch.sim import run as simulate
from gradswitch.sim.build import status
from gradswitch.sim.faults import fault_records, phase_throughput
from gradswitch.topology.model import Topology
from gradswitch.workload.job import JobConfig


def link_usage(topo: Topology, result: SimResult) -> Usage:
    """What every link direction carried over the run, in the schema of gradswitch/experiment/links.py
    (a simulated port's frame bytes stand for what an HTB shaper sent): a switch's port counters give
    what it sent and, on a host's link, what the host sent into it."""
    seconds = result.speed.sim_s
    out: Usage = {}
    for d in shaped_directions(topo):
        if topo.is_switch(d.sender):
            counters = result.ports[d.sender].get(d.port)
            sent, dropped = (counters["tx_bytes"], counters["drops"]) if counters else (0, 0)
        else:  # a host's link: what its switch received from it
            switch, port = topo.attachment(d.sender)
            counters = result.ports[switch].get(port)
            sent, dropped = (counters["rx_bytes"] if counters else 0), 0
        out[d.name] = {"kind": d.kind, "rate_mbps": d.rate_mbps, "seconds": seconds, "sent_bytes": sent,
                       "dropped_packets": dropped,
                       "load": sent * 8 / (seconds * d.rate_mbps * 1e6) if seconds > 0 else None}
    return dict(sorted(out.items()))


def speed(result: SimResult, spec: ExperimentSpec) -> SimulatorFigures:
    s = result.speed
    return {"wall_s": s.wall_s, "sim_s": s.sim_s, "events": s.events, "events_per_s": s.events_per_s,
            "packet_hops": s.packet_hops, "packet_hops_per_s": s.packet_hops_per_s, "peak_rss_mb": s.peak_rss_mb,
            "ranks": spec.network.ranks, "time_limit_hit": result.time_limit_hit, "binary": str(status().binary)}


def run_simulated(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None) -> Results:
    """Run one spec on the simulator; returns (and writes) results.json's content."""
    plan = planned(spec, out_dir)
    topo, cfgs = plan.topology, list(plan.jobs)
    settings = plan.sim_settings(sys.stderr.isatty() if progress is None else progress)
    started = time.time()
    hostfile = Path(spec.network.hostfile) if spec.network.hostfile is not None else None
    try:
        result = simulate(topo, cfgs, settings, out_dir / "sim", ranks=spec.network.ranks, hostfile=hostfile)
    except SimError as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    return report_simulated(spec, cfgs, topo, result, started, out_dir)


def planned(spec: ExperimentSpec, out_dir: Path, simulator: bool = True) -> RunPlan:
    """Before a simulated run (either engine): the spec checked, the simulator there (unless `simulator` is false:
    only its configuration is wanted), the run's plan computed and saved in out_dir (job<N>.json)."""
    spec.validate()
    missing = status().missing() if simulator else None
    if missing:
        raise ExperimentError(f"the ns-3 simulator cannot run: {missing}")
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = plan_run(spec)
    plan.save(out_dir)
    return plan


def resummarize(spec: ExperimentSpec, out_dir: Path) -> Results | None:
    """Write a finished run's results.json again from what the simulator left in out_dir/sim, with today's
    report code (a figure added since), without simulating again; None: no finished run of the spec there.
    The placement and jobs are the run's own (out_dir/job*.json). A run of the simulator's loops only (engine = loop):
    ExperimentError for a spec on the graph engine (run it again)."""
    if spec.algorithm.engine != Engine.LOOP:
        raise ExperimentError(f"{spec.label}: engine = {spec.algorithm.engine}: only a run of the simulator's loops "
                              "(engine = loop) is summarized again from its output; run it again instead")
    try:
        previous = results_file.read(out_dir / "results.json")
    except results_file.ResultsFileError:
        return None
    paths = sorted(out_dir.glob("job*.json"), key=lambda p: int(p.stem[3:]))
    if not paths or not (out_dir / "sim" / "sim-results.json").exists():
        return None
    cfgs = [JobConfig.load(p) for p in paths]
    try:
        result = read_result(out_dir / "sim", cfgs)
    except SimError as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    started = dt.datetime.fromisoformat(previous["started"]).timestamp()
    return report_simulated(spec, cfgs, topology_for(spec), result, started, out_dir)


def report_simulated(spec: ExperimentSpec, cfgs: list[JobConfig], topo: Topology, result: SimResult, started: float,
            out_dir: Path) -> Results:
    """results.json, the table and the timeline of a simulated run."""
    goodput = result.background["goodput_mbps"] if result.background else None
    report = summarize(spec, cfgs, result.nodes, result.switches, started, link_usage(topo, result), goodput)
    report["simulator"] = speed(result, spec)
    report["bmv2"] = None
    extra = report["headline_extra"]
    # A simulated run's figures are the model's, whatever the machine did: never machine-bound.
    extra["cpu_idle"], extra["machine_bound"], extra["machine_bound_reason"] = None, False, None
    extra["wall_s"], extra["events_per_s"] = result.speed.wall_s, result.speed.events_per_s
    extra["packet_hops_per_s"], extra["peak_rss_mb"] = result.speed.packet_hops_per_s, result.speed.peak_rss_mb
    if result.time_limit_hit:
        report["ok"] = False
        report["errors"]["simulator"] = f"stopped at its simulated time limit ({result.speed.sim_s:.3g} s)"
    if spec.faults.faults:
        # simulated time starts at the jobs' go: the iterations' clock is the faults' clock
        records = fault_records(spec.faults.faults, list(result.faults), result.nodes, cfgs, result.speed.sim_s)
        report = with_faults(report, records, 0.0)
        spans = [(it["start"], it["end"]) for it in report["iterations"]]
        for entry, record in zip(report["faults"], records, strict=True):
            entry["throughput_it_s"] = phase_throughput(spans, record).to_dict()
    training = report.get("training")
    if training and training.get("timeline_iteration") is not None:
        training["timeline"] = write_timeline(
            result.nodes[cfgs[0].job_id], training["timeline_iteration"], training["dilation"], out_dir,
            f"{spec.label}: iteration {training['timeline_iteration']} (simulated time; real = simulated / "
            f"{training['dilation']:.3g})")
    report = results_file.write(out_dir / "results.json", report)
    write_report(report, out_dir)
    return report
