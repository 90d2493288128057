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

import logging
import shutil
import signal
import time
from collections.abc import Callable
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
from gradswitch.experiment.fault_schedule import FaultSchedule, Mechanisms
from gradswitch.experiment.links import LinkMeter
from gradswitch.experiment.network_settings import RunSettings
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.report import summarize, with_faults, write_report
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec
from gradswitch.experiment.supervisor import NodeKey, Processes, Progress, run_nodes, stop_deadline_s
from gradswitch.experiment.testbed import Testbed
from gradswitch.experiment.timeline import write_timeline
from gradswitch.hosts.slowdown import write_slowdown
from gradswitch.net.network import NetworkOptions
from gradswitch.protocol.background_tcp import BACKGROUND_PORT
from gradswitch.topology.faults import LINK_FAULTS, WORKER_FAULTS, Fault, worker_rank
from gradswitch.workload.job import JobConfig, job_dir

log = logging.getLogger(__name__)


def run_experiment(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
                   network_options: NetworkOptions | None = None) -> Results:
    """Run one experiment end to end on a network of its own (or on the simulator: backend = ns3); returns
    (and writes) results.json's content."""
    spec.validate()
    out_dir = out_dir.resolve()  # the workers run in other working directories: they get absolute paths
    if spec.simulated and spec.engine == Engine.GRAPH:
        from gradswitch.experiment.simulated_graph import run_simulated_graph

        return run_simulated_graph(spec, out_dir, progress)
    if spec.simulated:
        from gradswitch.experiment.simulated import run_simulated

        return run_simulated(spec, out_dir, progress)
    options = network_options or NetworkOptions(run_dir=out_dir / "net", patch_links=cuts_patches(spec))
    with Testbed(topology_for(spec), options) as net:
        return run_on(net, spec, out_dir, progress)


def run_on(net: Testbed, spec: ExperimentSpec, out_dir: Path, progress: bool | None = None) -> Results:
    """Run the spec's jobs on a running network (whose topology fits the spec), then undo what the
    run set on the switches (loss rules, DLCP features, NetReduce jobs); returns the report."""
    spec.validate()
    if spec.simulated:
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

    settings = RunSettings(net, spec, cfgs, placement, run_dir).__enter__()
    unsubscribe = subscribe_health(net, schedule)
    try:
        # DLCP's event counters count from the switch's start (several runs may share a network): this run's are
        # what they gained while its jobs ran (nothing of the jobs' runs before the go: their nodes only resolve
        # their peers, with ICMP).
        dlcp_before = {name: settings.dlcp_events(name) for name in fabric.switch_names()} if spec.dlcp.enabled else {}
        try:
            results = run_nodes(net, cfgs, out_dir, run_dir, Progress(spec.iterations, spec.label, progress),
                                on_go=go, on_done=done, on_started=procs.update, on_exit=exited)
        finally:
            schedule.stop()
            schedule.restore()  # a switch due to restart, a link due to come up: back now, for the next run
        down = schedule.down_switches()  # a switch crashed and not restarted: nothing to read from it
        carried, goodput = after.get("links", {}), after.get("goodput")
        switches = delta(after.get("switches") or live_snapshot(fabric, down), before)
        label_ports(switches, net.topo)
        if spec.dlcp.enabled:
            for name in fabric.switch_names():
                if name in down:
                    continue
                now = settings.dlcp_events(name)
                switches[name]["dlcp"] = {job: {event: n - dlcp_before[name].get(job, {}).get(event, 0)
                                                for event, n in counts.items()} for job, counts in now.items()}
        if settings.netreduce_jobs and not down:
            switches["netreduce"] = {str(job): asdict(status) for job, status in settings.netreduce_status().items()}
        rotations = settings.tensorlights_rotations()
    finally:
        unsubscribe()
        undo_settings(settings, schedule.down_switches())
    report = summarize(spec, cfgs, results, switches, started, carried, goodput)
    if schedule.faults:
        for result in results[cfgs[0].job_id].values():  # NetReduce: where the job's workers left the switch
            for change in result.get("fallback", {}).get("changes", []):
                schedule.path_changed(change["switch"], change["path"], change["agreed_at"])
        kept = [(it["index"], it["start"], it["end"]) for it in report["iterations"]]
        report = with_faults(report, schedule.records(kept, spec.iterations), schedule.go or wall)
    # What limited the run: the links (busiest_link_load, when shaped) or the machine (cpu_idle near 0).
    extra = report["headline_extra"]
    extra["cpu_idle"] = cpu[0].idle_share_until(cpu[-1]) if len(cpu) == 2 else None
    ideal_load = (report.get("training") or {}).get("ideal_link_load")
    bottleneck = judge(extra["cpu_idle"], extra.get("busiest_link_load"), ideal_load)
    extra["machine_bound"], extra["machine_bound_reason"] = bottleneck.machine_bound, bottleneck.reason
    report["bmv2"] = net.bmv2.describe() if net.bmv2 is not None else None  # the build the switches ran
    extra["wall_s"] = time.monotonic() - wall
    if rotations is not None:
        report["tensorlights"] = {"rotations": rotations, "interval_s": spec.tensorlights_rotate_s}
    training = report.get("training")
    if training and training.get("timeline_iteration") is not None:
        training["timeline"] = write_timeline(
            results[cfgs[0].job_id], training["timeline_iteration"], training["dilation"], out_dir,
            f"{spec.label}: iteration {training['timeline_iteration']} (testbed time; real = testbed / "
            f"{training['dilation']:.3g})")
    report = results_file.write(out_dir / "results.json", report)
    write_report(report, out_dir)
    return report


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


def cuts_patches(spec: ExperimentSpec) -> bool:
    """The spec's network needs patched links: a link fault between switches cuts a patch
    (gradswitch/net/patch_links.py), not a BMv2 port."""
    topo = topology_for(spec)
    return any(f.kind in LINK_FAULTS and all(topo.is_switch(end) for end in f.link_ends()) for f in spec.faults)


def rank_of(cfg: JobConfig, node_id: int) -> int:
    """A worker's rank in its job (its place among the job's workers)."""
    return next(i for i, w in enumerate(cfg.workers) if w.node_id == node_id)


def fault_schedule_for(net: Testbed, spec: ExperimentSpec, cfg: JobConfig, procs: Processes, run_dir: Path
                       ) -> FaultSchedule:
    """The spec's faults on this network, against job 1 (`cfg`): the Testbed's switch and link mechanisms, the
    supervisor's processes (`procs`, filled once they start) for a worker crash, the slow-down file a worker
    reads and its link's rate for a slow worker."""
    hosts = [w.host for w in cfg.workers]
    ranks = {i: rank for i, f in enumerate(spec.faults) if f.kind in WORKER_FAULTS
             and (rank := worker_rank(f, net.topo, hosts)) is not None}
    one_job_dir = job_dir(run_dir, cfg.job_id)

    def kill_worker(rank: int) -> str:
        node = cfg.workers[rank]
        proc = procs[(cfg.job_id, node.node_id)]
        proc.send_signal(signal.SIGKILL)
        return f"worker {rank} on {node.host} (node {node.node_id}, pid {proc.pid})"

    def slow_worker(rank: int, fault: Fault) -> None:
        node = cfg.workers[rank]
        if fault.factor != 1:
            write_slowdown(one_job_dir, node.node_id, fault.factor)
        if fault.rate_mbps is not None:
            net.set_link_rate(node.host, fault.rate_mbps)

    def unslow_worker(rank: int, fault: Fault) -> None:
        host = cfg.workers[rank].host
        (link,) = net.topo.links_of(host)
        if link.bw_mbps:
            net.set_link_rate(host, link.bw_mbps)
        else:  # an unshaped link got shapers to be cut: it keeps them, at the cut rate
            log.warning("fault %s: %s's link was unshaped; it stays at %g Mb/s until the network stops", fault.label,
                        host, fault.rate_mbps)

    return FaultSchedule(spec.faults, Mechanisms(
        crash_switch=net.crash_switch, restart_switch=net.restart_switch, hang_switch=net.hang_switch,
        release_switch=net.release_switch, set_link=net.set_link,
        kill_worker=kill_worker, slow_worker=slow_worker, unslow_worker=unslow_worker), ranks)


def subscribe_health(net: Testbed, schedule: FaultSchedule) -> Callable[[], None]:
    """The schedule hears the controller's health events (a switch or link noticed down, traffic rerouted, a switch
    back), where the control plane publishes them; returns what undoes it."""
    if net.control is None or not schedule.faults:
        return lambda: None
    return net.control.subscribe(schedule.on_health)


def undo_settings(settings: RunSettings, down: set[str]) -> None:
    """Undo what the run set on the switches. With a switch crashed and not restarted, what cannot reach it is
    expected to fail: logged at debug, not made the run's error (the fault is, first)."""
    try:
        settings.__exit__(None, None, None)
    except Exception as e:
        if not down:
            raise
        log.debug("undoing the run's settings with %s down: %s", ", ".join(sorted(down)), e)
