"""How fast the ns-3 simulator runs, and whether the issue's large runs fit: packet-hops and events per
wall second, wall time, peak memory, for jobs on a k-ary fat tree at 100 Gb/s (every sum checked by digest).

Scenarios (--only NAME,NAME; default: speed):
  speed            ring of 128 workers, 32 MiB, 1 iteration: the packet-hops per wall second figure
  resnet50-256     ResNet-50 training on 256 workers (V100, batch 32, full-size gradients, 2 iterations, no
                   warm-up), ring and NetReduce: each must finish within 10 minutes
  synthetic-256    64 MiB all-reduce on 256 workers, 2 iterations, ring and NetReduce (credits 16): time over
                   the link-rate bound (2(N-1)/N S/B, S/B)
  large-1024       1024 workers, 64 MiB NetReduce and ring, 1 iteration: that such a run completes

    python -m bench.ns3_speed [--only speed,resnet50-256] [--out FILE.json]

Needs the built simulator (`make sim`). Writes bench/results/ns3-speed.json unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import DIRECT_SIM_LOOP
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, engines_field
from gradswitch.sim import SimSettings, run
from gradswitch.sim.build import status
from gradswitch.topology.generators import fattree
from gradswitch.topology.model import Topology
from gradswitch.workload.job import Algorithm, Device, Emulation, JobConfig, Node, Role, Training
from gradswitch.workload.plan import allreduce_bound_s

RESULTS = Path(__file__).parent / "results"
RATE_MBPS = 100_000.0
WINDOW = 128  # packets in flight per QP: more than a bandwidth-delay product across the tree at 100 Gb/s
CREDITS = 16  # NetReduce messages in flight: likewise


@dataclass(frozen=True)
class Run:
    scenario: str
    algo: str
    workers: int
    workload: str
    size_bytes: int
    iterations: int
    ok: bool
    check: str
    iteration_s: list[float]
    bound_s: float | None
    wall_s: float
    sim_s: float
    events: int
    events_per_s: float
    packet_hops: int
    packet_hops_per_s: float
    peak_rss_mb: float

    def line(self) -> str:
        ratio = f", {max(self.iteration_s) / self.bound_s:.3f}x bound" if self.bound_s and self.iteration_s else ""
        return (f"{self.scenario:<14} {self.algo:<9} N={self.workers:<5} {self.workload:<9} "
                f"{'ok' if self.ok else 'FAILED'} ({self.check}), iteration {max(self.iteration_s or [0]) * 1e3:.3f} ms"
                f"{ratio}; wall {self.wall_s:.1f} s, {self.packet_hops_per_s / 1e6:.2f} M packet-hops/s, "
                f"{self.events_per_s / 1e6:.2f} M events/s, {self.peak_rss_mb:.0f} MB")


def ring_order(topo: Topology, n: int, algo: Algorithm) -> list[str]:
    """Hosts dealt round robin over the edge switches (gradswitch/experiment/placement.py place); a ring's
    ranks then follow the edge switches (topology-aware)."""
    by_edge = [[h.name for h, _ in topo.hosts_of(s.name)] for s in topo.edge_switches()]
    order = [e[r] for r in range(max(len(e) for e in by_edge)) for e in by_edge if r < len(e)]
    edge_of = {h: i for i, e in enumerate(by_edge) for h in e}
    hosts = order[:n]
    if algo == Algorithm.RING:
        hosts.sort(key=lambda h: (edge_of[h], order.index(h)))
    return hosts


def scenario_job(algo: Algorithm, n: int, workload: str, size: int, iterations: int) -> tuple[Topology, JobConfig]:
    """A scenario's fat tree at 100 Gb/s and its one job (bench.ns3_profile profiles the same)."""
    topo = fattree(n, bw_mbps=RATE_MBPS)
    nodes = tuple(Node(i, Role.WORKER, h, topo.host(h).ip) for i, h in enumerate(ring_order(topo, n, algo)))
    training = None
    if workload != "synthetic":
        training = Training(Emulation(link_gbps=RATE_MBPS / 1000, device=Device.V100, batch=32), dilation=1.0,
                            warmup=0)
    cfg = JobConfig(algo=algo, nodes=nodes, iterations=iterations, workload=workload, size_bytes=size, mtu=4096,
                    window=WINDOW, rto=0.05, credits=CREDITS, training=training)
    return topo, cfg


def simulate(scenario: str, algo: Algorithm, n: int, workload: str, size: int, iterations: int) -> Run:
    topo, cfg = scenario_job(algo, n, workload, size, iterations)
    with tempfile.TemporaryDirectory() as tmp:
        result = run(topo, [cfg], SimSettings(progress_s=30.0), Path(tmp))
    times = [it["time_s"] for node in result.nodes[1].values() for it in node["iterations"]]
    per_iteration = [max(t) for t in zip(*[[it["time_s"] for it in node["iterations"]]
                                           for node in result.nodes[1].values()], strict=True)] if times else []
    bound = allreduce_bound_s(algo, n, 0, size, RATE_MBPS * 1e6 / 8) if workload == "synthetic" else None
    s = result.speed
    return Run(scenario, str(algo), n, workload, size, iterations,
               result.ok() and all(it["correct"] for node in result.nodes[1].values() for it in node["iterations"]),
               str(result.checks[1]), per_iteration, bound, s.wall_s, s.sim_s, s.events, s.events_per_s,
               s.packet_hops, s.packet_hops_per_s, s.peak_rss_mb)


SCENARIOS: dict[str, list[tuple[Algorithm, int, str, int, int]]] = {
    "speed": [(Algorithm.RING, 128, "synthetic", 32 << 20, 1)],
    "resnet50-256": [(Algorithm.RING, 256, "resnet50", 0, 2), (Algorithm.NETREDUCE, 256, "resnet50", 0, 2)],
    "synthetic-256": [(Algorithm.RING, 256, "synthetic", 64 << 20, 2),
                      (Algorithm.NETREDUCE, 256, "synthetic", 64 << 20, 2)],
    "large-1024": [(Algorithm.NETREDUCE, 1024, "synthetic", 64 << 20, 1),
                   (Algorithm.RING, 1024, "synthetic", 64 << 20, 1)],
}


def scenario_names(only: str) -> list[str]:
    """The scenarios an --only names, or an error line naming the unknown ones (bench.ns3_profile takes them too)."""
    names = [s for s in only.split(",") if s]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"error: --only {','.join(unknown)}: not a scenario; give some of {', '.join(SCENARIOS)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ns3_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="speed", help=f"scenarios, comma-separated: {', '.join(SCENARIOS)}")
    parser.add_argument("--out", type=Path, default=RESULTS / "ns3-speed.json", help="where the JSON goes")
    args = parser.parse_args()
    names = scenario_names(args.only)
    missing = status().missing()
    if missing:
        raise SystemExit(f"error: {missing}")
    runs: list[Run] = []
    for name in names:
        for algo, n, workload, size, iterations in SCENARIOS[name]:
            print(f"{name}: {algo} on {n} workers ...", flush=True)
            started = time.monotonic()
            runs.append(simulate(name, algo, n, workload, size, iterations))
            print(runs[-1].line(), f"(total {time.monotonic() - started:.1f} s with set-up)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        "format": BENCHMARK_FORMAT, **engines_field(DIRECT_SIM_LOOP), "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs",
        "simulator": str(status().binary), "rate_mbps": RATE_MBPS, "window": WINDOW, "credits": CREDITS,
        "runs": [asdict(r) for r in runs],
    }
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
