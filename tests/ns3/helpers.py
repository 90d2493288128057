"""Building simulated runs for the tests: from experiment specs (what the orchestration will do), or job
documents written by hand (algo `write`: one sender, one receiver) where a test needs a shape no spec has."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gradswitch.experiment.placement import job_config, place, topology_for
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.runner import run_experiment
from gradswitch.experiment.spec import Engine, ExperimentSpec
from gradswitch.roce.headers import IMM_LEN, RETH_LEN
from gradswitch.roce.qp import Mode
from gradswitch.roce.wire import ROCE_OVERHEAD
from gradswitch.sim.results import SimResult, parse
from gradswitch.sim.run import simulate
from gradswitch.sim.sim_config import base_config, dlcp_json, transport_json
from gradswitch.sim.sim_settings import Background, DlcpSwitch, SimSettings
from gradswitch.topology.model import Topology
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role

ACK_WIRE = ROCE_OVERHEAD + 4  # an ACK on the wire: headers and AETH


def spec_jobs(spec: ExperimentSpec) -> tuple[Topology, list[JobConfig]]:
    """The topology and job configurations the orchestration makes of a spec (gradswitch/experiment/placement.py)."""
    spec.validate()
    topo = topology_for(spec)
    placement = place(spec, topo)
    return topo, [job_config(spec, j + 1, nodes, topo) for j, nodes in enumerate(placement.jobs)]


def both_engines(spec: ExperimentSpec, out: Path) -> tuple[Results, Results]:
    """The spec's run on the training loop (out/loop) and on the graph engine (out/graph), their results.json. The two
    are simulated at once: each is one simulator process and the suite runs one test at a time, so the machine's
    second core is idle otherwise; a simulated figure does not depend on the machine's load."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        loop = pool.submit(run_experiment, spec.but(engine=Engine.LOOP), out / "loop", progress=False)
        graph = pool.submit(run_experiment, spec.but(engine=Engine.GRAPH), out / "graph", progress=False)
        return loop.result(), graph.result()


def run_spec(spec: ExperimentSpec, out: Path, settings: SimSettings | None = None) -> tuple[list[JobConfig], SimResult]:
    from gradswitch.sim.run import run

    topo, cfgs = spec_jobs(spec)
    return cfgs, run(topo, cfgs, settings or SimSettings(), out)


def background_of(spec: ExperimentSpec) -> Background | None:
    """The spec's bulk TCP between the hosts the placement chose (iperf3 -P flows -M mtu on the testbed)."""
    spec.validate()
    placement = place(spec, topology_for(spec))
    if placement.background is None:
        return None
    sender, receiver = placement.background
    return Background(sender, receiver, spec.workload.background_flows, spec.transport.mtu)


def write_job(job_id: int, sender: str, receiver: str, sizes: list[int], *, mtu: int = 4096, window: int = 64,
              iterations: int = 1, layer_class: int = 0, dlcp: dict[str, Any] | None = None, mode: str = "gbn",
              check: str = "digest") -> dict[str, Any]:
    """A job of algo `write`: `sender` writes one message of each size (bytes, a multiple of 4) to `receiver`
    per iteration, each after the previous one is acknowledged. Every value the simulator needs comes from
    gradswitch.sim.sim_config's writers and the Python defaults (JobConfig, DlcpPolicy); `dlcp` sets the switches'
    features (DlcpSwitch's fields)."""
    nodes = (Node(0, Role.WORKER, sender, ""), Node(1, Role.WORKER, receiver, ""))
    cfg = JobConfig(Algorithm.RING, nodes, iterations=iterations, transport=Mode(mode), mtu=mtu, window=window,
                    rto=0.05, job_id=job_id)
    job: dict[str, Any] = {
        "job_id": job_id, "algo": "write", "check": check, "seed": cfg.seed, "iterations": iterations,
        "nodes": [{"node_id": n.node_id, "role": str(n.role), "host": n.host} for n in nodes],
        "transport": transport_json(cfg), "ps_key_bytes": cfg.ps_key_bytes, "credits": cfg.credits,
        "iteration_timeout_s": cfg.iteration_timeout,
        "reductions": [{"elements": size // 4, "layer_class": layer_class, "droppable": True} for size in sizes],
    }
    if dlcp is not None:
        job["dlcp"] = dlcp_json(DlcpSwitch(**dlcp), DlcpPolicy())
    return job


def run_writes(topo: Topology, jobs: list[dict[str, Any]], out: Path, settings: SimSettings | None = None,
               time_limit_s: float = 60.0) -> dict[str, Any]:
    """Run hand-written jobs; the simulator's results document."""
    config = base_config(topo, settings or SimSettings(), time_limit_s)
    config["jobs"] = jobs
    return simulate(config, out)


def deliveries(result: dict[str, Any], job_id: int) -> list[dict[str, Any]]:
    """When each write of a `write` job was posted and delivered (its receiver's record)."""
    job = next(j for j in result["jobs"] if j["job_id"] == job_id)
    receiver = next(n for n in job["nodes"] if n["node_id"] == 1)
    out: list[dict[str, Any]] = receiver["deliveries"]
    return out


def message_wires(size: int, mtu: int) -> list[int]:
    """Bytes on the wire of each packet of one RDMA WRITE with immediate of `size` bytes (gradswitch/roce/qp.py cuts it
    so)."""
    packets = max(1, -(-size // mtu))
    out = []
    for i in range(packets):
        payload = min(mtu, size - i * mtu)
        wire = ROCE_OVERHEAD + payload
        if i == 0:
            wire += RETH_LEN
        if i == packets - 1:
            wire += IMM_LEN
        out.append(wire)
    return out


def store_and_forward_s(size: int, mtu: int, rate_bps: float, delay_s: float, hops: int = 2) -> float:
    """When the last byte of a WRITE sent at time 0 reaches its receiver across `hops` store-and-forward links of
    one rate, nothing else on them: the sender's link carries every packet; each later link starts a packet
    once it has arrived whole, so the largest packet (the first: its RETH) sets the pace there."""
    wires = message_wires(size, mtu)
    return (sum(wires) + (hops - 1) * max(wires)) * 8 / rate_bps + hops * delay_s


def parsed(result: dict[str, Any], jobs: list[JobConfig]) -> SimResult:
    return parse(result, jobs)
