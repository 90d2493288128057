"""The simulator over MPI ranks: wall time and peak memory per rank of a 1024-worker run on 1
and 2 ranks of this machine (2 ranks with the barrier and with null messages), whether they give the same
answer, and the scaling projected from the partition sizes and the lookahead.

The run: NetReduce (or ring) over 1024 workers on a k=16 fat tree at 100 Gb/s, 64 MiB, one iteration, every
sum checked by digest (bench.ns3_speed's large-1024: its spec, scenario_spec, with `ranks`), on the simulator's graph
engine through the package's pipeline (gradswitch/experiment/simulated_graph.py simulate_spec: the plan, the job as
an execution graph, the simulator over the spec's MPI ranks). On R ranks the fat tree is cut by pod
(gradswitch.sim.ranks). Every rank count must give the same answer: the same iteration, and every worker's
iteration (start, end, check) the one-rank run's (`same_answer`; the benchmark says so and exits 1 when not).

Projection (a model, not a measurement; the JSON says so). ns-3's barrier synchronisation runs window after
window of one lookahead (the cut links' delay) of simulated time; a rank simulates the events of its own nodes
and sends every packet that crosses to another rank as an MPI message, so

    wall(R) = wall(1) x share(R) + windows x allgather(2) x log2(R) + cut(R) x per_message

share(R): the busiest rank's share of the packet deliveries and cut(R): its packets over cut links (both from
the one-rank run's port counters, for the partition gradswitch.sim.ranks makes for R ranks); windows = simulated
time / lookahead (at most that many); allgather(2): one MPI_Allgather between the 2 ranks, timed by the
simulator before its run (log2(R) rounds for R); per_message: what the 2-rank run spent beyond its busiest
rank's share and its windows, per packet it sent or received over a cut link. Memory: every rank builds the
whole topology and its own nodes (set-up, measured per rank on 2 ranks, taken as is for more) and holds its
share of the traffic while it runs: peak(R) = set-up(2) + (peak(2) - set-up(2)) x share(R) / share(2).

`total_s` is the whole run through the pipeline: the plan and graph, the configuration, mpirun, the simulator's
set-up and run, its results read back as the workers' iterations.

    python -m bench.mpi_scaling [--algo netreduce|ring] [--workers 1024] [--size 64MiB] [--out FILE.json]

Needs both builds (`make sim`, `python -m gradswitch.sim.build --mpi`) and mpirun. Writes
bench/results/mpi-scaling.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.ns3_speed import CREDITS, MIN_RTO_MS, MTU, RATE_MBPS, WINDOW, all_correct, scenario_spec, slowest_iterations
from gradswitch.cli.main import parse_size
from gradswitch.experiment.simulated_graph import SimulatedRun, simulate_spec
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, engines_field
from gradswitch.sim import SimResult
from gradswitch.sim.build import status
from gradswitch.sim.ranks import MpiSync, partition
from gradswitch.topology.model import Topology
from gradswitch.workload.job import Algorithm, JobConfig

RESULTS = Path(__file__).parent / "results"
SIZE = 64 << 20
PROJECTED_RANKS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class Measured:
    ranks: int
    sync: str  # barrier or null-message (one rank: none)
    wall_s: float  # the simulator's own wall time (its set-up excluded)
    total_s: float  # the whole run as gradswitch starts it: configuration, mpirun, set-up, gathering
    sim_s: float
    iteration_s: list[float]
    check: str
    correct: bool
    events: int
    packet_hops: int
    peak_rss_mb_per_rank: list[float]
    setup_rss_mb_per_rank: list[float]
    wall_s_per_rank: list[float]
    events_per_rank: list[int]
    cut_links: int
    cut_tx_packets: int
    lookahead_s: float | None


@dataclass(frozen=True)
class Projected:
    ranks: int
    busiest_share: float  # of the packet deliveries, on the busiest rank
    cut_links: int
    cut_packets: int  # the most packets one rank sends and receives over cut links
    wall_s: float
    speedup: float
    peak_rss_mb_per_rank: float


def run_spec(algo: Algorithm, workers: int, size: int = SIZE) -> ExperimentSpec:
    """The run's spec on one rank (bench.ns3_speed's large-1024 scenario's, at `workers` and `size` bytes)."""
    return scenario_spec("mpi-scaling", algo, workers, "synthetic", size, 1)


def measure(spec: ExperimentSpec, ranks: int, sync: MpiSync) -> tuple[Measured, SimulatedRun]:
    """The spec run on `ranks` MPI ranks kept in step by `sync`; ExperimentError (one line) when it cannot run."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        run = simulate_spec(spec.but(ranks=ranks), Path(tmp), progress=True, sync=sync)
        total = time.monotonic() - started
    result, cfg = run.result, run.jobs[0]
    per_iteration, correct = slowest_iterations(run), all_correct(run)
    s = result.speed
    m = result.mpi
    return Measured(ranks, str(sync) if ranks > 1 else "none", s.wall_s, total, s.sim_s, per_iteration,
                    str(result.checks[cfg.job_id]), correct, s.events,
                    s.packet_hops,
                    [r.peak_rss_mb for r in m.per_rank] if m else [s.peak_rss_mb],
                    [r.setup_rss_mb for r in m.per_rank] if m else [float(result.raw["setup_rss_mb"])],
                    [r.wall_s for r in m.per_rank] if m else [s.wall_s],
                    [r.events for r in m.per_rank] if m else [s.events],
                    m.cut_links if m else 0, sum(r.cut_tx_packets for r in m.per_rank) if m else 0,
                    m.lookahead_s if m else None), run


def iterations_of(run: SimulatedRun) -> dict[int, list[tuple[float, float, float, bool]]]:
    """Every worker's iterations as the run reports them: (start, end, time, correct) each."""
    job = run.jobs[0].job_id
    return {node_id: [(it["start"], it["end"], it["time_s"], it["correct"]) for it in node["iterations"]]
            for node_id, node in run.result.nodes[job].items()}


def deliveries(result: SimResult) -> dict[str, int]:
    """Packets delivered to each node (what costs a rank its events): a switch's received packets on every port,
    a host's received packets."""
    out = {name: sum(ports[0] for ports in sw["ports"].values()) for name, sw in result.switches.items()}
    for job in result.nodes.values():
        for node in job.values():
            out[node["host"]] = out.get(node["host"], 0) + int(node["stats"]["rx_packets"])
    return out


def link_packets(topo: Topology, result: SimResult) -> list[tuple[str, str, int]]:
    """Every switch-to-switch link with the packets it carried both ways (hosts stay with their edge switch:
    their links are never cut)."""
    out = []
    for lk in topo.links:
        if topo.is_switch(lk.a) and topo.is_switch(lk.b):
            a, b = result.switches[lk.a]["ports"][lk.a_port], result.switches[lk.b]["ports"][lk.b_port]
            out.append((lk.a, lk.b, int(a[1]) + int(b[1])))  # what each end transmitted
    return out


@dataclass(frozen=True)
class Load:
    share: float  # the busiest rank's share of the packet deliveries
    cut_packets: int  # the most packets one rank sends and receives over cut links
    cut_links: int


def load(topo: Topology, cfg: JobConfig, result: SimResult, ranks: int) -> Load:
    if ranks == 1:
        return Load(1.0, 0, 0)
    p = partition(topo, [cfg], ranks)
    per_node = deliveries(result)
    total = sum(per_node.values())
    shares = [sum(per_node.get(n, 0) for n in p.nodes_of(r)) / total for r in range(ranks)]
    cut = [0] * ranks
    for a, b, packets in link_packets(topo, result):
        if p.rank_of[a] != p.rank_of[b]:
            cut[p.rank_of[a]] += packets
            cut[p.rank_of[b]] += packets
    return Load(max(shares), max(cut), p.cut_links(topo))


def project(topo: Topology, cfg: JobConfig, one: Measured, two: Measured, two_result: SimResult,
            one_result: SimResult, link_delay_s: float) -> tuple[list[Projected], dict[str, float]]:
    assert two_result.mpi is not None
    windows = one.sim_s / (two.lookahead_s or link_delay_s)
    allgather_s = sum(r.allgather_us for r in two_result.mpi.per_rank) / 2 * 1e-6
    load2 = load(topo, cfg, one_result, 2)
    measured_cut = max(r.cut_tx_packets + r.cut_rx_packets for r in two_result.mpi.per_rank)
    per_message = max(0.0, two.wall_s - one.wall_s * load2.share - windows * allgather_s) / max(1, measured_cut)
    busiest = max(range(2), key=lambda r: two.peak_rss_mb_per_rank[r])
    setup2, peak2 = two.setup_rss_mb_per_rank[busiest], two.peak_rss_mb_per_rank[busiest]
    out = []
    for ranks in PROJECTED_RANKS:
        if ranks > len(partition(topo, [cfg], 1).pieces):
            break
        at = load(topo, cfg, one_result, ranks)
        wall = one.wall_s * at.share + windows * allgather_s * math.log2(ranks) + at.cut_packets * per_message
        memory = one.peak_rss_mb_per_rank[0] if ranks == 1 else setup2 + (peak2 - setup2) * at.share / load2.share
        out.append(Projected(ranks, at.share, at.cut_links, at.cut_packets, wall, one.wall_s / wall, memory))
    fitted = {"windows": windows, "allgather_us": allgather_s * 1e6, "per_message_us": per_message * 1e6,
              "cut_packets_2_ranks_model": load2.cut_packets, "cut_packets_2_ranks_measured": measured_cut}
    return out, fitted


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mpi_scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--algo", type=Algorithm, choices=[Algorithm.NETREDUCE, Algorithm.RING],
                        default=Algorithm.NETREDUCE)
    parser.add_argument("--workers", type=int, default=1024)
    parser.add_argument("--size", type=parse_size, default=SIZE, help="bytes of the all-reduce (default 64MiB)")
    parser.add_argument("--out", type=Path, default=RESULTS / "mpi-scaling.json", help="where the JSON goes")
    args = parser.parse_args()
    for mpi in (False, True):
        missing = status(mpi).missing()
        if missing:
            raise SystemExit(f"error: {missing}")
    spec = run_spec(args.algo, args.workers, args.size)
    link_delay_s = spec.network.sim.link_delay_us * 1e-6
    runs: list[Measured] = []
    simulated: list[SimulatedRun] = []
    for ranks, sync in ((1, MpiSync.BARRIER), (2, MpiSync.BARRIER), (2, MpiSync.NULL_MESSAGE)):
        print(f"{args.algo} on {args.workers} workers, {ranks} rank(s){f' ({sync})' if ranks > 1 else ''} ...",
              flush=True)
        try:
            measured, run = measure(spec, ranks, sync)
        except ExperimentError as e:
            raise SystemExit(f"error: {e}") from None
        runs.append(measured)
        simulated.append(run)
        print(f"  wall {measured.wall_s:.1f} s (total {measured.total_s:.1f} s), peak memory per rank "
              f"{', '.join(f'{m:.0f}' for m in measured.peak_rss_mb_per_rank)} MB, iteration "
              f"{measured.iteration_s[0] * 1e3:.4f} ms, {measured.check} {'ok' if measured.correct else 'WRONG'}",
              flush=True)
    one, two = runs[0], runs[1]
    topo, cfg = simulated[0].network, simulated[0].jobs[0]
    results = [r.result for r in simulated]
    same = [[abs(b - a) / a for a, b in zip(one.iteration_s, r.iteration_s, strict=True)] for r in runs[1:]]
    identical_iterations = [iterations_of(simulated[0]) == iterations_of(r) for r in simulated[1:]]
    projected, fitted = project(topo, cfg, one, two, results[1], results[0], link_delay_s)
    for p in projected:
        print(f"  projected {p.ranks:>2} ranks: busiest rank {p.busiest_share:.1%} of the deliveries and "
              f"{p.cut_packets} cut-link packets ({p.cut_links} cut links), wall {p.wall_s:.1f} s "
              f"({p.speedup:.2f}x), {p.peak_rss_mb_per_rank:.0f} MB per rank")
    document: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs",
        "run": {"algo": str(args.algo), "workers": args.workers, "topology": f"fattree k={topo.params['k']}",
                "rate_mbps": RATE_MBPS, "size_bytes": args.size, "iterations": 1, "mtu": MTU,
                "window": cfg.window, "credits": cfg.credits, "window_asked": WINDOW, "credits_asked": CREDITS,
                "min_rto_ms": MIN_RTO_MS, "link_delay_s": link_delay_s},
        "measured": [asdict(r) for r in runs],
        "same_answer": {"iteration_relative_difference": same, "all_correct": all(r.correct for r in runs),
                        "identical_results": [results[0].raw["jobs"] == r.raw["jobs"] for r in results[1:]],
                        "identical_iterations": identical_iterations},
        "projection_model": ("wall(R) = wall(1) x share(R) + (sim_s / lookahead) x allgather(2) x log2(R) + "
                             "cut(R) x per_message; peak memory per rank = set-up(2) + (peak(2) - set-up(2)) x "
                             "share(R) / share(2); share and cut from the one-rank run's port counters, allgather, "
                             "per_message, set-up and peak from the 2-rank run of this machine (module docstring)"),
        "fitted": fitted,
        "projected": [asdict(p) for p in projected],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"format": BENCHMARK_FORMAT, **engines_field([Engine.GRAPH]),
                                          **document}, indent=1) + "\n")
    print(f"wrote {args.out}")
    problems = [f"{r.ranks} ranks ({r.sync}): the workers' iterations differ from one rank's"
                for r, same_run in zip(runs[1:], identical_iterations, strict=True) if not same_run]
    problems += [f"{r.ranks} rank(s) ({r.sync}): a sum not what it should be" for r in runs if not r.correct]
    if problems:
        raise SystemExit(f"error: not the same answer on every rank count: {'; '.join(problems)} (`same_answer` "
                         f"in {args.out})")


if __name__ == "__main__":
    main()
