"""A run's plan, computed once per spec: its topology, where its processes go and every job's configuration.

Every way a spec runs (the testbed's loop and graph engines, the simulator, the goodput study's runs, the reports'
ideal) starts from `plan_run`: placement (gradswitch/experiment/placement.py) is called here and nowhere else, so
the two backends place and configure a spec's jobs alike by construction. A backend is handed the plan; what it
needs of the simulator's settings comes from the plan too (`sim_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gradswitch.experiment.placement import Placement, job_config, place, topology_for
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.sim import Background, CheckMode, DlcpSwitch, SimSettings, TensorLightsSetting
from gradswitch.topology.model import Topology
from gradswitch.workload.job import JobConfig, job_file

PROGRESS_S = 10.0  # wall seconds between the simulator's progress lines on a terminal


def sim_settings(spec: ExperimentSpec, cfgs: list[JobConfig], placement: Placement, progress: bool) -> SimSettings:
    """What the run sets besides its topology and jobs, as RunSettings sets it on the BMv2 switches."""
    background = None
    if placement.background is not None:
        sender, receiver = placement.background
        background = Background(sender, receiver, spec.workload.background_flows,
                                spec.transport.mtu)  # iperf3 -P flows -M mtu
    lights = None
    if spec.algorithm.tensorlights and placement.server_host is not None:
        servers = tuple((cfg.job_id, s.node_id) for cfg in cfgs for s in cfg.servers)
        lights = TensorLightsSetting(placement.server_host, servers, spec.algorithm.tensorlights_rotate_s)
    d = spec.transport.dlcp
    dlcp = DlcpSwitch(d.priority, d.drop, d.spray, d.threshold_bytes) if d.enabled else DlcpSwitch()
    s = spec.network.sim
    return SimSettings(link_delay_s=s.link_delay_us * 1e-6, switch_delay_s=s.switch_delay_us * 1e-6,
                       host_message_delay_s=s.host_delay_us * 1e-6, queue_bytes=s.queue_bytes,
                       shaped_links=s.shaped_links,
                       check=CheckMode(str(s.check)), ecmp_seed=spec.network.ecmp_seed,
                       load_balance=spec.network.load_balance,
                       flowlet_gap_us=spec.network.flowlet_gap_us, roce_class=spec.transport.roce_class, dlcp=dlcp,
                       loss_pct=spec.faults.loss_pct, background=background, tensorlights=lights,
                       seed=spec.measurement.seed,
                       progress_s=PROGRESS_S if progress else 0.0, faults=spec.faults.faults)


@dataclass(frozen=True)
class RunPlan:
    """What a spec runs, where: computed once (`plan_run`), read by every backend and report."""

    spec: ExperimentSpec
    topology: Topology  # the network the jobs run on (the spec's own, or a larger one several specs share)
    placement: Placement
    jobs: tuple[JobConfig, ...]  # job 1 first

    @property
    def first(self) -> JobConfig:
        return self.jobs[0]

    def save(self, out_dir: Path) -> None:
        """Every job's configuration file in the run's directory (what the host processes read)."""
        for cfg in self.jobs:
            cfg.save(job_file(out_dir, cfg.job_id))

    def sim_settings(self, progress: bool) -> SimSettings:
        """The simulator's settings of this plan (its faults, DLCP, background flows, ...)."""
        return sim_settings(self.spec, list(self.jobs), self.placement, progress)


def plan_run(spec: ExperimentSpec, topology: Topology | None = None) -> RunPlan:
    """The plan of `spec` on `topology` (default: the topology the spec describes)."""
    topo = topology if topology is not None else topology_for(spec)
    placement = place(spec, topo)
    jobs = tuple(job_config(spec, j + 1, nodes, topo) for j, nodes in enumerate(placement.jobs))
    return RunPlan(spec, topo, placement, jobs)
