"""What a run on the testbed sets up around its nodes and undoes after, whichever engine its nodes run (the loop's
gradswitch/experiment/runner.py, the graph engine's gradswitch/experiment/graph_run.py): the network's patched links
for its link faults, its faults' mechanisms on this network, the controller's health events, undoing its settings
on the switches."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from pathlib import Path

from gradswitch.experiment.fault_schedule import FaultSchedule, Mechanisms
from gradswitch.experiment.network_settings import RunSettings
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.supervisor import Processes
from gradswitch.experiment.testbed import Testbed
from gradswitch.hosts.slowdown import write_slowdown
from gradswitch.topology.faults import LINK_FAULTS, WORKER_FAULTS, Fault, worker_rank
from gradswitch.workload.job import JobConfig, job_dir

log = logging.getLogger(__name__)


def cuts_patches(spec: ExperimentSpec) -> bool:
    """The spec's network needs patched links: a link fault between switches cuts a patch
    (gradswitch/net/patch_links.py), not a BMv2 port."""
    topo = topology_for(spec)
    return any(f.kind in LINK_FAULTS and all(topo.is_switch(end) for end in f.link_ends()) for f in spec.faults.faults)


def rank_of(cfg: JobConfig, node_id: int) -> int:
    """A worker's rank in its job (its place among the job's workers)."""
    return next(i for i, w in enumerate(cfg.workers) if w.node_id == node_id)


def fault_schedule_for(net: Testbed, spec: ExperimentSpec, cfg: JobConfig, procs: Processes, run_dir: Path
                       ) -> FaultSchedule:
    """The spec's faults on this network, against job 1 (`cfg`): the Testbed's switch and link mechanisms, the
    supervisor's processes (`procs`, filled once they start) for a worker crash, the slow-down file a worker
    reads and its link's rate for a slow worker."""
    hosts = [w.host for w in cfg.workers]
    ranks = {i: rank for i, f in enumerate(spec.faults.faults) if f.kind in WORKER_FAULTS
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

    return FaultSchedule(spec.faults.faults, Mechanisms(
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
