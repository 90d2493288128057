"""The goodput study: a 1,024-worker training job over a long run (30 days) that meets failures drawn from
published rates, surviving them by checkpoint restart or by recovery in place; the effective throughput
(goodput: the share of the wall time that went into training kept at the end) of each.

1. ns-3 (bench/goodput_fabric.py): the job's iteration (ResNet-50, 1,024 emulated V100s, a topology-aware ring on
   a k = 16 fat tree at 100 Gb/s, as the scaling study runs it) with the fabric intact and with one element of
   each class gone (an edge-aggregation link, an aggregation-core link, an aggregation switch, a core switch):
   what recovery in place runs at until the element is repaired.
2. Failures (gradswitch/workload/failure_schedule.py): drawn per seed from the Llama 3 paper's rates (per GPU-hour, and
   its network failures spread over this fat tree's switches and links), a switch or link repaired after
   --repair-h hours.
3. Goodput (gradswitch/workload/goodput.py) of each seed's run with each strategy: mean and spread over the seeds; the
   checkpoint interval swept against Young/Daly's sqrt(2 x write x MTBF); the restart cost and the failure
   rate varied.

Defaults, every one an option:
- checkpoint write 30 s: Huawei MindCluster's resumable-training guide ("Performance Description": a
  3B-parameter model's checkpoint is flushed in about 30 s); ResNet-50's state is ~100x smaller, so this is
  the cost of a larger model's job.
- restart 600 s: rescheduling, 1,024 ranks' communicators and the checkpoint loaded (an assumption; swept
  from 150 s, FlashRecovery's restoration of 4,800 devices, arXiv:2509.03047, to 1,800 s).
- rejoin 40 s: a spare replacing a failed worker in place (DeadPool, arXiv:2607.01646: hot-swap recovery
  under 40 s on up to 512 A100s).
- reroute 1 s: a failed switch or link noticed and routed around (an assumption: the controller notices it by
  its P4Runtime stream or port state and pushes the new routes, which the BMv2 testbed does in well under a
  second on a small fabric; the ring's RC transport resends what was lost).
- repair 4 h: a failed switch or cable replaced (an assumption).
- checkpoint interval: Young/Daly's optimum for the job's MTBF and the write cost.

    python -m bench.goodput [--workers 1024] [--days 30] [--seeds 10] [--out runs/bench-goodput]
                            [--write-s 30] [--restart-s 600] [--rejoin-s 40] [--reroute-s 1] [--repair-h 4]
                            [--sweep-days 365] [--measured-only] [--name goodput]

Writes bench/results/goodput.json and goodput.png. The ns-3 runs are kept under --out (resumable).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.common import RESULTS, Limits, save
from bench.goodput_fabric import ALGO, BATCH, MODEL, FabricRun, measure_all
from bench.scaling import scaling_spec
from gradswitch.experiment.placement import place, topology_for
from gradswitch.topology.faults import Fault, FaultKind
from gradswitch.topology.model import Topology
from gradswitch.version import code_version
from gradswitch.workload.failure_schedule import (
    DEFAULT_REPAIR_S,
    HOUR_S,
    FailureRates,
    FailureSchedule,
    draw_schedule,
    element_class,
)
from gradswitch.workload.goodput import (
    CheckpointRestart,
    FabricCosts,
    Goodput,
    InPlace,
    Strategy,
    goodput,
    young_daly_interval_s,
)

WORKERS = 1024
DAYS = 30.0
SEEDS = 10
WRITE_S = 30.0
RESTART_S = 600.0
REJOIN_S = 40.0
REROUTE_S = 1.0
RESTART_SWEEP_S = (150.0, 600.0, 1800.0)
RATE_SCALES = (1.0, 4.0, 16.0)  # the Llama 3 rates times these: more failure-prone hardware, or a longer job
SWEEP_DAYS = 365.0  # the interval sweep's runs: a year, so that its mean is over ~180 failures per seed
INTERVAL_STEPS = [2 ** (i / 2) for i in range(-6, 7)]  # x Young/Daly's interval: 1/8 .. 8 in steps of sqrt(2)


@dataclass(frozen=True)
class Spread:
    mean: float
    stdev: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0,
                   min(values), max(values))


def fabric_costs(topo: Topology, runs: list[FabricRun]) -> tuple[FabricCosts, dict[str, str]]:
    """The iteration intact and per element class from the ns-3 runs; a class not measured (its run missing)
    takes the largest measured slowdown, and says so."""
    intact = next(r for r in runs if r.element == "intact")
    degraded: dict[str, float] = {}
    how: dict[str, str] = {}
    for r in runs:
        if r.element == "intact":
            continue
        kind = FaultKind.SWITCH_CRASH if r.element == "switch" else FaultKind.LINK_DOWN
        cls = element_class(topo, Fault(kind, r.removed, 0.0))
        degraded[cls] = r.iteration_s
        how[cls] = f"measured on ns-3 without {r.removed}"
    for cls in ("link:edge-agg", "link:agg-core", "switch:agg", "switch:core"):
        if cls not in degraded:
            degraded[cls] = max(degraded.values(), default=intact.iteration_s)
            how[cls] = "not measured: the largest measured slowdown"
    return FabricCosts(intact.iteration_s, degraded), how


def runs_of(schedules: list[FailureSchedule], topo: Topology, hosts: list[str], costs: FabricCosts,
            strategy: Strategy) -> list[Goodput]:
    return [goodput(s, topo, hosts, costs, strategy) for s in schedules]


def summary(results: list[Goodput]) -> dict[str, Any]:
    return {"goodput": asdict(Spread.of([r.goodput for r in results])),
            "failures": asdict(Spread.of([float(r.failures) for r in results])),
            "lost_h": statistics.mean(r.lost_s for r in results) / HOUR_S,
            "down_h": statistics.mean(r.down_s for r in results) / HOUR_S,
            "checkpoint_h": statistics.mean(r.checkpoint_s for r in results) / HOUR_S,
            "degraded_h": statistics.mean(r.degraded_s for r in results) / HOUR_S}


def study(topo: Topology, hosts: list[str], costs: FabricCosts, rates: FailureRates, args: argparse.Namespace
          ) -> dict[str, Any]:
    workers = len(hosts)
    hours = args.days * 24

    def schedules(r: FailureRates) -> list[FailureSchedule]:
        return [draw_schedule(r, topo, workers, hours, seed, args.repair_h * HOUR_S) for seed in range(args.seeds)]

    base = schedules(rates)
    mtbf_s = HOUR_S / rates.job_per_hour(topo, workers)
    young = young_daly_interval_s(args.write_s, mtbf_s)
    in_place = InPlace(args.rejoin_s, args.reroute_s)
    checkpoint = CheckpointRestart(young, args.write_s, args.restart_s)
    ck, ip = runs_of(base, topo, hosts, costs, checkpoint), runs_of(base, topo, hosts, costs, in_place)
    ratios = [b.goodput / a.goodput for a, b in zip(ck, ip, strict=True)]

    def mean_goodput(strategy: Strategy, r: list[FailureSchedule]) -> float:
        return statistics.mean(g.goodput for g in runs_of(r, topo, hosts, costs, strategy))

    long = [draw_schedule(rates, topo, workers, args.sweep_days * 24, seed, args.repair_h * HOUR_S)
            for seed in range(args.seeds)]
    sweep = [{"interval_s": young * step, "of_young": step,
              "goodput": mean_goodput(replace(checkpoint, interval_s=young * step), long)} for step in INTERVAL_STEPS]
    best = max(sweep, key=lambda p: p["goodput"])
    restart_rows = [{"restart_s": r, "checkpoint_restart": mean_goodput(replace(checkpoint, restart_s=r), base),
                     "in_place": mean_goodput(in_place, base)} for r in RESTART_SWEEP_S]
    rate_rows = []
    for scale in RATE_SCALES:
        scaled = FailureRates(rates.per_gpu_hour * scale, rates.per_switch_hour * scale, rates.per_link_hour * scale,
                              f"{rates.source}; x {scale:g}")
        mtbf = HOUR_S / scaled.job_per_hour(topo, workers)
        tau = young_daly_interval_s(args.write_s, mtbf)
        r = schedules(scaled)
        rate_rows.append({"rate_scale": scale, "job_mtbf_h": mtbf / HOUR_S, "young_interval_s": tau,
                          "checkpoint_restart": mean_goodput(replace(checkpoint, interval_s=tau), r),
                          "in_place": mean_goodput(in_place, r)})
    return {"hours": hours, "seeds": args.seeds, "job_mtbf_h": mtbf_s / HOUR_S,
            "expected_failures": hours * HOUR_S / mtbf_s,
            "young_daly_interval_s": young,
            "strategies": {"checkpoint_restart": {**asdict(checkpoint), **summary(ck)},
                           "in_place": {**asdict(in_place), **summary(ip)}},
            "in_place_over_checkpoint_restart": asdict(Spread.of(ratios)),
            "per_seed": [{"seed": s.seed, "counts": {str(k): v for k, v in s.counts().items()},
                          "checkpoint_restart": a.to_dict(), "in_place": b.to_dict()}
                         for s, a, b in zip(base, ck, ip, strict=True)],
            "sweep_hours": args.sweep_days * 24, "interval_sweep": sweep, "sweep_best_interval_s": best["interval_s"],
            "sweep_best_over_young": best["of_young"], "restart_sweep": restart_rows, "rate_sweep": rate_rows}


def plot(document: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = document["study"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [p["interval_s"] / 60 for p in s["interval_sweep"]]
    left.plot(xs, [p["goodput"] for p in s["interval_sweep"]], marker="o", color="tab:blue",
              label="checkpoint restart (mean of seeds)")
    left.axvline(s["young_daly_interval_s"] / 60, color="black", ls=":", label="Young/Daly sqrt(2 x write x MTBF)")
    left.axhline(s["strategies"]["in_place"]["goodput"]["mean"], color="tab:green", ls="--", label="recovery in place")
    left.set_xscale("log")
    left.set_xlabel("checkpoint interval, minutes")
    left.set_ylabel("goodput")
    left.set_title(f"{document['workers']} workers, runs of {s['sweep_hours'] / 24:g} days, {s['seeds']} seeds",
                   fontsize=9)
    left.legend(fontsize=7)
    scales = [r["rate_scale"] for r in s["rate_sweep"]]
    right.plot(scales, [r["checkpoint_restart"] for r in s["rate_sweep"]], marker="o", color="tab:blue",
               label="checkpoint restart (Young/Daly interval)")
    right.plot(scales, [r["in_place"] for r in s["rate_sweep"]], marker="o", color="tab:green",
               label="recovery in place")
    right.set_xscale("log")
    right.set_xlabel("failure rates x (1: Llama 3's)")
    right.set_ylabel("goodput")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def positive(what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} = {text!r}: a number of seconds or hours") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{what} = {text}: above 0")
        return value
    return parse


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.goodput", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=WORKERS, help="workers of the job (a fat tree holds them)")
    parser.add_argument("--days", type=positive("--days"), default=DAYS, help="the run's length")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="failure schedules drawn (seeds 0..N-1)")
    parser.add_argument("--sweep-days", type=positive("--sweep-days"), default=SWEEP_DAYS,
                        help="the length of the runs the checkpoint interval sweep averages (more failures)")
    parser.add_argument("--write-s", type=positive("--write-s"), default=WRITE_S, help="a checkpoint's write cost")
    parser.add_argument("--restart-s", type=positive("--restart-s"), default=RESTART_S, help="a restart's cost")
    parser.add_argument("--rejoin-s", type=positive("--rejoin-s"), default=REJOIN_S, help="a spare's joining cost")
    parser.add_argument("--reroute-s", type=positive("--reroute-s"), default=REROUTE_S, help="a reroute's cost")
    parser.add_argument("--repair-h", type=positive("--repair-h"), default=DEFAULT_REPAIR_S / HOUR_S,
                        help="hours until a failed switch or link is back")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-goodput"), help="where the ns-3 runs are kept")
    parser.add_argument("--name", default="goodput", help="bench/results/NAME.json and NAME.png")
    parser.add_argument("--measured-only", action="store_true",
                        help="use the ns-3 runs kept under --out, simulate none (a class not measured takes the "
                             "largest measured slowdown, and the JSON says so)")
    args = parser.parse_args()
    if args.seeds < 2:
        parser.error(f"--seeds {args.seeds}: at least 2 (the spread over seeds is reported)")
    spec = replace(scaling_spec(MODEL, args.workers, ALGO), iterations=1, warmup=0)
    topo = topology_for(spec)
    hosts = [n.host for n in place(spec, topo).jobs[0]]
    runs = measure_all(args.workers, args.out, simulate_missing=not args.measured_only)
    if not any(r.element == "intact" for r in runs):
        raise SystemExit(f"error: no ns-3 run of the intact fabric under {args.out}: run without --measured-only")
    bad = [r.label for r in runs if not r.ok]
    if bad:
        raise SystemExit(f"error: ns-3 runs without an exact iteration: {', '.join(bad)} (see {args.out})")
    costs, how = fabric_costs(topo, runs)
    rates = FailureRates.llama3(topo, args.workers)
    result = study(topo, hosts, costs, rates, args)
    for r in runs:
        print(f"ns-3 {r.label:<14} {r.removed or '-':<16} iteration {r.iteration_s * 1e3:8.3f} ms "
              f"({r.iteration_s / costs.iteration_s:.4f}x intact), "
              f"{Limits.of_figures(r.limits).line().split(':')[0]}: {r.limits['limited_by']}")
    s = result["strategies"]
    print(f"rates: {rates.per_gpu_hour:.3g}/GPU-h, {rates.per_switch_hour:.3g}/switch-h, "
          f"{rates.per_link_hour:.3g}/link-h: job MTBF {result['job_mtbf_h']:.1f} h, "
          f"{result['expected_failures']:.1f} failures expected in {args.days:g} days")
    samples_per_s = args.workers * BATCH / costs.iteration_s  # the intact fabric's training throughput
    for name in ("checkpoint_restart", "in_place"):
        g = s[name]["goodput"]
        s[name]["effective_samples_per_s"] = g["mean"] * samples_per_s
        print(f"{name:<19} goodput {g['mean']:.4f} (sd {g['stdev']:.4f}, {g['low']:.4f}-{g['high']:.4f} over "
              f"{args.seeds} seeds): {g['mean'] * samples_per_s:,.0f} of {samples_per_s:,.0f} samples/s")
    ratio = result["in_place_over_checkpoint_restart"]
    print(f"in place / checkpoint restart: {ratio['mean']:.4f} ({ratio['low']:.4f}-{ratio['high']:.4f})")
    print(f"checkpoint interval: Young/Daly {result['young_daly_interval_s'] / 60:.1f} min, the sweep's best "
          f"{result['sweep_best_interval_s'] / 60:.1f} min ({result['sweep_best_over_young']:.3g}x)")
    for row in result["rate_sweep"]:
        print(f"rates x{row['rate_scale']:<4g} MTBF {row['job_mtbf_h']:7.2f} h: checkpoint restart "
              f"{row['checkpoint_restart']:.4f}, in place {row['in_place']:.4f}")
    document = {"code_version": code_version(), "workers": args.workers, "model": MODEL, "algo": ALGO,
                "samples_per_s_intact": samples_per_s,
                "topology": {"name": topo.name, "k": topo.params.get("k"), "switches": len(topo.switches),
                             "links": len(topo.links)},
                "rates": rates.to_dict(), "repair_h": args.repair_h,
                "fabric": {"iteration_s": costs.iteration_s, "degraded_s": costs.degraded_s, "how": how,
                           "runs": [asdict(r) for r in runs]},
                "limits": {r.label: r.limits for r in runs}, "study": result}
    path = save(args.name, document)
    plot(document, RESULTS / f"{args.name}.png")
    print(f"wrote {path} and {RESULTS / (args.name + '.png')}")


if __name__ == "__main__":
    main()
