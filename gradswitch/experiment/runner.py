"""`gradswitch experiment`: bring a network up, run a spec's jobs on its hosts, tear down, report.

Workers and servers are real processes in Mininet hosts (`python -m gradswitch.hosts.main`), talking
RoCE v2 through the BMv2 fabric (gradswitch/experiment/supervisor.py). One spec may run
several identical jobs at once (each on its own hosts, or with their parameter servers
colocated on one host), with bulk TCP background traffic, DLCP features and TensorLights
(gradswitch/experiment/network_settings.py). Loss is injected by the switches' fault-injection table
on every worker link (both directions, RoCE packets only), never netem. The output directory
receives job<N>.json, per-node results and logs, results.json, a table and plots; job 1 is
the one the headline figures describe.

With `backend = "ns3"` the same spec runs on the ns-3 simulator instead (simulated.py): no
network is brought up, and results.json, the table and the plots come out the same.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gradswitch.control.fabric import Fabric
from gradswitch.control.p4rt import SwitchError
from gradswitch.experiment import results_file
from gradswitch.experiment.background import GoodputMeter
from gradswitch.experiment.bottleneck import judge
from gradswitch.experiment.counters import Snapshot, delta, label_ports, snapshot
from gradswitch.experiment.cpu_load import CpuSample, cpu_sample
from gradswitch.experiment.fault_schedule import FaultSchedule
from gradswitch.experiment.graph_as_loop import (
    TrainingGraphJob,
    loop_results,
    on_clock,
    trace_graph_job,
    training_graph_jobs,
)
from gradswitch.experiment.graph_run import GraphWorkload, switch_jobs, trace_report
from gradswitch.experiment.links import LinkMeter
from gradswitch.experiment.network_settings import RunSettings
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.report import Usage, summarize, with_faults, write_report
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec
from gradswitch.experiment.supervisor import NodeKey, Processes, Progress, run_nodes, stop_deadline_s
from gradswitch.experiment.testbed import Testbed
from gradswitch.experiment.testbed_run import (
    cuts_patches,
    fault_schedule_for,
    rank_of,
    subscribe_health,
    undo_settings,
)
from gradswitch.experiment.timeline import write_timeline
from gradswitch.experiment.trace_results import trace_results
from gradswitch.hosts.graph_job import read_timing, timing_path
from gradswitch.net.network import NetworkOptions
from gradswitch.protocol.background_tcp import BACKGROUND_PORT
from gradswitch.workload.chakra import read_traces
from gradswitch.workload.fault_record import FaultRecord
from gradswitch.workload.graph_payload import PayloadKind
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.job import JobConfig, job_dir, job_file
from gradswitch.workload.records import CheckKind
from gradswitch.workload.worker_result import WorkerResult as NodeResult

GRAPH_JOB_DIR = "graph"  # engine = graph: the ranks' job (its graph) here; job<N>.json stays the spec's

log = logging.getLogger(__name__)


def run_experiment(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
                   network_options: NetworkOptions | None = None, workload: GraphWorkload | None = None) -> Results:
    """Run one experiment end to end on a network of its own (or on the simulator: backend = ns3); returns
    (and writes) results.json's content. `workload`: the job's graphs, given rather than made of the spec (a trace's:
    the spec's workload_et read when not given)."""
    spec.validate()
    out_dir = out_dir.resolve()  # the workers run in other working directories: they get absolute paths
    workload = workload or traces_of(spec)
    if spec.network.simulated and (spec.algorithm.engine == Engine.GRAPH or workload is not None):
        from gradswitch.experiment.simulated_graph import run_simulated_graph

        return run_simulated_graph(spec, out_dir, progress, workload)
    if spec.network.simulated:
        from gradswitch.experiment.simulated import run_simulated

        return run_simulated(spec, out_dir, progress)
    options = network_options or NetworkOptions(run_dir=out_dir / "net", patch_links=cuts_patches(spec))
    if workload is not None:  # what the graph's job cannot be on this network, before it comes up
        trace_graph_job(spec, topology_for(spec), workload)
    with Testbed(topology_for(spec), options) as net:
        return run_on(net, spec, out_dir, progress, workload)


def traces_of(spec: ExperimentSpec) -> GraphWorkload | None:
    """The spec's traces (workload_et) as its workload, read and checked (one line naming the file, node and problem);
    None: the spec describes its own."""
    traces = spec.workload.workload_et
    return GraphWorkload(read_traces(Path(traces))) if traces is not None else None


def run_on(net: Testbed, spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
           workload: GraphWorkload | None = None) -> Results:
    """Run the spec's jobs on a running network (whose topology fits the spec), then undo what the
    run set on the switches (loss rules, DLCP features, NetReduce jobs); returns the report. `workload`: the job's
    graphs, given rather than made of the spec (a trace's: the spec's workload_et read when not given): the ranks
    run them (gradswitch.hosts.graph_main) and results.json holds the graphs' figures (`graph`,
    gradswitch/experiment/trace_results.py)."""
    spec.validate()
    workload = workload or traces_of(spec)
    if spec.network.simulated:
        raise ExperimentError(f"{spec.label}: backend = ns3 runs on the simulator, not on a BMv2 network")
    out_dir = out_dir.resolve()  # the workers run in other working directories: they get absolute paths
    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir = out_dir / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir()
    plan = plan_run(spec, net.topo)
    plan.save(out_dir)
    placement, cfgs = plan.placement, list(plan.jobs)
    # engine = graph: the job's ranks run its training graph (gradswitch.hosts.graph_main), reported as the loop's;
    # a workload of graphs: the ranks run them, reported as graphs
    tgs = [trace_graph_job(spec, net.topo, workload)] if workload is not None else \
        training_graph_jobs(spec, net.topo) if spec.algorithm.engine == Engine.GRAPH else []
    nodes_cfgs, config_dir = (cfgs, out_dir) if not tgs else ([tg.job.job for tg in tgs], out_dir / GRAPH_JOB_DIR)
    if tgs:
        config_dir.mkdir(exist_ok=True)
        for tg in tgs:
            tg.job.save(job_file(config_dir, tg.job.job.job_id))
    fabric = net.fabric
    procs: Processes = {}
    schedule = fault_schedule_for(net, spec, cfgs[0], procs, run_dir)
    schedule.stop_deadline_s = stop_deadline_s(cfgs)
    started = time.time()
    wall = time.monotonic()
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    cpu: list[CpuSample] = []
    links = LinkMeter.of(net)  # what every shaped link carried (its sender's shaper's counters)
    background = GoodputMeter(net.host(placement.background[1]), BACKGROUND_PORT) if placement.background else None

    # The jobs' window: from the go to when every node has done its work (not its lingering and exit).
    def go() -> None:  # counters, links, background flows and the machine's CPU from the start of the jobs on
        before.update(snapshot(fabric))
        links.start()
        if background is not None:
            background.start()
        cpu.append(cpu_sample())
        schedule.start()  # the faults from now on

    def done() -> None:  # ... to their end
        schedule.stop()  # a fault not yet due is not injected
        cpu.append(cpu_sample())
        after["links"] = links.stop()
        after["goodput"] = background.stop() if background is not None else None
        after["switches"] = live_snapshot(fabric, schedule.down_switches())

    def exited(key: NodeKey, status: int, at: float) -> None:  # a worker's process gone: when the run saw it
        job, nid = key
        if job == cfgs[0].job_id:
            schedule.worker_exited(rank_of(cfgs[0], nid), at)

    settings = RunSettings(net, tgs[0].host_spec if tgs else spec, nodes_cfgs, placement, run_dir).__enter__()
    unsubscribe = subscribe_health(net, schedule)
    in_network = contextlib.ExitStack()  # the graph jobs' NetReduce jobs, removed after whatever happens
    try:
        for tg in tgs:
            in_network.enter_context(switch_jobs(net, tg.job, tg.job.job.credits,
                                                 job_dir(run_dir, tg.job.job.job_id)))
        # DLCP's event counters count from the switch's start (several runs may share a network): this run's are
        # what they gained while its jobs ran (nothing of the jobs' runs before the go: their nodes only resolve
        # their peers, with ICMP).
        dlcp_before = ({name: settings.dlcp_events(name) for name in fabric.switch_names()}
                       if spec.transport.dlcp.enabled else {})
        # A trace's graph has no iterations: its bar is the whole run; a spec's graph counts iterations as the loop.
        bar = Progress(1 if workload is not None else spec.measurement.iterations, spec.label, progress)
        try:
            results = run_nodes(net, nodes_cfgs, config_dir, run_dir, bar,
                                on_go=go, on_done=done, on_started=procs.update, on_exit=exited,
                                module="gradswitch.hosts.graph_main" if tgs else "gradswitch.hosts.main")
        finally:
            schedule.stop()
            schedule.restore()  # a switch due to restart, a link due to come up: back now, for the next run
        down = schedule.down_switches()  # a switch crashed and not restarted: nothing to read from it
        carried, goodput = after.get("links", {}), after.get("goodput")
        switches = delta(after.get("switches") or live_snapshot(fabric, down), before)
        label_ports(switches, net.topo)
        if spec.transport.dlcp.enabled:
            for name in fabric.switch_names():
                if name in down:
                    continue
                now = settings.dlcp_events(name)
                switches[name]["dlcp"] = {job: {event: n - dlcp_before[name].get(job, {}).get(event, 0)
                                                for event, n in counts.items()} for job, counts in now.items()}
        if settings.netreduce_jobs and not down:
            switches["netreduce"] = {str(job): asdict(status) for job, status in settings.netreduce_status().items()}
        graph_jobs = [job for tg in tgs for job in sorted(tg.job.in_network.values())]
        if graph_jobs and not down and net.control is not None:  # the graph's in-network jobs' switch counters
            switches["netreduce"] = {str(job): asdict(net.control.netreduce.status(job)) for job in graph_jobs}
        rotations = settings.tensorlights_rotations()
    finally:
        in_network.close()
        unsubscribe()
        undo_settings(settings, schedule.down_switches())
    if workload is not None:
        return _graph_results(net, spec, tgs[0], out_dir, results[tgs[0].job.job.job_id], carried, switches, cpu,
                              wall, started, schedule)
    if tgs:
        results = {cfg.job_id: graph_results(tg, job_dir(run_dir, cfg.job_id), results[cfg.job_id], cfg)
                   for tg, cfg in zip(tgs, cfgs, strict=True)}
    report = summarize(spec, cfgs, results, switches, started, carried, goodput)
    if schedule.faults:
        for result in results[cfgs[0].job_id].values():  # NetReduce: where the job's workers left the switch
            for change in result.get("fallback", {}).get("changes", []):
                schedule.path_changed(change["switch"], change["path"], change["agreed_at"])
        kept = [(it["index"], it["start"], it["end"]) for it in report["iterations"]]
        report = with_faults(report, schedule.records(kept, spec.measurement.iterations), schedule.go or wall)
    # What limited the run: the links (busiest_link_load, when shaped) or the machine (cpu_idle near 0).
    extra = report["headline_extra"]
    extra["cpu_idle"] = cpu[0].idle_share_until(cpu[-1]) if len(cpu) == 2 else None
    ideal_load = (report.get("training") or {}).get("ideal_link_load")
    bottleneck = judge(extra["cpu_idle"], extra.get("busiest_link_load"), ideal_load)
    extra["machine_bound"], extra["machine_bound_reason"] = bottleneck.machine_bound, bottleneck.reason
    report["bmv2"] = net.bmv2.describe() if net.bmv2 is not None else None  # the build the switches ran
    extra["wall_s"] = time.monotonic() - wall
    if rotations is not None:
        report["tensorlights"] = {"rotations": rotations, "interval_s": spec.algorithm.tensorlights_rotate_s}
    training = report.get("training")
    if training and training.get("timeline_iteration") is not None:
        training["timeline"] = write_timeline(
            results[cfgs[0].job_id], training["timeline_iteration"], training["dilation"], out_dir,
            f"{spec.label}: iteration {training['timeline_iteration']} (testbed time; real = testbed / "
            f"{training['dilation']:.3g})")
    report = results_file.write(out_dir / "results.json", report)
    write_report(report, out_dir)
    return report


def _graph_results(net: Testbed, spec: ExperimentSpec, tg: TrainingGraphJob, out_dir: Path,
                   results: dict[int, NodeResult], carried: Usage, switches: dict[str, Any], cpu: list[CpuSample],
                   wall: float, started: float, schedule: FaultSchedule) -> Results:
    """results.json of a run of a workload of graphs (trace_results: the loop's figures of its one run and the
    graphs' own, `graph`), written in out_dir; the report it holds is graph_run.read_graph_report's."""
    job = tg.job

    def faults(kept: list[tuple[int, float, float]]) -> tuple[FaultRecord, ...]:  # the graph's one run, cut short?
        if not schedule.faults:
            return ()
        for result in results.values():  # NetReduce: where the ranks left the switch, as a loop job's workers do
            for change in result.get("fallback", {}).get("changes", []):
                schedule.path_changed(change["switch"], change["path"], change["agreed_at"])
        began = schedule.go or wall
        return tuple(schedule.records([(i, began + a, began + b) for i, a, b in kept], 1))

    report = trace_report(spec, job, job_dir(out_dir / "run", job.job.job_id), results,
                          [n.host for n in job.job.nodes], carried,
                          cpu[0].idle_share_until(cpu[-1]) if len(cpu) == 2 else None, time.monotonic() - wall,
                          net.topo, faults)
    body = trace_results(spec, tg.graph, report, started, results.values(), carried, switches, job.job.job_id)
    body["bmv2"] = net.bmv2.describe() if net.bmv2 is not None else None
    return results_file.write(out_dir / "results.json", body)


def graph_results(tg: TrainingGraphJob, ranks_dir: Path, results: dict[int, NodeResult], training: JobConfig
                  ) -> dict[int, NodeResult]:
    """The ranks' results of a training graph's run as the loop's workers report theirs: their node timings
    (graph-<rank>.json, emulated seconds from the go; a rank that stopped mid-graph, the nodes it ended) on the
    testbed's clock, a rank that left none with none (its iterations: none kept, as a killed loop worker's)."""
    if tg.job.payload == PayloadKind.DIGITS:  # the ranks trained a real model: their records are the loop's already
        return results
    go = float((ranks_dir / "go").read_text()) if (ranks_dir / "go").exists() else 0.0
    nodes: list[NodeTiming] = []
    for r in range(tg.graph.world_size):
        for partial in (False, True):
            if timing_path(ranks_dir, r, partial).exists():
                nodes += read_timing(ranks_dir, r, partial).nodes
                break
    run = GraphRun(tuple(nodes))
    return loop_results(tg.graph, on_clock(run, go, tg.dilation), results, training, CheckKind.EXACT)


def live_snapshot(fabric: Fabric, skip: set[str]) -> Snapshot:
    """The switches' counters now, but for `skip` (crashed or hung by the run's faults) and any switch that does not
    answer (one hung and named so by the controller's heartbeat while its counters were read: each read waits at
    most until then, gradswitch/control/fabric.py): logged and left out, as a dead switch's are."""
    skip = set(skip)
    while True:
        try:
            return snapshot(fabric, skip=skip)
        except SwitchError as e:
            if e.switch in skip or e.switch not in fabric.addresses:
                raise
            log.warning("switch %s: its counters could not be read (%s): left out of the run's", e.switch, e.detail)
            skip.add(e.switch)
