"""What a run sets on the network for its duration, and undoes after: loss rules on the worker
links, the RoCE class, load balancing (ECMP seed, flowlets), DLCP features and thresholds,
NetReduce jobs, TensorLights at the servers' host, bulk TCP background traffic. Undone whatever
happens, so one network can carry several runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from gradswitch.control.control_plane import ControlPlane
from gradswitch.control.netreduce_jobs import JobStatus
from gradswitch.experiment.netreduce_watch import NetReduceWatch
from gradswitch.experiment.placement import Placement
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.tensorlights import ServerClass, TensorLights
from gradswitch.protocol.background_tcp import BACKGROUND_PORT, CLIENT_PORT_BASE
from gradswitch.protocol.ecmp import Balancing
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.polling import wait_until
from gradswitch.workload.job import Algorithm, JobConfig, job_dir


@dataclass
class RunSettings:
    """A context manager: `with RunSettings(...) as settings:` applies, leaving undoes."""

    net: Testbed  # running
    spec: ExperimentSpec
    cfgs: list[JobConfig]
    placement: Placement
    run_dir: Path
    lossy: list[tuple[str, int]] = field(default_factory=list)  # (switch, port) with a loss rule
    netreduce_jobs: list[int] = field(default_factory=list)
    lights: TensorLights | None = None
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)
    netreduce_watch: NetReduceWatch | None = None  # the NetReduce jobs' reaction to a switch's loss and return
    _unsubscribe: Callable[[], None] | None = None

    @property
    def control(self) -> ControlPlane:
        control = self.net.control
        assert control is not None, "the network is not running"
        return control

    def __enter__(self) -> RunSettings:
        try:
            self._apply()
        except BaseException:
            self._undo()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
                 ) -> None:
        self._undo()

    def _apply(self) -> None:
        spec, control, topo = self.spec, self.control, self.net.topo
        if spec.faults.loss_pct > 0:
            for cfg in self.cfgs:
                for node in cfg.workers:
                    switch, port = topo.attachment(node.host)
                    self.lossy.append((switch, port))
                    control.fabric.set_port_loss(switch, port, spec.faults.loss_pct / 100.0, "both",
                                                 CONFIG.IP_PROTO_UDP,
                                                 CONFIG.ROCE_V2_UDP_PORT)
        if spec.transport.dlcp.threshold_bytes is not None:
            control.dlcp.set_thresholds({p: spec.transport.dlcp.threshold_bytes for p in range(CONFIG.PRIORITY_QUEUES)})
        if spec.transport.roce_class:
            control.dlcp.set_roce_class(True)
        if spec.network.balancing != Balancing():
            control.balancing.set(spec.network.load_balance, spec.network.flowlet_gap_us, spec.network.ecmp_seed)
        for cfg in self.cfgs:
            if spec.transport.dlcp.enabled:
                control.dlcp.set(cfg.job_id, spec.transport.dlcp.priority, spec.transport.dlcp.drop,
                                 spec.transport.dlcp.spray)
            if spec.algorithm.algo == Algorithm.NETREDUCE:
                control.netreduce.create(cfg.job_id, [n.host for n in cfg.workers], spec.algorithm.credits,
                                         quorum=spec.algorithm.netreduce_k,
                                         deadline_us=spec.algorithm.netreduce_deadline_us)
                self.netreduce_jobs.append(cfg.job_id)
        if self.netreduce_jobs:
            self._watch_netreduce()
        self._start_tensorlights()
        self._start_background()

    def _watch_netreduce(self) -> None:
        """Fall back to ring when a job's aggregation switch dies, return when it is back (netreduce_watch.py)."""
        watch = NetReduceWatch(self.control)
        for cfg in self.cfgs:
            if cfg.job_id in self.netreduce_jobs:  # (each job's run directory, as the supervisor makes it)
                watch.add_job(cfg.job_id, len(cfg.workers), job_dir(self.run_dir, cfg.job_id), cfg.iteration_timeout)
        watch.start()
        self.netreduce_watch = watch
        self._unsubscribe = self.control.subscribe(watch.on_health)

    def _undo(self) -> None:
        control = self.control
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.netreduce_watch is not None:
            self.netreduce_watch.stop()
        for proc in self.background:
            proc.kill()
            proc.wait(timeout=10)
        self.background = []
        if self.lights is not None:
            self.lights.remove(self.spec.network.bw_mbps)
            self.lights = None
        for job in self.netreduce_jobs:
            control.netreduce.teardown(job)
        self.netreduce_jobs = []
        for switch, port in self.lossy:
            control.fabric.set_port_loss(switch, port, 0.0, "both", CONFIG.IP_PROTO_UDP, CONFIG.ROCE_V2_UDP_PORT)
        self.lossy = []
        if self.spec.transport.dlcp.enabled:
            for cfg in self.cfgs:
                control.dlcp.set(cfg.job_id)  # nothing given: all off
        if self.spec.transport.dlcp.threshold_bytes is not None:
            control.dlcp.set_thresholds()  # the defaults again
        if self.spec.transport.roce_class:
            control.dlcp.set_roce_class(False)
        if self.spec.network.balancing != Balancing():
            control.balancing.reset()  # ECMP with the plain hash, as the network started

    # ---- what the switches counted, read before undoing ----

    def dlcp_events(self, switch: str) -> dict[int, dict[str, int]]:
        return {cfg.job_id: self.control.dlcp.events(switch, cfg.job_id) for cfg in self.cfgs}

    def netreduce_status(self) -> dict[int, JobStatus]:
        return {job: self.control.netreduce.status(job) for job in self.netreduce_jobs}

    def tensorlights_rotations(self) -> int | None:
        return None if self.lights is None else int(self.lights.rotations)

    # ---- hosts ----

    def _start_tensorlights(self) -> None:
        if not self.spec.algorithm.tensorlights or self.placement.server_host is None:
            return
        host = self.net.host(self.placement.server_host)
        rate = self.spec.network.bw_mbps or 1000.0
        servers = [ServerClass(s.node_id, cfg.job_id) for cfg in self.cfgs for s in cfg.servers]
        self.lights = TensorLights(host, "eth0", rate, servers)
        self.lights.install()
        if self.spec.algorithm.tensorlights_rotate_s > 0:
            self.lights.start_rotation(self.spec.algorithm.tensorlights_rotate_s)

    def _start_background(self) -> None:
        if self.placement.background is None:
            return
        sender, receiver = self.placement.background
        dst = self.net.topo.host(receiver).ip
        port = str(BACKGROUND_PORT)
        self.background.append(self.net.host(receiver).popen(
            ["iperf3", "-s", "-p", port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_until(lambda: port in self.net.host(receiver).cmd("ss -ltn"), 10, what="the background iperf3 server")
        # --forceflush: every interval's lines reach the log (a run's end kills iperf3); --cport: stream k from
        # CLIENT_PORT_BASE + k, the simulator's ports, where the spec asks for them
        cport = ["--cport", str(CLIENT_PORT_BASE)] if self.spec.workload.background_fixed_ports else []
        with (self.run_dir / "background.log").open("wb") as log:
            self.background.append(self.net.host(sender).popen(
                ["iperf3", "-c", dst, "-p", port, "-t", "86400", "-M", str(self.spec.transport.mtu), "-P",
                 str(self.spec.workload.background_flows), "--forceflush", *cport], stdout=log,
                                                               stderr=subprocess.STDOUT))
