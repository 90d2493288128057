"""Running a job's worker and server processes as threads on an in-memory network (tests/memlink.py),
for tests of the hosts' side without Mininet: the same `gradswitch.hosts.main.run_node` a Mininet host runs."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from gradswitch.hosts.main import run_node
from gradswitch.protocol.choice import Choice
from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.protocol.polling import wait_until
from gradswitch.roce.qp import Mode
from gradswitch.workload.job import Algorithm, DType, Emulation, FloatMode, JobConfig, Node, Role, Training
from tests.memlink import MemoryHub

CHOICES: dict[str, type[Choice]] = {"dtype": DType, "float_mode": FloatMode, "transport": Mode}
DEFAULTS: dict[str, Any] = {"iterations": 2, "size_bytes": 6000, "mtu": 256, "window": 16, "rto": 0.01,
                            "iteration_timeout": 30.0, "start_timeout": 10.0}


def job(algo: str, workers: int, servers: int = 0, **kw: Any) -> JobConfig:
    """A job of `workers` workers (hosts h1.., 10.0.1.x) and `servers` servers (ps1.., 10.0.2.x):
    DEFAULTS, then kw (choices may be given as their spelling, e.g. transport="sr")."""
    nodes = [Node(i, Role.WORKER, f"h{i + 1}", f"10.0.1.{i + 1}") for i in range(workers)]
    nodes += [Node(workers + j, Role.SERVER, f"ps{j + 1}", f"10.0.2.{j + 1}") for j in range(servers)]
    params = {**DEFAULTS, **{k: CHOICES[k](v) if k in CHOICES else v for k, v in kw.items()}}
    return JobConfig(algo=Algorithm(algo), nodes=tuple(nodes), **params)


def run_job(cfg: JobConfig, run_dir: Path, hub: MemoryHub | None = None, absent: tuple[int, ...] = ()
            ) -> dict[int, dict[str, Any]]:
    """Every node but `absent` on `hub` (a plain in-memory network by default), released together;
    their results by node id. A node that fails while starting fails at once, not at the deadline."""
    hub = hub or MemoryHub(seed=7)
    links = {n.node_id: hub.link(n.ip) for n in cfg.nodes}
    results: dict[int, dict[str, Any]] = {}

    def node(nid: int) -> None:
        results[nid] = dict(run_node(cfg, nid, run_dir, links[nid]))  # read as the tests like: any field

    present = [n.node_id for n in cfg.nodes if n.node_id not in absent]
    threads = [threading.Thread(target=node, args=(nid,), daemon=True) for nid in present]
    for t in threads:
        t.start()

    def ready() -> bool:
        failed = [r.get("error") for r in results.values() if not r["ok"]]
        assert not failed, failed
        return all((run_dir / f"ready-{nid}").exists() for nid in present)

    wait_until(ready, 20, what="the nodes to be ready")
    (run_dir / "go").write_text("go")
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a node hung"
    return results


# ---- training jobs (a model profile, an emulated cluster) ----

TRAINING_JOB: dict[str, Any] = {"iterations": 4, "workload": "resnet50", "scale": 0.001, "ps_key_bytes": 2048,
                                "job_id": 3, "credits": 2}


def training_job(algo: str, workers: int, servers: int = 0, **kw: Any) -> JobConfig:
    """A small ResNet-50 job (NetReduce at its MTU), to which `training(...)` is added."""
    mtu = NETREDUCE_MTU if algo == "netreduce" else DEFAULTS["mtu"]
    return job(algo, workers, servers, **{**TRAINING_JOB, "mtu": mtu, **kw})


def training(**kw: Any) -> Training:
    """An emulated V100 cluster at 25 Gb/s, batch 32, time dilated by 0.5, DDP buckets and partitions
    at the job's scale (0.001); kw replaces any of it."""
    base = Training(Emulation(25.0, batch=32), dilation=0.5, bucket_bytes=int(25 * 2**20 * 0.001),
                    partition_bytes=int(4 * 2**20 * 0.001))
    return replace(base, **kw)


def run_ok(cfg: JobConfig, run_dir: Path, hub: MemoryHub | None = None) -> dict[int, dict[str, Any]]:
    """run_job, and every node must have succeeded."""
    results = run_job(cfg, run_dir, hub)
    for r in results.values():
        assert r["ok"], r.get("error")
    return results
