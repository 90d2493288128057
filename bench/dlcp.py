"""DLCP and TensorLights as ratios to their baselines, measured in one run.

Runs the compare specs experiments/dlcp-contention.toml (training jobs under contention:
baseline, priority, priority+drop, priority+drop+spray, alone) and experiments/tensorlights.toml
(training jobs whose parameter servers share one host, without and with TensorLights), then
prints the p99 (and median) iteration time of each DLCP run over the baseline's, and the
average job completion time with TensorLights over without. DLCP's training-throughput ratios
are bench.training's. The full reports land in --out. Writes bench/results/dlcp.json. Needs
root, BMv2 and Mininet.

    python -m bench.dlcp [--out runs/bench-dlcp] [--only dlcp|tensorlights] [--bmv2 PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.common import Limits, bmv2_option, save, use_bmv2
from controller.experiment.compare import load_spec, run_compare
from mininet_topos.bmv2 import one_switch_user_at_a_time
from protocol.paths import REPO_ROOT

SPECS = REPO_ROOT / "experiments"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def dlcp(out: Path) -> dict[str, Any]:
    summary = run_compare(load_spec(SPECS / "dlcp-contention.toml"), out / "dlcp-contention", log=_log)
    base = summary["baseline"]
    rows = {name: {"p99_s": s["p99_s"], "median_s": s["median_s"], "p99_ratio": ratio(s["p99_s"], base["p99_s"]),
                   "median_ratio": ratio(s["median_s"], base["median_s"]), "dlcp_dropped": s.get("dlcp_dropped"),
                   "max_relative_error": s.get("max_relative_error"), "correct": s["correct"],
                   **Limits.of_report(s).figures()}
            for name, s in summary.items()}
    print(f"\n{'run':<18}{'p99 s':>8}{'p99/base':>10}{'median s':>10}{'med/base':>10}{'dropped':>9}{'rel. error':>11}")
    for name, r in rows.items():
        print(f"{name:<18}{_f(r['p99_s'])}{_f(r['p99_ratio'], 10)}{_f(r['median_s'], 10)}{_f(r['median_ratio'], 10)}"
              f"{r['dlcp_dropped'] or 0:>9}{_f(r['max_relative_error'], 11, 4)}")
    _print_limits(rows)
    return rows


def _print_limits(rows: dict[str, dict[str, Any]]) -> None:
    for name, r in rows.items():
        print(f"  {name}: {Limits.of_figures(r).line()}")


def tensorlights(out: Path) -> dict[str, Any]:
    summary = run_compare(load_spec(SPECS / "tensorlights.toml"), out / "tensorlights", log=_log)
    rows = {}
    for base_name, lights_name in (("baseline-2jobs", "tensorlights-2jobs"), ("baseline", "tensorlights"),
                                   ("baseline", "tensorlights-rr"), ("baseline-25g", "tensorlights-25g")):
        if base_name in summary and lights_name in summary:
            b, t = summary[base_name]["avg_jct_s"], summary[lights_name]["avg_jct_s"]
            rows[lights_name] = {"baseline_avg_jct_s": b, "tensorlights_avg_jct_s": t, "ratio": ratio(t, b),
                                 **Limits.of_report(summary[lights_name]).figures()}
    print(f"\n{'run':<20}{'avg JCT base s':>15}{'avg JCT TL s':>14}{'TL/base':>9}")
    for name, r in rows.items():
        print(f"{name:<20}{_f(r['baseline_avg_jct_s'], 15)}{_f(r['tensorlights_avg_jct_s'], 14)}{_f(r['ratio'], 9)}")
    _print_limits(rows)
    return rows


def _f(v: float | None, width: int = 8, digits: int = 3) -> str:
    return f"{v:>{width}.{digits}f}" if v is not None else f"{'-':>{width}}"


def _log(line: str) -> None:
    if line.startswith("["):
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-dlcp"))
    parser.add_argument("--only", choices=("dlcp", "tensorlights"))
    bmv2_option(parser)
    args = parser.parse_args()
    use_bmv2(args)
    figures: dict[str, Any] = {}
    if args.only in (None, "dlcp"):
        figures["dlcp_contention"] = dlcp(args.out)
    if args.only in (None, "tensorlights"):
        figures["tensorlights"] = tensorlights(args.out)
    print(f"reports under {args.out}; written {save(f'dlcp-{args.only}' if args.only else 'dlcp', figures)}")


if __name__ == "__main__":
    with one_switch_user_at_a_time():  # no test or other benchmark on the switches meanwhile
        main()
