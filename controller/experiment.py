"""`gradswitch experiment`: bring a network up, run jobs on its hosts, tear down, report.

Workers and servers are real processes in Mininet hosts (`python -m workers.main`), talking
RoCE v2 through the BMv2 fabric. One spec may run several identical jobs at once (each on
its own hosts, or with their parameter servers colocated on one host), with bulk TCP
background traffic, DLCP features and TensorLights. Loss is injected by the switches'
fault-injection table on every worker link (both directions, RoCE packets only), never netem.
The output directory receives job<N>.json, per-node results and logs, results.json, a table
and plots; job 1 is the one the headline figures describe.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from controller.report import summarize, write_report
from mininet_topos.shaping import buffer_bytes
from mininet_topos.topologies import build_topology
from mininet_topos.topology import Topology
from protocol.config import CONFIG
from protocol.netreduce import DEFAULT_CREDITS
from protocol.netreduce import MTU as NETREDUCE_MTU
from protocol.paths import REPO_ROOT
from protocol.polling import wait_until
from workers.config import JobConfig, Node
from workers.tensors import workload

WORKER_NICE = 10


class ExperimentError(RuntimeError):
    """The run failed: names the node and shows the tail of its log."""


@dataclass(frozen=True)
class ExperimentSpec:
    algo: str = "ring"
    workers: int = 4
    size_bytes: int = 8 << 20
    iterations: int = 10
    topo: str = "rack"
    bw_mbps: float | None = None
    loss_pct: float = 0.0
    transport: str = "gbn"
    servers: int = 1  # parameter servers per job (ps only)
    ps_key_bytes: int = 64 << 10  # ps: bytes per key; a step of K keys overlaps key k's pull with k+1's push
    workload: str = "synthetic"
    scale: float = 1.0
    dtype: str = "int32"
    float_mode: str = "fixed"  # float32 on the wire: "fixed" scale or shared "exponent" per block
    mtu: int = 1024
    window: int = 32  # packets in flight per QP
    leaves: int = 2  # leafspine
    spines: int = 2
    seed: int = 1
    name: str = ""
    jobs: int = 1  # identical jobs run at once, ids 1..jobs, on their own hosts
    colocate_servers: bool = False  # every job's parameter servers on one host (TensorLights' setting)
    background_flows: int = 0  # bulk TCP streams (iperf3, segments of the MTU) between two extra hosts on two switches
    credits: int = DEFAULT_CREDITS  # NetReduce: messages in flight per worker
    # DLCP: {"priority", "drop", "spray"} switched on in the switches for every job (drop: selective
    # dropping, with the hosts marking droppable packets), "bounded_loss" (hosts mark and receivers
    # zero-fill, the switches do not drop), "threshold_bytes" (selective drop at or above this
    # virtual-queue depth at every priority; default: per link rate, docs/dlcp.md), and the hosts'
    # workers.dlcp.DlcpPolicy fields (loss_budget, drop_min_layer_class, ...)
    dlcp: dict[str, Any] = field(default_factory=dict)
    tensorlights: bool = False  # HTB priorities among the colocated servers at their host's NIC
    tensorlights_rotate_s: float = 0.0  # rotate the favoured server this often (0: fixed)
    extra: dict[str, Any] = field(default_factory=dict)  # passed to the workers as JobConfig.extra

    @property
    def label(self) -> str:
        return self.name or f"{self.algo}-n{self.workers}-{self.topo}"

    @property
    def servers_per_job(self) -> int:
        return self.servers if self.algo == "ps" else 0

    def hosts_needed(self) -> int:
        server_hosts = (1 if self.colocate_servers else self.jobs * self.servers_per_job) if self.servers_per_job else 0
        return self.jobs * self.workers + server_hosts + (2 if self.background_flows else 0)

    def validate(self) -> None:
        reordered_or_lossy = any(self.dlcp.get(k) for k in ("drop", "spray", "bounded_loss"))
        if reordered_or_lossy and self.transport != "sr":
            raise ExperimentError("DLCP dropping, bounded loss and spraying need packets accepted in any order: "
                                  "use transport sr")
        if self.tensorlights and not (self.algo == "ps" and self.colocate_servers):
            raise ExperimentError("TensorLights applies to parameter servers colocated on one host "
                                  "(algo ps, colocate_servers)")
        if self.ps_key_bytes < 4 or self.ps_key_bytes % 4:
            raise ExperimentError(f"ps_key_bytes {self.ps_key_bytes}: must be a positive multiple of 4 (int32 values)")
        if self.algo == "netreduce" and self.workers < 2:
            raise ExperimentError("NetReduce needs at least 2 workers")


def topology_for(spec: ExperimentSpec) -> Topology:
    n = spec.hosts_needed()
    if spec.topo == "rack":
        return build_topology("rack", hosts=n, bw_mbps=spec.bw_mbps)
    if spec.topo == "leafspine":
        return build_topology("leafspine", leaves=spec.leaves, spines=spec.spines,
                              hosts_per_leaf=math.ceil(n / spec.leaves), bw_mbps=spec.bw_mbps)
    if spec.topo == "dumbbell":
        return build_topology("dumbbell", hosts_per_side=math.ceil(n / 2), bw_mbps=spec.bw_mbps)
    raise ExperimentError(f"unknown topology {spec.topo!r}")


@dataclass(frozen=True)
class Placement:
    jobs: list[list[Node]]  # per job, its nodes (workers first)
    server_host: str | None  # the shared host of colocated servers
    background: tuple[str, str] | None  # (sender, receiver) hosts of the bulk traffic


def place(spec: ExperimentSpec, topo: Topology) -> Placement:
    """Hosts dealt round-robin over the edge switches, so jobs spread over the fabric.

    A ring's ranks then follow the edge switches (topology-aware, as NCCL builds its rings):
    neighbours share a leaf where they can, so only one ring hop per leaf crosses the
    fabric. In dealing order every hop would cross it, two flows would share each leaf's
    uplinks, and ECMP could put both on one spine.
    """
    by_edge = [[h for h, _ in topo.hosts_of(s.name)] for s in topo.edge_switches()]
    order = [h.name for rnd in range(max(len(e) for e in by_edge)) for e in by_edge if rnd < len(e) for h in [e[rnd]]]
    edge_of = {h.name: i for i, e in enumerate(by_edge) for h in e}
    free = list(order)

    def take() -> str:
        return free.pop(0)

    server_host = take() if spec.servers_per_job and spec.colocate_servers else None
    jobs = []
    for _ in range(spec.jobs):
        hosts = [take() for _ in range(spec.workers)]
        if spec.algo == "ring":
            hosts.sort(key=lambda h: (edge_of[h], order.index(h)))
        nodes = [Node(i, "worker", h, topo.host(h).ip) for i, h in enumerate(hosts)]
        for j in range(spec.servers_per_job):
            host = server_host or take()
            nodes.append(Node(spec.workers + j, "server", host, topo.host(host).ip))
        jobs.append(nodes)
    background = None
    if spec.background_flows:
        sender = take()
        edge = topo.attachment(sender)[0]
        receiver = next((h for h in free if topo.attachment(h)[0] != edge), free[0])
        background = (sender, receiver)
    return Placement(jobs, server_host, background)


def job_config(spec: ExperimentSpec, job_id: int, nodes: list[Node]) -> JobConfig:
    extra = dict(spec.extra)
    if spec.algo == "netreduce":
        extra.setdefault("credits", spec.credits)
    if spec.dlcp:
        extra["dlcp"] = {k: v for k, v in spec.dlcp.items()
                         if k not in ("priority", "drop", "spray", "threshold_bytes", "bounded_loss")}
        # Hosts mark droppable packets and receivers zero-fill them within the budget when the
        # switches drop selectively, or for bounded loss alone (losses of any other cause).
        extra["dlcp"]["drop"] = bool(spec.dlcp.get("drop") or spec.dlcp.get("bounded_loss"))
        extra["dlcp"]["reorder"] = bool(spec.dlcp.get("priority") or spec.dlcp.get("spray"))
    mtu = NETREDUCE_MTU if spec.algo == "netreduce" else spec.mtu
    window = incast_window(spec, mtu)
    return JobConfig(algo=spec.algo, nodes=tuple(nodes), iterations=spec.iterations, workload=spec.workload,
                     size_bytes=spec.size_bytes, scale=spec.scale, dtype=spec.dtype,
                     float_mode=spec.float_mode, transport=spec.transport, ps_key_bytes=spec.ps_key_bytes,
                     mtu=mtu, window=window, rto=min_rto(window, mtu, spec.bw_mbps),
                     seed=spec.seed + job_id - 1, job_id=job_id, extra=extra)


def fan_in(spec: ExperimentSpec) -> int:
    """QPs that send into one host at once: a parameter server's workers (every colocated job's),
    one neighbour for ring, the switch's one result stream for NetReduce."""
    if spec.algo == "ps":
        return spec.workers * (spec.jobs if spec.colocate_servers else 1)
    return 1


def incast_window(spec: ExperimentSpec, mtu: int) -> int:
    """The spec's window per QP, capped so that the windows of an incast fit the shaped queue of
    the receiving link. RoCE relies on PFC for that and there is none here: without the cap,
    eight parameter-server pushes into a 5 Mb/s link overflow its queue every round, go-back-N
    resends whole windows into the same overflow, and a QP exhausts its retries."""
    if not spec.bw_mbps:
        return spec.window
    return max(4, min(spec.window, buffer_bytes(spec.bw_mbps) // (fan_in(spec) * (mtu + 80))))


def min_rto(window: int, mtu: int, bw_mbps: float | None) -> float:
    """The smallest retransmission timeout: at least 50 ms, 3 times a full window's time on the
    link, and a full shaped queue's time plus a window's (under incast, as at a parameter
    server, the packet may sit behind the whole buffer); the RTT estimate raises it further."""
    if not bw_mbps:
        return 0.05
    rate = bw_mbps * 1e6 / 8
    window_s = window * (mtu + 80) / rate
    return max(0.05, 3 * window_s, buffer_bytes(bw_mbps) / rate + window_s)


class Progress:
    """A one-line progress bar on stderr (only on a terminal, or when forced)."""

    def __init__(self, total: int, label: str, enabled: bool | None = None) -> None:
        self.total = max(1, total)
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = time.monotonic()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * min(done, self.total) / self.total)
        elapsed = time.monotonic() - self.start
        sys.stderr.write(f"\r{self.label}: [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
                         f"iterations, {elapsed:.1f} s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def run_experiment(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
                   network_options: Any = None) -> dict[str, Any]:
    """Run one experiment end to end on a network of its own; returns (and writes) results.json's content."""
    from mininet_topos.network import GradNetwork, NetworkOptions

    spec.validate()
    topo = topology_for(spec)
    options = network_options or NetworkOptions(run_dir=out_dir / "net")
    with GradNetwork(topo, options) as net:
        return run_on(net, spec, out_dir, progress)


def _snapshot(fabric: Any) -> dict[str, Any]:
    """Per switch: drops by reason, and per port [rx packets, tx packets, tx bytes], at a time."""
    return {name: {"drops": fabric.drops(name), "time": time.monotonic(),
                   "ports": {p.port: [p.rx_packets, p.tx_packets, p.tx_bytes] for p in fabric.port_stats(name)}}
            for name in fabric.switch_names()}


def _delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """Switch counters of this run only (the network may have carried earlier runs)."""
    out: dict[str, Any] = {}
    for name, a in after.items():
        b = before.get(name, {"drops": {}, "ports": {}, "time": a["time"]})
        drops = {k: v - b["drops"].get(k, 0) for k, v in a["drops"].items() if v - b["drops"].get(k, 0)}
        ports = {p: [x - y for x, y in zip(v, b["ports"].get(p, [0] * len(v)), strict=True)]
                 for p, v in a["ports"].items()}
        out[name] = {"drops": drops, "ports": ports, "seconds": a["time"] - b["time"]}
    return out


def run_on(net: Any, spec: ExperimentSpec, out_dir: Path, progress: bool | None = None) -> dict[str, Any]:
    """Run the spec's jobs on a running network (whose topology fits the spec), then undo what the
    run set on the switches (loss rules, DLCP features, NetReduce jobs); returns the report."""
    spec.validate()
    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir = out_dir / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir()
    topo = net.topo
    placement = place(spec, topo)
    cfgs = [job_config(spec, j + 1, nodes) for j, nodes in enumerate(placement.jobs)]
    for cfg in cfgs:
        cfg.save(out_dir / f"job{cfg.job_id}.json")
    fabric = net.fabric
    assert fabric is not None
    started = time.time()
    before: dict[str, Any] = {}
    lossy = [topo.attachment(node.host) for cfg in cfgs for node in cfg.workers] if spec.loss_pct > 0 else []
    created: list[int] = []
    lights = None
    background: list[subprocess.Popen[bytes]] = []
    try:
        for switch, port in lossy:
            fabric.set_port_loss(switch, port, spec.loss_pct / 100.0, "both", CONFIG.IP_PROTO_UDP,
                                  CONFIG.ROCE_V2_UDP_PORT)
        if spec.dlcp.get("threshold_bytes") is not None:
            fabric.dlcp_thresholds({p: int(spec.dlcp["threshold_bytes"]) for p in range(CONFIG.PRIORITY_QUEUES)})
        for cfg in cfgs:
            if spec.dlcp:
                fabric.dlcp_set(cfg.job_id, bool(spec.dlcp.get("priority")), bool(spec.dlcp.get("drop")),
                                bool(spec.dlcp.get("spray")))
            if spec.algo == "netreduce":
                fabric.netreduce_create(cfg.job_id, [n.host for n in cfg.workers], spec.credits)
                created.append(cfg.job_id)
        lights = _start_tensorlights(net, spec, cfgs, placement)
        background = _start_background(net, spec, placement, run_dir)
        results = _run_jobs(net, cfgs, run_dir, Progress(spec.iterations, spec.label, progress),
                            on_go=lambda: before.update(_snapshot(fabric)))  # counters from the start on
        switches = _delta(_snapshot(fabric), before)
        if spec.dlcp:
            for name in fabric.switch_names():
                switches[name]["dlcp"] = {c.job_id: fabric.dlcp_events(name, c.job_id) for c in cfgs}
        if created:
            switches["netreduce"] = {str(job): fabric.netreduce_status(job) for job in created}
    finally:
        for proc in background:
            proc.kill()
            proc.wait(timeout=10)
        if lights is not None:
            lights.remove(spec.bw_mbps)
        for job in created:
            fabric.netreduce_teardown(job)
        for switch, port in lossy:
            fabric.set_port_loss(switch, port, 0.0, "both", CONFIG.IP_PROTO_UDP, CONFIG.ROCE_V2_UDP_PORT)
        if spec.dlcp:
            for cfg in cfgs:
                fabric.dlcp_set(cfg.job_id)  # nothing given: all off
        if spec.dlcp.get("threshold_bytes") is not None:
            fabric.dlcp_thresholds()  # the defaults again
    report = summarize(spec, cfgs, results, switches, started)
    if lights is not None:
        report["tensorlights"] = {"rotations": lights.rotations, "interval_s": spec.tensorlights_rotate_s}
    (out_dir / "results.json").write_text(json.dumps(report, indent=1))
    write_report(report, out_dir)
    return report


def _start_tensorlights(net: Any, spec: ExperimentSpec, cfgs: list[JobConfig], placement: Placement) -> Any:
    if not spec.tensorlights or placement.server_host is None:
        return None
    from mininet_topos.tensorlights import ServerClass, TensorLights

    host = net.host(placement.server_host)
    rate = spec.bw_mbps or 1000.0
    servers = [ServerClass(s.node_id, cfg.job_id) for cfg in cfgs for s in cfg.servers]
    lights = TensorLights(host, "eth0", rate, servers)
    lights.install()
    if spec.tensorlights_rotate_s > 0:
        lights.start_rotation(spec.tensorlights_rotate_s)
    return lights


def _start_background(net: Any, spec: ExperimentSpec, placement: Placement, run_dir: Path
                      ) -> list[subprocess.Popen[bytes]]:
    if placement.background is None:
        return []
    sender, receiver = placement.background
    dst = net.topo.host(receiver).ip
    server = net.host(receiver).popen(["iperf3", "-s", "-p", "5299"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
    wait_until(lambda: "5299" in net.host(receiver).cmd("ss -ltn"), 10, what="the background iperf3 server")
    with (run_dir / "background.log").open("wb") as log:
        client = net.host(sender).popen(["iperf3", "-c", dst, "-p", "5299", "-t", "86400", "-M", str(spec.mtu), "-P",
                                         str(spec.background_flows)], stdout=log, stderr=subprocess.STDOUT)
    return [client, server]


def _run_jobs(net: Any, cfgs: list[JobConfig], run_dir: Path, bar: Progress,
              on_go: Callable[[], None] = lambda: None) -> dict[int, dict[int, dict[str, Any]]]:
    """Start every node of every job, release them together (on_go just before), wait; results per
    job and node."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    procs: dict[tuple[int, int], subprocess.Popen[bytes]] = {}
    logs: dict[tuple[int, int], Path] = {}
    dirs = {cfg.job_id: run_dir / f"job{cfg.job_id}" for cfg in cfgs}
    by_job = {cfg.job_id: cfg for cfg in cfgs}
    try:
        for cfg in cfgs:
            jd = dirs[cfg.job_id]
            jd.mkdir()
            for node in cfg.nodes:
                key = (cfg.job_id, node.node_id)
                logs[key] = jd / f"{node.host}-{node.node_id}.log"
                with logs[key].open("wb") as log:
                    # Workers run niced: on a small machine the BMv2 switches must not be starved by the
                    # emulated hosts, or they drop packets at their inputs (README, Performance).
                    procs[key] = net.host(node.host).popen(
                        ["nice", "-n", str(WORKER_NICE), sys.executable, "-m", "workers.main",
                         str(run_dir.parent / f"job{cfg.job_id}.json"), str(jd), str(node.node_id)],
                        stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO_ROOT), env=env)

        def ready() -> bool:
            for (job, nid), p in procs.items():
                if p.poll() is not None:
                    node = by_job[job].node(nid)
                    raise ExperimentError(f"job {job}: {node.role} {nid} on {node.host} exited before starting "
                                          f"(status {p.returncode}):\n{_tail(logs[(job, nid)])}")
            return all((dirs[job] / f"ready-{nid}").exists() for job, nid in procs)

        start_timeout = max(c.start_timeout for c in cfgs)
        wait_until(ready, start_timeout, interval=0.05, what="every worker to be ready")
        on_go()
        stamp = str(time.monotonic())
        for jd in dirs.values():
            (jd / "go").write_text(stamp)
        first = cfgs[0]
        deadline = first.iterations * first.iteration_timeout + start_timeout + first.linger_timeout

        def finished() -> bool:
            done = [int(f.read_text() or 0) for w in first.workers
                    if (f := dirs[first.job_id] / f"progress-{w.node_id}").exists()]
            bar.update(min(done) if len(done) == len(first.workers) else 0)
            for (job, nid), p in procs.items():
                abort = dirs[job] / "abort"
                if p.poll() not in (None, 0) and not abort.exists():
                    node = by_job[job].node(nid)
                    # A node that died (or failed) stops the rest of its job now, not at their timeouts.
                    abort.write_text(f"{node.role} {nid} on {node.host} exited with status {p.returncode}")
            return all(p.poll() is not None for p in procs.values())

        try:
            wait_until(finished, deadline, interval=0.2, what="the jobs to finish")
        except TimeoutError as e:
            running = [f"job {j} {by_job[j].node(n).host}" for (j, n), p in procs.items() if p.poll() is None]
            raise ExperimentError(f"{e}; still running: {running}") from None
        finally:
            bar.close()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    results: dict[int, dict[int, dict[str, Any]]] = {cfg.job_id: {} for cfg in cfgs}
    for (job, nid), proc in procs.items():
        path = dirs[job] / f"result-{nid}.json"
        if path.exists():
            results[job][nid] = json.loads(path.read_text())
        else:
            node = by_job[job].node(nid)
            results[job][nid] = {"node_id": nid, "host": node.host, "role": node.role, "ok": False, "iterations": [],
                                 "error": f"no result (exit status {proc.returncode}):\n{_tail(logs[(job, nid)])}"}
    return results


def spec_from_dict(raw: dict[str, Any], base: ExperimentSpec | None = None) -> ExperimentSpec:
    known = set(ExperimentSpec.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise ExperimentError(f"unknown experiment parameters {sorted(unknown)} (known: {sorted(known)})")
    return replace(base or ExperimentSpec(), **raw)


def spec_dict(spec: ExperimentSpec) -> dict[str, Any]:
    return asdict(spec)


def step_bytes(spec: ExperimentSpec) -> int:
    return 4 * workload(spec.workload, spec.size_bytes, spec.scale).elements
