"""The scaling study's ring and NetReduce points measured again on the graph engine (ns-3).

bench.scaling runs each model's data-parallel training with the simulator's training loop
(gs-training.cc: per iteration the plan's buckets reduced as the backward pass produces them). The
same jobs as execution graphs (gradswitch/workload/generators/training.py: a forward and a backward node per
layer, an all-reduce per DDP bucket depending on the backward node of its last gradient, the next
iteration's forward after every all-reduce) run on the simulator's graph engine (gs-graph-rank.cc),
on the same fat tree at 100 Gb/s with the same emulated V100s, placement and transport: ring
all-reduce, or NetReduce in the fat tree's switches (`netreduce-hier`, the graph's world all-reduces
through the job's aggregation tree). Per point: the steady-state iteration (the median of the
iterations after the first, each from its first forward node's start to the next one's, as the study
measures) against the study's own figure in bench/results/scaling.json, every output checked by
digest. The study's points are single runs (they do not depend on the ECMP seed, so a repetition
gives the same figure): the graph engine's figure is judged within 1 % of it. Writes
bench/results/scaling-graph.json (table `scaling-graph` in docs/performance.md); a run of some
points keeps the file's other rows.

    python -m bench.scaling_graph [--models resnet50,vgg16,bert-base] [--workers 8,16,32,64]
                                  [--algos ring,netreduce-hier] [--out runs/bench-scaling-graph]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, Limits, save
from bench.scaling import MODELS, scaling_spec
from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.tables.reading import load
from gradswitch.experiment.training_graph import spec_training_graph
from gradswitch.workload.generators import iteration_times

WORKERS = (8, 16, 32, 64)
ITERATIONS = 3  # as the study's runs: 2 measured after one warm-up
WARMUP = 1
ALGOS = ("ring", "netreduce-hier")  # of the study's: the graph engines have no parameter server
TOLERANCE = 0.01  # the study's points are single runs that do not vary with the seed


def point(model: str, workers: int, earlier: dict[str, Any], out: Path, algo: str = "ring") -> dict[str, Any]:
    """Run one of the study's points (ring, or NetReduce in the fat tree's switches) as a graph; its row."""
    spec = scaling_spec(model, workers, algo)
    assert spec.emulate is not None
    # The graph carries the workload: the spec keeps the study's fabric, rate, transport and checks.
    run_spec, graph, _dilation = spec_training_graph(spec, ITERATIONS)  # dilation 1 on the simulator
    started = time.monotonic()
    report = run_graph_spec(run_spec, graph, out / spec.label)
    wall_s = time.monotonic() - started
    iteration_s = statistics.median(iteration_times(graph, report.run)[WARMUP:])
    ratio = iteration_s / earlier["iteration_s"]
    return {"model": model, "algo": algo, "workers": workers, "iterations": ITERATIONS, "iteration_s": iteration_s,
            "iteration_s_study": earlier["iteration_s"], "over_study": ratio,
            "within_tolerance": abs(ratio - 1) <= TOLERANCE,
            "samples_per_s": workers * spec.emulate.batch / iteration_s,
            "samples_per_s_study": earlier["samples_per_s"],
            "checked": report.checked, "errors": list(report.errors), "wall_s": wall_s,
            "wall_s_study": earlier["wall_s"], **Limits.simulated_figures(report.busiest_link_load)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--workers", default=",".join(map(str, WORKERS)))
    ap.add_argument("--algos", default=",".join(ALGOS), help=f"of {', '.join(ALGOS)}")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-scaling-graph"))
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    workers = [int(n) for n in args.workers.split(",") if n]
    algos = [a for a in args.algos.split(",") if a]
    if unknown := [a for a in algos if a not in ALGOS]:
        raise SystemExit(f"error: --algos {','.join(unknown)}: the graph engines run {', '.join(ALGOS)}")
    study = load(RESULTS, "scaling.json")["points"]
    names = {(m, a, n): f"{m}-{a}-n{n}" for m in models for a in algos for n in workers}
    missing = [name for name in names.values() if name not in study]
    if missing:
        raise SystemExit(f"error: bench/results/scaling.json has no point {', '.join(missing)}: "
                         f"give --models/--workers the study measured ({', '.join(map(str, study_workers(study)))})")
    # Rows of points not run now are kept from the results file (a rerun of some points updates only them).
    kept = {(r["model"], r.get("algo", "ring"), r["workers"]): r for r in previous_rows()}
    print("simulated: the links and the computation set the pace, never this machine", flush=True)
    print(f"{'model':<10}{'algorithm':<16}{'N':>5}{'graph ms':>11}{'study ms':>11}{'ratio':>8}  checked  "
          f"wall s (study)", flush=True)
    for (m, a, n), name in names.items():
        row = point(m, n, study[name], args.out, a)
        kept[(m, a, n)] = row
        print(f"{m:<10}{a:<16}{n:>5}{row['iteration_s'] * 1e3:>11.3f}{row['iteration_s_study'] * 1e3:>11.3f}"
              f"{row['over_study']:>8.4f}  {row['checked']!s:<7}  {row['wall_s']:.1f} ({row['wall_s_study']:.1f})",
              flush=True)
    order = {m: i for i, m in enumerate(MODELS)}
    rows = [kept[k] for k in sorted(kept, key=lambda k: (ALGOS.index(k[1]), order.get(k[0], 99), k[2]))]
    for r in rows:
        r.setdefault("algo", "ring")
    ratios = [r["over_study"] for r in rows]
    path = save("scaling-graph", {
        "what": "the scaling study's ring and hierarchical NetReduce points (ns-3, fat tree, 100 Gb/s, emulated "
                "V100 FP32 batch 32, DDP buckets of 25 MB, iteration sync) run as execution graphs on the simulator's "
                "graph engine",
        "bottleneck": "the links (simulated: never machine-bound)", "tolerance": TOLERANCE,
        "rows": rows, "over_study": {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)},
        "all_within_tolerance": all(r["within_tolerance"] for r in rows),
        "all_checked": all(r["checked"] for r in rows)})
    print(f"graph / study iteration: {min(ratios):.4f}-{max(ratios):.4f}; wrote {path}")


def previous_rows() -> list[dict[str, Any]]:
    path = RESULTS / "scaling-graph.json"
    return list(load(RESULTS, path.name)["rows"]) if path.exists() else []


def study_workers(study: dict[str, Any]) -> list[int]:
    return sorted({p["workers"] for p in study.values()})


if __name__ == "__main__":
    main()
