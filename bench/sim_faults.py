"""Faults on the simulator, measured (docs/faults.md, "On the simulator"): per fault, the time to detect and to
recover, the iterations lost and the job's throughput (iterations/s) before, during and after.

A ResNet-50 data-parallel job (ring all-reduce, one emulated V100 per worker, FP32, batch 32, DDP's buckets: the
scaling study's cluster, bench/scaling.py, at a tenth of its link rate, 10 Gb/s, with its layer sizes scaled by
SCALE so a run of many iterations takes seconds of wall time) trains on two fabrics: a 2x2 leaf-spine of 8 workers
and a k = 8 fat tree of 64. Each fault is injected at 0.4 of the run, once per seed (the ECMP hash and the run's
seed: which flows cross the failed element), and each run is measured from its ns-3 results:

- a spine (fat tree: a core switch) crashed for good, and crashed then restarted;
- a leaf-spine (fat tree: an aggregation-core) link down for good, and flapping;
- a worker crashed (its job stops: interrupted, the iterations before it kept);
- a slow worker (its computation x 2 from the fault on).

What rests on assumptions, said plainly: the simulated control plane routes around a dead switch or link after a
fixed delay, the BMv2 controller's measured medians (gradswitch/sim/faults.py SWITCH_DETECT_S, LINK_DETECT_S, from
bench/results/switch-faults.json): "time to detect" on the simulator is that delay, not a measurement. The time to
recover IS measured: from the fault until the last queue pair it stalled made progress again (RC retransmission,
its timer doubling from the job's RTO). A simulated figure does not depend on this machine's load.

Every run is the job's spec run on the simulator's graph engine through the package's pipeline
(gradswitch/experiment/simulated_graph.py simulate_spec: the spec's run plan, its training as an execution graph,
the graph's ranks' iterations and the faults' records as `gradswitch run` reports them); a run's wall_s is that
whole call (the plan, the graph, the simulator and the reading of its output).

    python -m bench.sim_faults [--seeds 3] [--iterations 40] [--fabric leafspine --fabric fattree] [--jobs 1]
                               [--name sim-faults]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import Limits, save, spec_engines
from bench.scaling import base_spec
from gradswitch.experiment.report import busiest_link_load
from gradswitch.experiment.simulated import link_usage
from gradswitch.experiment.simulated_graph import simulate_spec
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec, spec_from_dict, spec_json
from gradswitch.experiment.stats import spread_known as spread
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT
from gradswitch.formats import check_format
from gradswitch.protocol.choice import Choice
from gradswitch.sim.faults import LINK_DETECT_S, SWITCH_DETECT_S, fault_records, phase_throughput
from gradswitch.topology.faults import Fault, parse_fault
from gradswitch.version import code_version

MODEL = "resnet50"
SCALE = 0.05  # fraction of every layer's size kept (computation and gradients alike)
RATE_MBPS = 10_000.0  # every link, the emulated cluster's too (a tenth of the scaling study's 100 Gb/s)
SLOW_FACTOR = 2.0
ASSUMPTION = (f"time to detect is the simulated control plane's fixed delay, the BMv2 controller's measured medians "
              f"(switch {SWITCH_DETECT_S:g} s, link {LINK_DETECT_S:g} s: bench/results/switch-faults.json), not a "
              "measurement; time to recover, iterations lost and throughput are measured in the simulation")


class Fabric(Choice):
    LEAFSPINE = "leafspine"  # 2 leaves x 2 spines, 8 workers
    FATTREE = "fattree"  # k = 8, 64 workers


WORKERS = {Fabric.LEAFSPINE: 8, Fabric.FATTREE: 64}


@dataclass(frozen=True)
class Case:
    """One fault of the study on one fabric."""

    name: str  # spine-crash, spine-crash-restart, link-down, link-flap, worker-crash, slow-worker
    template: str  # the fault's command-line form with {at}, {restart}, {down}, {up} in seconds


CASES = (Case("spine-crash", "switch-crash:{switch}@{at}"),
         Case("spine-crash-restart", "switch-crash:{switch}@{at},restart={restart}"),
         Case("link-down", "link-down:{link}@{at}"),
         Case("link-flap", "link-flap:{link}@{at},down={down},up={up},flaps=2"),
         Case("worker-crash", "worker-crash:1@{at}"),
         Case("slow-worker", f"slow-worker:2@{{at}},factor={SLOW_FACTOR:g}"))

TARGETS = {Fabric.LEAFSPINE: {"switch": "spine1", "link": "leaf1-spine1"},
           Fabric.FATTREE: {"switch": "core0_0", "link": "agg0_0-core0_0"}}


def fabric_spec(fabric: Fabric, iterations: int, seed: int, scale: float = SCALE, min_rto_ms: float | None = None
                ) -> ExperimentSpec:
    """The job on the fabric: the scaling study's cluster, ring, `scale` of ResNet-50, `seed` the ECMP hash;
    `min_rto_ms` the queue pairs' timeout (None: the path's, placement.min_rto)."""
    topo: dict[str, Any] = ({"topo": "leafspine", "leaves": 2, "spines": 2} if fabric == Fabric.LEAFSPINE
                            else {"topo": "fattree", "k": 8})
    base = base_spec(RATE_MBPS).but(workload=MODEL, workers=WORKERS[fabric], iterations=iterations, warmup=0,
                                    name=f"sim-faults-{fabric}")
    rto = {} if min_rto_ms is None else {"min_rto_ms": min_rto_ms}
    return spec_from_dict({"algo": "ring", "scale": scale, "ecmp_seed": seed, "seed": seed, **topo, **rto}, base)


@dataclass(frozen=True)
class Run:
    """One simulated run: the job on its fabric with one fault (none: the clean run) and what it measured."""

    fabric: str
    case: str  # a Case's name, or "clean"
    fault: str  # its label ("" for the clean run)
    seed: int
    workers: int
    iterations: int
    completed: int  # iterations every worker completed
    exact: bool  # every completed iteration's sum checked correct
    iteration_s: float  # median iteration of the run (the slowest worker's end)
    outcome: str | None
    time_to_detect_s: float | None
    time_to_recover_s: float | None
    iterations_lost: int | None
    throughput_before: float | None  # iterations/s
    throughput_during: float | None
    throughput_after: float | None
    lost_packets: int | None
    stalled_qps: int | None
    rto_s: float
    busiest_link_load: float | None
    sim_s: float
    wall_s: float
    limits: dict[str, Any]
    detail: str


def _spans(nodes: dict[int, Any]) -> list[tuple[float, float]]:
    """Each iteration every worker completed (a crashed worker's results are not kept: the others' are):
    (its first worker's start, its last worker's end)."""
    its = [n["iterations"] for n in nodes.values()
           if n["role"] == "worker" and not (n.get("error") or "").startswith("crashed at")]
    count = min(len(w) for w in its) if its else 0
    return [(min(w[i]["start"] for w in its), max(w[i]["end"] for w in its)) for i in range(count)]


def kept_path(spec: ExperimentSpec, out: Path) -> Path:
    """Where the run of `spec` is kept: out-DIGEST.json, DIGEST of the spec as a file keeps it and the engine (the
    graph's: a run kept by the simulator's loops, keyed otherwise, is never read as one)."""
    digest = hashlib.sha256(json.dumps([str(Engine.GRAPH), spec_json(spec)], sort_keys=True).encode()).hexdigest()
    return out.with_name(f"{out.name}-{digest[:12]}.json")


def measure(spec: ExperimentSpec, fabric: Fabric, case: str, fault: Fault | None, out: Path) -> Run:
    """One run of `spec` with `fault` on the simulator's graph engine (the package's pipeline: simulate_spec, the
    run's plan and output under `out`; kept as out-DIGEST.json: found there, not simulated again, while the spec
    did not change)."""
    faults = (fault,) if fault is not None else ()
    spec = spec.but(faults=faults)
    spec.validate()
    kept = kept_path(spec, out)
    if kept.exists():
        raw = check_format(json.loads(kept.read_text()), kept, "kept simulator run", BENCHMARK_FORMAT, missing_is=1)
        return Run(**{k: v for k, v in raw.items() if k != "format"})
    started = time.monotonic()
    try:
        simulated = simulate_spec(spec, out, progress=False)
    except ExperimentError as e:
        raise SystemExit(f"error: {e}") from None
    wall = time.monotonic() - started
    topo, cfgs, result = simulated.network, simulated.jobs, simulated.result
    cfg = cfgs[0]
    nodes = result.nodes[cfg.job_id]
    spans = _spans(nodes)
    exact = all(it["correct"] for n in nodes.values() for it in n["iterations"])
    load = busiest_link_load(link_usage(topo, result))
    limits = Limits.simulated_figures(load)
    times = sorted(e - s for s, e in spans)
    row: dict[str, Any] = {"outcome": None, "time_to_detect_s": None, "time_to_recover_s": None,
                           "iterations_lost": None, "throughput_before": None, "throughput_during": None,
                           "throughput_after": None, "lost_packets": None, "stalled_qps": None, "detail": ""}
    if fault is not None:
        [record] = fault_records(faults, list(result.faults), result.nodes, cfgs, result.speed.sim_s)
        [m] = result.faults
        phases = phase_throughput(spans, record)
        row.update(outcome=str(record.outcome), time_to_detect_s=record.time_to_detect_s,
                   time_to_recover_s=record.time_to_recover_s, iterations_lost=record.iterations_lost,
                   throughput_before=phases.before, throughput_during=phases.during, throughput_after=phases.after,
                   lost_packets=m.lost_packets, stalled_qps=m.stalled_qps, detail=record.detail)
    run = Run(fabric=str(fabric), case=case, fault=fault.label if fault is not None else "",
              seed=spec.network.ecmp_seed,
              workers=len(cfg.workers), iterations=cfg.iterations, completed=len(spans), exact=exact,
              iteration_s=statistics.median(times) if times else float("nan"), rto_s=cfg.rto,
              busiest_link_load=load, sim_s=result.speed.sim_s, wall_s=wall, limits=limits, **row)
    kept.write_text(json.dumps({"format": BENCHMARK_FORMAT, **asdict(run)}, indent=1) + "\n")
    return run


def case_fault(case: Case, fabric: Fabric, iteration_s: float, iterations: int, rto_s: float) -> Fault:
    """The case's fault at 0.4 of a run whose clean iteration takes iteration_s. A restart comes 3 RTOs after the
    crash, a flap's windows last 1.5 RTOs each (longer than the link's detection delay: each is noticed): the
    queue pairs' timers, not the iteration, set how long a fault's effects last."""
    def s(x: float) -> str:
        return f"{x:.4g}"

    at = iteration_s * iterations * 0.4
    return parse_fault(case.template.format(at=s(at), restart=s(3 * rto_s), down=s(1.5 * rto_s),
                                            up=s(1.5 * rto_s), **TARGETS[fabric]))


def run_length(iteration_s: float, rto_s: float, iterations: int) -> int:
    """At least `iterations`, and enough that the run lasts 16 RTOs: 0.4 of it before the fault, the rest holds a
    restart or two flaps (6 RTOs) and the recovery after them."""
    return max(iterations, math.ceil(16 * rto_s / iteration_s))


def study(fabrics: Sequence[Fabric], seeds: Sequence[int], iterations: int, out: Path, scale: float = SCALE,
          cases: Sequence[Case] = CASES, jobs: int = 1, min_rto_ms: float | None = None) -> dict[str, Any]:
    """Every case on every fabric for every seed, with the clean run each fault is timed from; the figures'
    medians and spreads per fabric and case. A short clean probe gives the iteration the run's length is set from
    (run_length). jobs: how many of a seed's fault runs are simulated at once (each is one simulator process; the
    simulated figures are the same, only each run's wall_s counts a shared machine: the published study runs one
    at a time). min_rto_ms: the queue pairs' timeout (None, the published study: the path's); every fault's times
    and the run's length are in RTOs, so a smaller one shortens the runs in proportion (its test's)."""
    if jobs < 1:
        raise ValueError(f"jobs = {jobs}: give 1 (one run at a time) or more")
    version = code_version()  # the code the runs start from (an edit while they run does not change them)
    runs: list[Run] = []
    lengths: dict[str, int] = {}
    for fabric in fabrics:
        probe = measure(fabric_spec(fabric, 3, seeds[0], scale, min_rto_ms), fabric, "probe", None,
                        out / f"{fabric}-probe")
        n = run_length(probe.iteration_s, probe.rto_s, iterations)
        lengths[str(fabric)] = n
        for seed in seeds:
            spec = fabric_spec(fabric, n, seed, scale, min_rto_ms)
            clean = measure(spec, fabric, "clean", None, out / f"{fabric}-clean-s{seed}")
            print(f"ns-3 {fabric} seed {seed}: {n} iterations, clean iteration {clean.iteration_s * 1e3:.2f} ms, "
                  f"RTO {clean.rto_s * 1e3:.0f} ms, {'exact' if clean.exact else 'NOT EXACT'}, "
                  f"wall {clean.wall_s:.0f} s", flush=True)
            runs.append(clean)
            with ThreadPoolExecutor(max_workers=jobs) as pool:  # each run waits on its own simulator process
                runs.extend(pool.map(partial(faulted, spec, fabric, seed, clean, out), cases))
    return {"model": MODEL, "scale": scale, "algo": "ring", "rate_mbps": RATE_MBPS, "min_rto_ms": min_rto_ms,
            "iterations": lengths, "seeds": list(seeds), "slow_factor": SLOW_FACTOR,
            "switch_detect_s": SWITCH_DETECT_S, "link_detect_s": LINK_DETECT_S, "assumption": ASSUMPTION,
            "code_version": version, "limits": runs[0].limits if runs else {},
            "runs": [asdict(r) for r in runs], "summary": summarize(runs)}


def faulted(spec: ExperimentSpec, fabric: Fabric, seed: int, clean: Run, out: Path, case: Case) -> Run:
    """The case's fault on the clean run's job (`spec`, its `clean` run), measured and kept in `out`."""
    fault = case_fault(case, fabric, clean.iteration_s, clean.iterations, clean.rto_s)
    r = measure(spec, fabric, case.name, fault, out / f"{fabric}-{case.name}-s{seed}")
    print(f"  {fault.label}: {r.outcome}, detect {_ms(r.time_to_detect_s)}, recover "
          f"{_ms(r.time_to_recover_s)}, lost {r.iterations_lost}, it/s {_f(r.throughput_before)} / "
          f"{_f(r.throughput_during)} / {_f(r.throughput_after)}, {r.completed}/{r.iterations} "
          f"{'exact' if r.exact else 'NOT EXACT'}, wall {r.wall_s:.0f} s", flush=True)
    return r


def summarize(runs: Sequence[Run]) -> dict[str, dict[str, Any]]:
    """Per `fabric/case`: each figure's median [min, max] over the seeds, the outcomes, the ratios to the clean
    run's throughput and what the ratios are bounded by."""
    out: dict[str, dict[str, Any]] = {}
    for key in dict.fromkeys(f"{r.fabric}/{r.case}" for r in runs if r.case != "clean"):
        fabric, case = key.split("/")
        group = [r for r in runs if (r.fabric, r.case) == (fabric, case)]
        clean = {r.seed: r for r in runs if (r.fabric, r.case) == (fabric, "clean")}

        def ratio(r: Run, value: float | None, clean: dict[int, Run] = clean) -> float | None:
            """A throughput over the clean run's of the same seed (1 / its median iteration)."""
            c = clean[r.seed]
            return value * c.iteration_s if value is not None and c.iteration_s > 0 else None

        out[key] = {"fabric": fabric, "case": case, "faults": sorted({r.fault for r in group}),
                    "outcomes": sorted({str(r.outcome) for r in group}),
                    "exact": sum(r.exact for r in group), "runs": len(group),
                    "time_to_detect_s": spread([r.time_to_detect_s for r in group]),
                    "time_to_recover_s": spread([r.time_to_recover_s for r in group]),
                    "recover_over_rto": spread([r.time_to_recover_s / r.rto_s if r.time_to_recover_s is not None
                                                else None for r in group]),
                    "iterations_lost": spread([r.iterations_lost for r in group]),
                    "throughput_before": spread([r.throughput_before for r in group]),
                    "throughput_during": spread([r.throughput_during for r in group]),
                    "throughput_after": spread([r.throughput_after for r in group]),
                    "during_over_clean": spread([ratio(r, r.throughput_during) for r in group]),
                    "after_over_clean": spread([ratio(r, r.throughput_after) for r in group]),
                    "lost_packets": spread([r.lost_packets for r in group]),
                    "completed": spread([r.completed for r in group]),
                    "rto_s": group[0].rto_s, "workers": group[0].workers,
                    "clean_iteration_s": spread([c.iteration_s for c in clean.values()])}
    return out


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.0f} ms"


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def plot(data: dict[str, Any], path: Path) -> None:
    """Throughput before, during and after each fault (medians over the seeds, bars; the spread as whiskers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fabrics = list(dict.fromkeys(s["fabric"] for s in data["summary"].values()))
    fig, axes = plt.subplots(1, len(fabrics), figsize=(6 * len(fabrics), 4), squeeze=False)
    for ax, fabric in zip(axes[0], fabrics, strict=True):
        rows = [s for s in data["summary"].values() if s["fabric"] == fabric]
        for j, phase in enumerate(("before", "during", "after")):
            xs, ys, lo, hi = [], [], [], []
            for i, s in enumerate(rows):
                v = s[f"throughput_{phase}"]
                if v is None:
                    continue
                xs.append(i + (j - 1) * 0.27)
                ys.append(v["median"])
                lo.append(v["median"] - v["min"])
                hi.append(v["max"] - v["median"])
            ax.bar(xs, ys, width=0.27, yerr=[lo, hi], label=phase, capsize=2)
        ax.set_xticks(range(len(rows)), [s["case"] for s in rows], rotation=30, ha="right")
        ax.set_ylabel("iterations/s (simulated)")
        ax.set_title(f"{fabric}: {rows[0]['workers']} workers, {data['model']} x{data['scale']:g}, ring")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="ECMP (and run) seeds 0..N-1 (default 3)")
    parser.add_argument("--iterations", type=int, default=40, help="iterations per run (default 40)")
    parser.add_argument("--fabric", action="append", choices=[str(f) for f in Fabric],
                        help="leafspine, fattree (default both)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gradswitch-sim-faults"),
                        help="where the simulator's runs are kept")
    parser.add_argument("--jobs", type=int, default=1,
                        help="a seed's fault runs simulated at once (default 1: each run's wall_s its own)")
    parser.add_argument("--name", default="sim-faults", help="bench/results/NAME.json and NAME.png")
    args = parser.parse_args()
    fabrics = [Fabric(f) for f in args.fabric] if args.fabric else list(Fabric)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 (one run at a time) or more")
    data = study(fabrics, range(args.seeds), args.iterations, args.out, jobs=args.jobs)
    # every run went through simulate_spec: the graph engine (the spec's default)
    path = save(args.name, data, engines=spec_engines([fabric_spec(fabrics[0], args.iterations, 0)]))
    plot(data, path.with_suffix(".png"))
    print(f"{path}: {ASSUMPTION}")


if __name__ == "__main__":
    main()
