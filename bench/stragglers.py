"""Stragglers: the digits model learning with one slow worker, NetReduce N of N vs k of N vs ring (3 seeds each).

Four workers train workload train-digits (a real MLP, real gradients, gradswitch/hosts/digits_job.py) through one BMv2
switch (rack, 20 Mb/s links). Worker 3 is slow from the start: the fault slow-worker:3@0,factor=F stretches its
minibatch's computation F times (gradswitch/hosts/slowdown.py; the digits job times one minibatch's gradient warm at its
start). Each seed runs, on one network:

- netreduce N of N: every sum waits for the slow worker;
- netreduce k of N (k = 3): a sum leaves the switch at the third contribution, names the workers it holds, and the
  slow worker's late contributions are dropped (docs/faults.md, "Stragglers: k of N");
- netreduce N of N with a deadline: a sum waits for all four, or leaves with those in once DEADLINE_MS have passed
  since its first contribution (on a waiting worker's retransmission: the switch has no timer), with the job's
  default retransmission timeout and with a smallest timeout of DEADLINE_RTO_MS;
- ring: the host all-reduce, which waits for the slow worker too;
- netreduce N of N without the slow worker: what the fast workers alone take per iteration.

Per run: the median iteration time, the test accuracy after every iteration against the iterations' own wall time
(train_s: checks and evaluation excluded), the time to reach ACCURACY_TARGET, and for k of N the relative error of
each step's gradient against the mean of all four (the exact check's stated bound: each sum is exact against the
workers it names). bench/results/stragglers.json (with the code version, the BMv2 build and what limited each run)
and stragglers.png (accuracy against time); docs/faults.md's table is `table()` of that JSON (a test keeps them
equal). Needs root, BMv2, Mininet (one network: wrap it in flock /tmp/gradswitch-net.lock).

    python -m bench.stragglers [--out runs/bench-stragglers] [--iterations 60] [--seeds 1,2,3]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.common import RESULTS, Limits, bmv2_option, save, spec_engines, use_bmv2
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.spec import ExperimentSpec, spec_from_dict
from gradswitch.experiment.stats import spread_known
from gradswitch.experiment.tables.reading import load

WORKERS = 4
K = 3
SLOW_RANK = 3
# the slow worker's computation, stretched (a minibatch's gradient, timed warm: gradswitch/hosts/digits_job.py)
FACTOR = 1000.0
BW_MBPS = 20.0
ITERATIONS = 60
SEEDS = (1, 2, 3)
ACCURACY_TARGET = 0.85
DEADLINE_MS = 20.0
# A deadline takes effect on a waiting worker's retransmission: with the default timeout (a full queue's time and a
# window on the path, 0.13 s here) and with one just above the deadline
DEADLINE_RTO_MS = 40.0
SLOW = "slow"  # (in CONFIGS: the slow-worker fault, at the run's factor)
# name -> what the run's spec adds to the common part; the order is the table's
CONFIGS: dict[str, dict[str, Any]] = {
    "netreduce N of N": {"algo": "netreduce", "faults": [SLOW]},
    f"netreduce {K} of N": {"algo": "netreduce", "netreduce_k": K, "faults": [SLOW]},
    f"netreduce N of N, {DEADLINE_MS:g} ms deadline": {"algo": "netreduce", "netreduce_deadline_ms": DEADLINE_MS,
                                                       "faults": [SLOW]},
    f"netreduce N of N, {DEADLINE_MS:g} ms deadline, RTO {DEADLINE_RTO_MS:g} ms": {
        "algo": "netreduce", "netreduce_deadline_ms": DEADLINE_MS, "min_rto_ms": DEADLINE_RTO_MS, "faults": [SLOW]},
    "ring": {"algo": "ring", "faults": [SLOW]},
    "netreduce N of N, no slow worker": {"algo": "netreduce"},
}


def spec_for(config: str, seed: int, iterations: int, factor: float = FACTOR) -> ExperimentSpec:
    slug = config.replace(" ", "-").replace(",", "")
    fault = f"slow-worker:{SLOW_RANK}@0,factor={factor:g}"
    conf = {k: [fault if f == SLOW else f for f in v] if k == "faults" else v for k, v in CONFIGS[config].items()}
    return spec_from_dict({"workers": WORKERS, "topo": "rack", "workload": "train-digits", "dtype": "float32",
                           "iterations": iterations, "bw_mbps": BW_MBPS, "seed": seed,
                           "name": f"{slug}-seed{seed}", **conf})


def run_row(config: str, seed: int, report: Results) -> dict[str, Any]:
    """One run's figures: its iterations' times, accuracy against time, and what limited it."""
    its: list[dict[str, Any]] = [dict(it) for it in report["iterations"]]
    times = [float(it["end"]) - float(it["start"]) for it in its]
    curve = [(float(it["train_s"]), float(it["accuracy"])) for it in its]
    reached = next((t for t, a in curve if a >= ACCURACY_TARGET), None)
    errors = [float(it["gradient_error"]) for it in its]
    contributors = [float(it["contributors"]) for it in its]
    return {"config": config, "seed": seed, "ok": bool(report["ok"]), "iterations": len(its),
            "median_iteration_s": statistics.median(times), "mean_iteration_s": statistics.fmean(times),
            "time_to_target_s": reached, "final_accuracy": curve[-1][1] if curve else None,
            "train_s": curve[-1][0] if curve else None,
            "median_gradient_error": statistics.median(errors) if errors else None,
            "mean_contributors": statistics.fmean(contributors) if contributors else None,
            "retransmissions": report.get("retransmissions"), "timeouts": report.get("timeouts"),
            "curve": [[round(t, 4), round(a, 4)] for t, a in curve],
            "limits": Limits.of_report(report).figures()}


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration: the median over its seeds of each run's figures, with min and max."""
    out = []
    for config in CONFIGS:
        mine = [r for r in rows if r["config"] == config]
        if not mine:
            continue

        def figure(key: str, runs: list[dict[str, Any]] = mine) -> dict[str, float | None]:
            known = spread_known(r[key] for r in runs)
            return dict(known) if known else {"min": None, "median": None, "max": None, "n": 0}

        out.append({"config": config, "seeds": [r["seed"] for r in mine],
                    "reached_target": sum(r["time_to_target_s"] is not None for r in mine),
                    **{k: figure(k) for k in ("median_iteration_s", "time_to_target_s", "final_accuracy",
                                              "median_gradient_error", "mean_contributors")}})
    return out


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def table_head(data: dict[str, Any]) -> str:
    return (f"| run (worker {data['slow_rank']} {data['factor']:g}x slower) | iteration (s) | time to "
            f"{data['accuracy_target']:.0%} accuracy (s) | accuracy after {data['iterations']} iterations | "
            f"gradient error vs all {data['workers']} | workers per sum |")


def table(data: dict[str, Any]) -> str:
    """docs/faults.md's table: median over the seeds [min-max]."""
    def cell(s: dict[str, float | None], fmt: str) -> str:
        if s["median"] is None:
            return "-"
        return f"{_f(s['median'], fmt)} [{_f(s['min'], fmt)}-{_f(s['max'], fmt)}]"

    lines = [table_head(data), "|---|---|---|---|---|---|"]
    for s in data["summary"]:
        target = cell(s["time_to_target_s"], ".2f") + (f" ({s['reached_target']} of {len(s['seeds'])} seeds)"
                                                       if s["reached_target"] < len(s["seeds"]) else "")
        lines.append(f"| {s['config']} | {cell(s['median_iteration_s'], '.3f')} | {target} | "
                     f"{cell(s['final_accuracy'], '.3f')} | {cell(s['median_gradient_error'], '.3f')} | "
                     f"{cell(s['mean_contributors'], '.2f')} |")
    return "\n".join(lines)


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = dict(zip(CONFIGS, ("tab:red", "tab:green", "tab:orange", "tab:purple", "tab:blue", "tab:gray"),
                       strict=True))
    for row in data["rows"]:
        t, a = zip(*row["curve"], strict=True) if row["curve"] else ((), ())
        ax.plot(t, a, color=colours[row["config"]], alpha=0.8, lw=1.2,
                label=row["config"] if row["seed"] == data["seeds"][0] else None)
    ax.axhline(ACCURACY_TARGET, color="black", lw=0.6, ls=":")
    ax.set_xlabel("training time (s, the iterations' own)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"digits MLP, 4 workers on BMv2, worker {SLOW_RANK} {FACTOR:g}x slower ({len(data['seeds'])} seeds)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-stragglers"))
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--factor", type=float, default=FACTOR, help="the slow worker's (default %(default)g)")
    bmv2_option(parser)
    args = parser.parse_args(argv)
    use_bmv2(args)
    seeds = [int(s) for s in args.seeds.split(",")]
    from gradswitch.experiment.placement import topology_for
    from gradswitch.experiment.runner import run_on
    from gradswitch.experiment.testbed import Testbed
    from gradswitch.net.network import NetworkOptions
    from gradswitch.version import code_version

    specs = [(config, seed, spec_for(config, seed, args.iterations, args.factor)) for seed in seeds
             for config in CONFIGS]
    for _, _, spec in specs:
        spec.validate()
    rows = []
    with Testbed(topology_for(specs[0][2]), NetworkOptions(run_dir=args.out / "net")) as net:
        for i, (config, seed, spec) in enumerate(specs, start=1):
            print(f"  [{i}/{len(specs)}] {config}, seed {seed} ...", flush=True)
            report = run_on(net, spec, args.out / spec.label, progress=False)
            if not report["ok"]:
                raise SystemExit(f"{spec.label} failed: {report['errors']}")
            row = run_row(config, seed, report)
            print(f"      median iteration {row['median_iteration_s']:.3f} s, accuracy {row['final_accuracy']:.3f}, "
                  f"{Limits.of_report(report).line()}", flush=True)
            rows.append(row)
    data: dict[str, Any] = {"code_version": code_version(), "workers": WORKERS, "k": K, "slow_rank": SLOW_RANK,
                            "deadline_ms": DEADLINE_MS, "deadline_min_rto_ms": DEADLINE_RTO_MS,
                            "factor": args.factor, "bw_mbps": BW_MBPS, "iterations": args.iterations, "seeds": seeds,
                            "accuracy_target": ACCURACY_TARGET, "rows": rows}
    data["summary"] = summary(rows)
    path = save("stragglers", data, engines=spec_engines(spec for _, _, spec in specs))
    plot(load(RESULTS, path.name), RESULTS / "stragglers.png")
    print(table(data))
    print(f"wrote {path} and {RESULTS / 'stragglers.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
