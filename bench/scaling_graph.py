"""The scaling study's ring points measured again on the graph engine (ns-3).

bench.scaling runs each model's data-parallel training with the simulator's training loop
(gs-training.cc: per iteration the plan's buckets reduced as the backward pass produces them). The
same jobs as execution graphs (workload/generators/training.py: a forward and a backward node per
layer, an all-reduce per DDP bucket depending on the backward node of its last gradient, the next
iteration's forward after every all-reduce) run on the simulator's graph engine (gs-graph-rank.cc),
on the same fat tree at 100 Gb/s with the same emulated V100s, placement and transport. Per point:
the steady-state iteration (the median of the iterations after the first, each from its first
forward node's start to the next one's, as the study measures) against the study's own figure in
bench/results/scaling.json, every output checked by digest. The study's points are single runs (its rings do not depend on the
ECMP seed, so a repetition gives the same figure): the graph engine's figure is judged within 1 %
of it. Writes bench/results/scaling-graph.json (table `scaling-graph` in docs/performance.md).

    python -m bench.scaling_graph [--models resnet50,vgg16,bert-base] [--workers 8,16,32,64]
                                  [--out runs/bench-scaling-graph]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, save
from bench.scaling import MODELS, scaling_spec
from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.training_graph import spec_training_graph
from workload.generators import iteration_times

WORKERS = (8, 16, 32, 64)
ITERATIONS = 3  # as the study's runs: 2 measured after one warm-up
WARMUP = 1
TOLERANCE = 0.01  # the study's points are single runs that do not vary with the seed


def point(model: str, workers: int, earlier: dict[str, Any], out: Path) -> dict[str, Any]:
    """Run one of the study's ring points as a graph; its row."""
    spec = scaling_spec(model, workers, "ring")
    assert spec.emulate is not None
    # The graph carries the workload: the spec keeps the study's fabric, rate, transport and checks.
    run_spec, graph, _dilation = spec_training_graph(spec, ITERATIONS)  # dilation 1 on the simulator
    started = time.monotonic()
    report = run_graph_spec(run_spec, graph, out / spec.label)
    wall_s = time.monotonic() - started
    iteration_s = statistics.median(iteration_times(graph, report.run)[WARMUP:])
    ratio = iteration_s / earlier["iteration_s"]
    return {"model": model, "workers": workers, "iterations": ITERATIONS, "iteration_s": iteration_s,
            "iteration_s_study": earlier["iteration_s"], "over_study": ratio,
            "within_tolerance": abs(ratio - 1) <= TOLERANCE,
            "samples_per_s": workers * spec.emulate.batch / iteration_s,
            "samples_per_s_study": earlier["samples_per_s"],
            "checked": report.checked, "errors": list(report.errors), "busiest_link_load": report.busiest_link_load,
            "wall_s": wall_s, "wall_s_study": earlier["wall_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--workers", default=",".join(map(str, WORKERS)))
    ap.add_argument("--out", type=Path, default=Path("runs/bench-scaling-graph"))
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    workers = [int(n) for n in args.workers.split(",") if n]
    study = json.loads((RESULTS / "scaling.json").read_text())["points"]
    missing = [f"{m}-ring-n{n}" for m in models for n in workers if f"{m}-ring-n{n}" not in study]
    if missing:
        raise SystemExit(f"error: bench/results/scaling.json has no point {', '.join(missing)}: "
                         f"give --models/--workers the study measured ({', '.join(map(str, study_workers(study)))})")
    rows = []
    print("simulated: the links and the computation set the pace, never this machine", flush=True)
    print(f"{'model':<10}{'N':>5}{'graph ms':>11}{'study ms':>11}{'ratio':>8}  checked  wall s (study)", flush=True)
    for m in models:
        for n in workers:
            row = point(m, n, study[f"{m}-ring-n{n}"], args.out)
            rows.append(row)
            print(f"{m:<10}{n:>5}{row['iteration_s'] * 1e3:>11.3f}{row['iteration_s_study'] * 1e3:>11.3f}"
                  f"{row['over_study']:>8.4f}  {row['checked']!s:<7}  {row['wall_s']:.1f} ({row['wall_s_study']:.1f})",
                  flush=True)
    ratios = [r["over_study"] for r in rows]
    path = save("scaling-graph", {
        "what": "the scaling study's ring points (ns-3, fat tree, 100 Gb/s, emulated V100 FP32 batch 32, DDP buckets "
                "of 25 MB, iteration sync) run as execution graphs on the simulator's graph engine",
        "bottleneck": "the links (simulated: never machine-bound)", "tolerance": TOLERANCE,
        "rows": rows, "over_study": {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)},
        "all_within_tolerance": all(r["within_tolerance"] for r in rows),
        "all_checked": all(r["checked"] for r in rows)})
    print(f"graph / study iteration: {min(ratios):.4f}-{max(ratios):.4f}; wrote {path}")


def study_workers(study: dict[str, Any]) -> list[int]:
    return sorted({p["workers"] for p in study.values()})


if __name__ == "__main__":
    main()
