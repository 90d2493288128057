"""`gradswitch experiment`: bring a network up, run one job on its hosts, tear down, report.

Workers and servers are real processes in Mininet hosts (`python -m workers.main`), talking
RoCE v2 through the BMv2 fabric. Loss is injected by the switches' fault-injection table on
every worker link (both directions, RoCE packets only). The run directory receives
job.json, the per-node results and logs, results.json, a table and plots.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from controller.paths import REPO_ROOT
from controller.polling import wait_until
from controller.report import summarize, write_report
from controller.topology import Topology
from mininet_topos.topologies import build_topology
from workers.config import JobConfig, Node
from workers.tensors import workload

ROCE_UDP = 4791


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
    servers: int = 1  # parameter servers (ps only)
    workload: str = "synthetic"
    scale: float = 1.0
    dtype: str = "int32"
    mtu: int = 1024
    window: int = 64
    leaves: int = 2  # leafspine
    spines: int = 2
    seed: int = 1
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # algorithm-specific (netreduce, dlcp...)

    @property
    def label(self) -> str:
        return self.name or f"{self.algo}-n{self.workers}-{self.topo}"

    def hosts_needed(self) -> int:
        return self.workers + (self.servers if self.algo == "ps" else 0)


def topology_for(spec: ExperimentSpec) -> Topology:
    n = spec.hosts_needed()
    if spec.topo == "rack":
        return build_topology("rack", hosts=n, bw_mbps=spec.bw_mbps)
    if spec.topo == "leafspine":
        per_leaf = math.ceil(n / spec.leaves)
        return build_topology("leafspine", leaves=spec.leaves, spines=spec.spines, hosts_per_leaf=per_leaf,
                              bw_mbps=spec.bw_mbps)
    if spec.topo == "dumbbell":
        return build_topology("dumbbell", hosts_per_side=math.ceil(n / 2), bw_mbps=spec.bw_mbps)
    raise ExperimentError(f"unknown topology {spec.topo!r}")


def place(spec: ExperimentSpec, topo: Topology) -> list[Node]:
    """Workers on the first hosts (leaf by leaf), servers on the hosts after them."""
    hosts = list(topo.hosts)
    nodes = [Node(i, "worker", h.name, h.ip) for i, h in enumerate(hosts[: spec.workers])]
    if spec.algo == "ps":
        nodes += [Node(spec.workers + j, "server", h.name, h.ip)
                  for j, h in enumerate(hosts[spec.workers : spec.workers + spec.servers])]
    return nodes


def job_config(spec: ExperimentSpec, nodes: list[Node]) -> JobConfig:
    return JobConfig(algo=spec.algo, nodes=tuple(nodes), iterations=spec.iterations, workload=spec.workload,
                     size_bytes=spec.size_bytes, scale=spec.scale, dtype=spec.dtype, transport=spec.transport,
                     mtu=spec.mtu, window=spec.window, seed=spec.seed, extra=dict(spec.extra))


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
    """Run one experiment end to end; returns (and writes) results.json's content."""
    from mininet_topos.network import GradNetwork, NetworkOptions

    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir = out_dir / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir()
    topo = topology_for(spec)
    nodes = place(spec, topo)
    cfg = job_config(spec, nodes)
    cfg.save(out_dir / "job.json")
    options = network_options or NetworkOptions(run_dir=out_dir / "net")
    started = time.time()
    with GradNetwork(topo, options) as net:
        assert net.fabric is not None
        if spec.loss_pct > 0:
            for node in nodes:
                switch, port = topo.attachment(node.host)
                net.fabric.set_port_loss(switch, port, spec.loss_pct / 100.0, "both", 17, ROCE_UDP)
        prepare = _prepare_hook(spec)
        after = prepare(net, cfg, out_dir) if prepare is not None else None
        results = _run_job(net, cfg, run_dir, Progress(spec.iterations, spec.label, progress))
        switch_drops = {name: net.fabric.drops(name) for name in net.fabric.switch_names()}
        switch_extra = after() if after is not None else {}
    report = summarize(spec, cfg, results, switch_drops, started)
    report["switches"] = switch_extra
    (out_dir / "results.json").write_text(json.dumps(report, indent=1))
    write_report(report, out_dir)
    return report


def _prepare_hook(spec: ExperimentSpec) -> Any:
    """Algorithm-specific set-up on the running network (e.g. NetReduce installs its job)."""
    if spec.algo == "netreduce":
        from controller.netreduce_jobs import prepare_experiment

        return prepare_experiment
    return None


def _run_job(net: Any, cfg: JobConfig, run_dir: Path, bar: Progress) -> dict[int, dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    procs: dict[int, subprocess.Popen[bytes]] = {}
    logs: dict[int, Path] = {}
    try:
        for node in cfg.nodes:
            logs[node.node_id] = run_dir / f"{node.host}-{node.node_id}.log"
            with logs[node.node_id].open("wb") as log:
                procs[node.node_id] = net.host(node.host).popen(
                    [sys.executable, "-m", "workers.main", str(run_dir.parent / "job.json"), str(run_dir),
                     str(node.node_id)], stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO_ROOT), env=env)

        def ready() -> bool:
            for nid, p in procs.items():
                if p.poll() is not None:
                    node = cfg.node(nid)
                    raise ExperimentError(f"{node.role} {nid} on {node.host} exited before starting "
                                          f"(status {p.returncode}):\n{_tail(logs[nid])}")
            return all((run_dir / f"ready-{n}").exists() for n in procs)

        wait_until(ready, cfg.start_timeout, interval=0.05, what="every worker to be ready")
        (run_dir / "go").write_text(str(time.monotonic()))
        deadline = cfg.iterations * cfg.iteration_timeout + cfg.start_timeout + cfg.linger_timeout
        workers = [w.node_id for w in cfg.workers]

        def finished() -> bool:
            done = [int(p.read_text() or 0) for w in workers if (p := run_dir / f"progress-{w}").exists()]
            bar.update(min(done) if len(done) == len(workers) else 0)
            return all(p.poll() is not None for p in procs.values())

        try:
            wait_until(finished, deadline, interval=0.2, what="the job to finish")
        except TimeoutError as e:
            raise ExperimentError(f"{e}; still running: "
                                  f"{[cfg.node(n).host for n, p in procs.items() if p.poll() is None]}") from None
        finally:
            bar.close()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    results: dict[int, dict[str, Any]] = {}
    for nid in procs:
        path = run_dir / f"result-{nid}.json"
        if path.exists():
            results[nid] = json.loads(path.read_text())
        else:
            node = cfg.node(nid)
            results[nid] = {"node_id": nid, "host": node.host, "role": node.role, "ok": False, "iterations": [],
                            "error": f"no result (exit status {procs[nid].returncode}):\n{_tail(logs[nid])}"}
    return results


def spec_from_dict(raw: dict[str, Any], base: ExperimentSpec | None = None) -> ExperimentSpec:
    known = {f for f in ExperimentSpec.__dataclass_fields__}
    unknown = set(raw) - known
    if unknown:
        raise ExperimentError(f"unknown experiment parameters {sorted(unknown)} (known: {sorted(known)})")
    return replace(base or ExperimentSpec(), **raw)


def spec_dict(spec: ExperimentSpec) -> dict[str, Any]:
    return asdict(spec)


def step_bytes(spec: ExperimentSpec) -> int:
    return 4 * workload(spec.workload, spec.size_bytes, spec.scale).elements
