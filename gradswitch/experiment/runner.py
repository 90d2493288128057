"""`gradswitch experiment`: bring a network up, run a spec's jobs on its hosts, tear down, report.

Workers and servers are real processes in Mininet hosts (`python -m workers.main`), talking
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

import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gradswitch.experiment import results_file
from gradswitch.experiment.background import GoodputMeter
from gradswitch.experiment.bottleneck import judge
from gradswitch.experiment.counters import delta, label_ports, snapshot
from gradswitch.experiment.cpu_load import CpuSample, cpu_sample
from gradswitch.experiment.links import LinkMeter
from gradswitch.experiment.network_settings import BACKGROUND_PORT, RunSettings
from gradswitch.experiment.placement import job_config, place, topology_for
from gradswitch.experiment.report import summarize, write_report
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec
from gradswitch.experiment.supervisor import Progress, run_nodes
from gradswitch.experiment.timeline import write_timeline
from gradswitch.testbed import Testbed
from mininet_topos.network import NetworkOptions


def run_experiment(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
                   network_options: NetworkOptions | None = None) -> Results:
    """Run one experiment end to end on a network of its own (or on the simulator: backend = ns3); returns
    (and writes) results.json's content."""
    spec.validate()
    out_dir = out_dir.resolve()  # the workers run in other working directories: they get absolute paths
    if spec.simulated:
        from gradswitch.experiment.simulated import run_simulated

        return run_simulated(spec, out_dir, progress)
    options = network_options or NetworkOptions(run_dir=out_dir / "net")
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
    placement = place(spec, net.topo)
    cfgs = [job_config(spec, j + 1, nodes, net.topo) for j, nodes in enumerate(placement.jobs)]
    for cfg in cfgs:
        cfg.save(out_dir / f"job{cfg.job_id}.json")
    fabric = net.fabric
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

    def done() -> None:  # ... to their end
        cpu.append(cpu_sample())
        after["links"] = links.stop()
        after["goodput"] = background.stop() if background is not None else None
        after["switches"] = snapshot(fabric)

    with RunSettings(net, spec, cfgs, placement, run_dir) as settings:
        # DLCP's event counters count from the switch's start (several runs may share a network): this run's are
        # what they gained while its jobs ran (nothing of the jobs' runs before the go: their nodes only resolve
        # their peers, with ICMP).
        dlcp_before = {name: settings.dlcp_events(name) for name in fabric.switch_names()} if spec.dlcp.enabled else {}
        results = run_nodes(net, cfgs, out_dir, run_dir, Progress(spec.iterations, spec.label, progress), on_go=go,
                            on_done=done)
        carried, goodput = after.get("links", {}), after.get("goodput")
        switches = delta(after.get("switches") or snapshot(fabric), before)
        label_ports(switches, net.topo)
        if spec.dlcp.enabled:
            for name in fabric.switch_names():
                now = settings.dlcp_events(name)
                switches[name]["dlcp"] = {job: {event: n - dlcp_before[name].get(job, {}).get(event, 0)
                                                for event, n in counts.items()} for job, counts in now.items()}
        if settings.netreduce_jobs:
            switches["netreduce"] = {str(job): asdict(status) for job, status in settings.netreduce_status().items()}
        rotations = settings.tensorlights_rotations()
    report = summarize(spec, cfgs, results, switches, started, carried, goodput)
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
