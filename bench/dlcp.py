"""DLCP and TensorLights as ratios to their baselines, from repeated runs.

Runs the compare specs gradswitch/specs/dlcp-contention.toml (training jobs under contention: its
baselines and DLCP's mechanisms) and gradswitch/specs/tensorlights.toml (training jobs whose
parameter servers share one host, without and with TensorLights), each run as many times as the
spec's `repeat` says (or --repeat), then prints the p99 (and median) iteration time of each DLCP
run over the best of the spec's baselines, and the average job completion time with
TensorLights over without: the ratio of the medians over the repetitions, with its min and max
(one run's smallest repetition over the other's largest, its largest over the other's smallest).
Machine-bound repetitions (gradswitch/experiment/bottleneck.py) are left out of the medians.
DLCP's training-throughput ratios are bench.training's. The full reports land in --out;
started again with the same --out, complete repetitions are kept and the rest run. Writes
bench/results/dlcp.json. Needs root, BMv2 and Mininet.

    python -m bench.dlcp [--out runs/bench-dlcp] [--only dlcp|tensorlights] [--repeat N] [--bmv2 PATH]
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import Limits, bmv2_option, save, spec_engines, use_bmv2
from gradswitch.experiment.compare import CompareSpec, best_baseline, load_spec, ratio_of, run_compare
from gradswitch.experiment.shipped_specs import EXPERIMENTS
from gradswitch.net.bmv2 import one_switch_user_at_a_time

SPECS = EXPERIMENTS  # the shipped compare specs (gradswitch/specs/)


def _spec(name: str, repeat: int | None) -> CompareSpec:
    spec = load_spec(SPECS / f"{name}.toml")
    return replace(spec, repeat=repeat) if repeat is not None else spec


def _ratio(a: Mapping[str, Any], b: Mapping[str, Any], figure: str) -> dict[str, Any]:
    r = ratio_of(a, b, figure)
    return {"ratio": r["ratio"], "ratio_min": r["min"], "ratio_max": r["max"], "headline": r["headline"]}


def dlcp(out: Path, repeat: int | None) -> dict[str, Any]:
    spec = _spec("dlcp-contention", repeat)
    summary = run_compare(spec, out / "dlcp-contention", log=_log)
    best = best_baseline(spec, summary, "p99_s")
    base = summary[best] if best else {}
    rows = {name: {"p99_s": s.get("p99_s"), "median_s": s.get("median_s"),
                   "p99": _ratio(s, base, "p99_s"), "median": _ratio(s, base, "median_s"),
                   "dlcp_dropped": s.get("dlcp_dropped"), "zero_filled_packets": s.get("zero_filled_packets"),
                   "max_relative_error": s.get("max_relative_error"), "correct": s.get("correct"),
                   "background_goodput_mbps": s.get("background_goodput_mbps"),
                   "repetitions": s.get("headline_repetitions"),
                   "machine_bound_repetitions": s.get("machine_bound_repetitions"), **Limits.of_figures(s).figures()}
            for name, s in summary.items()}
    print(f"\nbaseline: {best or '(none usable)'}, the best p99 of {', '.join(spec.baselines) or '(no baselines)'}")
    print(f"{'run':<22}{'p99 s':>8}{'p99/base [min, max]':>22}{'median s':>10}{'med/base [min, max]':>22}"
          f"{'dropped':>9}{'rel. error':>11}{'bulk Mb/s':>10}")
    for name, r in rows.items():
        print(f"{name:<22}{_f(r['p99_s'])}{_span(r['p99'], 22)}{_f(r['median_s'], 10)}{_span(r['median'], 22)}"
              f"{_f(r['dlcp_dropped'], 9, 0)}{_f(r['max_relative_error'], 11, 4)}"
              f"{_f(r['background_goodput_mbps'], 10, 2)}")
    _print_limits(rows)
    return {"baselines": spec.baselines, "best_baseline": best, "runs": rows}


def _print_limits(rows: dict[str, dict[str, Any]]) -> None:
    for name, r in rows.items():
        used = f"{r.get('repetitions')} repetition(s) in the medians" if r.get("repetitions") is not None else ""
        print(f"  {name}: {Limits.of_figures(r).line()}{'; ' + used if used else ''}")


PAIRS = (("baseline-2jobs", "tensorlights-2jobs"), ("baseline", "tensorlights"), ("baseline", "tensorlights-rr"),
         ("baseline-25g", "tensorlights-25g"))


def tensorlights(out: Path, repeat: int | None) -> dict[str, Any]:
    summary = run_compare(_spec("tensorlights", repeat), out / "tensorlights", log=_log)
    rows = {}
    for base_name, lights_name in PAIRS:
        if base_name in summary and lights_name in summary:
            b, t = summary[base_name], summary[lights_name]
            rows[lights_name] = {"baseline": base_name, "baseline_avg_jct_s": b.get("avg_jct_s"),
                                 "tensorlights_avg_jct_s": t.get("avg_jct_s"), **_ratio(t, b, "avg_jct_s"),
                                 "repetitions": t.get("headline_repetitions"),
                                 "machine_bound_repetitions": t.get("machine_bound_repetitions"),
                                 # every repetition's own figures, the medians' and ratios' inputs
                                 "baseline_each": _each(b), "tensorlights_each": _each(t),
                                 **Limits.of_figures(t).figures()}
    print(f"\n{'run':<20}{'avg JCT base s':>15}{'avg JCT TL s':>14}{'TL/base [min, max]':>22}")
    for name, r in rows.items():
        print(f"{name:<20}{_f(r['baseline_avg_jct_s'], 15)}{_f(r['tensorlights_avg_jct_s'], 14)}{_span(r, 22)}")
    _print_limits(rows)
    return rows


def _each(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each repetition of a compare's run: its number and seed, its average job completion time (over the jobs),
    whether its check held (ok, outcome) and whether the machine bound it."""
    keep = ("repetition", "seed", "avg_jct_s", "check", "ok", "outcome", "correct", "machine_bound", "error")
    return [{k: rep[k] for k in keep if k in rep} for rep in run.get("repetitions", [])]


def _span(r: dict[str, Any], width: int) -> str:
    if r.get("ratio") is None:
        return f"{'-':>{width}}"
    text = f"{r['ratio']:.3f} [{r['ratio_min']:.2f}, {r['ratio_max']:.2f}]" + ("" if r["headline"] else "*")
    return f"{text:>{width}}"


def _f(v: float | None, width: int = 8, digits: int = 3) -> str:
    return f"{v:>{width}.{digits}f}" if isinstance(v, int | float) else f"{'-':>{width}}"


def _log(line: str) -> None:
    if line.startswith("[") or "failed" in line:  # progress: [k/n] run (repetition), skipped or started
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-dlcp"))
    parser.add_argument("--only", choices=("dlcp", "tensorlights"))
    parser.add_argument("--repeat", type=int, help="repetitions of every run (default: each spec's `repeat`)")
    bmv2_option(parser)
    args = parser.parse_args()
    if args.repeat is not None and args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: at least 1 repetition")
    use_bmv2(args)
    figures: dict[str, Any] = {}
    if args.only in (None, "dlcp"):
        figures["dlcp_contention"] = dlcp(args.out, args.repeat)
    if args.only in (None, "tensorlights"):
        figures["tensorlights"] = tensorlights(args.out, args.repeat)
    print("* every repetition of one of the two runs was machine-bound: not a headline")
    ran = [r for name in ("dlcp-contention", "tensorlights") if args.only in (None, name.split("-")[0])
           for r in _spec(name, None).runs]
    path = save(f"dlcp-{args.only}" if args.only else "dlcp", figures, engines=spec_engines(ran))
    print(f"reports under {args.out}; written {path}")


if __name__ == "__main__":
    with one_switch_user_at_a_time():  # no test or other benchmark on the switches meanwhile
        main()
