"""How fast the ns-3 simulator runs, and whether the issue's large runs fit: packet-hops and events per
wall second, wall time, peak memory, for jobs on a k-ary fat tree at 100 Gb/s (every sum checked by digest).

Scenarios (--only NAME,NAME; default: speed):
  speed            ring of 128 workers, 32 MiB, 1 iteration: the packet-hops per wall second figure
  resnet50-256     ResNet-50 training on 256 workers (V100, batch 32, full-size gradients, 2 iterations, no
                   warm-up), ring and NetReduce: each must finish within 10 minutes
  synthetic-256    64 MiB all-reduce on 256 workers, 2 iterations, ring and NetReduce (21 credits): time over
                   the link-rate bound (2(N-1)/N S/B, S/B)
  large-1024       1024 workers, 64 MiB NetReduce and ring, 1 iteration: that such a run completes

Each run is a spec (scenario_spec) run through the package's pipeline on the simulator's graph engine
(gradswitch/experiment/simulated_graph.py simulate_spec: the plan, the job as an execution graph, the simulator):
the spec places the hosts (a ring's ranks along the edge switches) and sets the transport (window, credits, the
smallest RTO) as every spec's run; the plan raises a job's window and NetReduce credits to the path's
bandwidth-delay product where the spec asks fewer (each run's `window` and `credits` are what ran: 21 credits where
the spec asks 16). The speed figures are the simulator's own (its event loop's wall time, events, packet-hops, peak
memory), the graph built and read back by the driver aside.

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

from gradswitch.experiment.simulated_graph import SimulatedRun, simulate_spec
from gradswitch.experiment.spec import Backend, Engine, ExperimentError, ExperimentSpec, Topo
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, engines_field
from gradswitch.sim.build import status
from gradswitch.workload.job import Algorithm, Device, Emulation
from gradswitch.workload.plan import allreduce_bound_s

RESULTS = Path(__file__).parent / "results"
RATE_MBPS = 100_000.0
MTU = 4096
WINDOW = 128  # packets in flight per QP: more than a bandwidth-delay product across the tree at 100 Gb/s
CREDITS = 16  # NetReduce messages in flight, as asked (the plan raises them to the path's: 21)
MIN_RTO_MS = 50.0


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
    window: int  # packets in flight per QP, as the run's job had them
    credits: int  # NetReduce messages in flight per worker, likewise

    def line(self) -> str:
        ratio = f", {max(self.iteration_s) / self.bound_s:.3f}x bound" if self.bound_s and self.iteration_s else ""
        return (f"{self.scenario:<14} {self.algo:<9} N={self.workers:<5} {self.workload:<9} "
                f"{'ok' if self.ok else 'FAILED'} ({self.check}), iteration {max(self.iteration_s or [0]) * 1e3:.3f} ms"
                f"{ratio}; wall {self.wall_s:.1f} s, {self.packet_hops_per_s / 1e6:.2f} M packet-hops/s, "
                f"{self.events_per_s / 1e6:.2f} M events/s, {self.peak_rss_mb:.0f} MB")


def scenario_spec(scenario: str, algo: Algorithm, n: int, workload: str, size: int, iterations: int,
                  ranks: int = 1) -> ExperimentSpec:
    """A scenario's run as a spec: its fat tree at 100 Gb/s on the simulator, its one job (emulated V100s, batch 32,
    full-size gradients, no warm-up for a model; `size` bytes of all-reduce for synthetic), on `ranks` MPI ranks
    (bench.ns3_profile profiles the same; bench.mpi_scaling runs large-1024's over ranks)."""
    spec = ExperimentSpec.of(name=f"{scenario}-{algo}-n{n}", backend=Backend.NS3, topo=Topo.FATTREE, workers=n,
                             bw_mbps=RATE_MBPS, algo=algo, engine=Engine.GRAPH, workload=workload,
                             iterations=iterations, warmup=0, mtu=MTU, window=WINDOW, credits=CREDITS,
                             min_rto_ms=MIN_RTO_MS, ranks=ranks)
    if workload == "synthetic":
        return spec.but(size_bytes=size)
    return spec.but(emulate=Emulation(link_gbps=RATE_MBPS / 1000, device=Device.V100, batch=32))


def slowest_iterations(run: SimulatedRun) -> list[float]:
    """The run's one job, per iteration: its slowest worker's time (s)."""
    nodes = run.result.nodes[run.jobs[0].job_id].values()
    return [max(t) for t in zip(*[[it["time_s"] for it in node["iterations"]] for node in nodes], strict=True)]


def all_correct(run: SimulatedRun) -> bool:
    """The simulator ran to its end and every worker's every iteration of the run's one job was correct."""
    nodes = run.result.nodes[run.jobs[0].job_id].values()
    return run.result.ok() and all(it["correct"] for node in nodes for it in node["iterations"])


def simulate(scenario: str, algo: Algorithm, n: int, workload: str, size: int, iterations: int) -> Run:
    """One run of a scenario on the simulator's graph engine; ExperimentError (one line) when it cannot run."""
    spec = scenario_spec(scenario, algo, n, workload, size, iterations)
    with tempfile.TemporaryDirectory() as tmp:
        run = simulate_spec(spec, Path(tmp), progress=True)  # progress lines on stderr for long runs
    result, job = run.result, run.jobs[0]
    bound = allreduce_bound_s(algo, n, 0, size, RATE_MBPS * 1e6 / 8) if workload == "synthetic" else None
    s = result.speed
    return Run(scenario, str(algo), n, workload, size, iterations,
               all_correct(run), str(result.checks[job.job_id]), slowest_iterations(run), bound, s.wall_s, s.sim_s,
               s.events, s.events_per_s,
               s.packet_hops, s.packet_hops_per_s, s.peak_rss_mb, job.window, job.credits)


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
            try:
                runs.append(simulate(name, algo, n, workload, size, iterations))
            except ExperimentError as e:
                raise SystemExit(f"error: {e}") from None
            print(runs[-1].line(), f"(total {time.monotonic() - started:.1f} s with set-up)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        "format": BENCHMARK_FORMAT, **engines_field([Engine.GRAPH]), "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs",
        "simulator": str(status().binary), "rate_mbps": RATE_MBPS, "mtu": MTU,
        "window": WINDOW, "credits": CREDITS, "min_rto_ms": MIN_RTO_MS,  # as asked; each run's as it ran
        "runs": [asdict(r) for r in runs],
    }
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
