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
gives the same figure): the graph engine's figure is judged within 1 % of it.

What each engine costs the simulator: the study's runs are 2 iterations and the graph 3 (ITERATIONS), so each
point also runs the training loop on the same job (ITERATIONS iterations, the study's spec otherwise) right
after the graph, on the same machine state: per engine the simulator's run wall (its own `wall_s`: the event
loop, set-up aside) and the CPU seconds of the gradswitch-sim process (set-up and output included: on a machine
shared with other work wall time is disturbed, CPU time much less), and the graph's whole run through its
driver (`wall_s`: configuration, simulator, report and timeline). `--no-loop` leaves the loop out. A rerun
point keeps the figures of the row it replaces under `before`.

The figure the machine's load does not move: per engine the simulator's user-space instructions
(`sim_instructions`, `loop_sim_instructions`; gradswitch/sim/instructions.py), counted by `--instructions perf`
(the default: `perf stat -e instructions:u` on the same run, free; a machine without hardware counters gives
null and says why in `sim_instructions_why`) or `--instructions callgrind` (valgrind counts them in software,
anywhere, in a second run of each engine at 20-100x its time: the CPU and wall figures stay the plain run's),
or `none`. graph / loop is then judged by instructions (`instructions_over_loop`).
Writes bench/results/scaling-graph.json (table `scaling-graph` in docs/performance.md); a run of some points
keeps the file's other rows.

    python -m bench.scaling_graph [--models resnet50,vgg16,bert-base] [--workers 8,16,32,64]
                                  [--algos ring,netreduce-hier] [--out runs/bench-scaling-graph] [--no-loop]
                                  [--instructions perf|callgrind|none]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.common import ENGINES_TOLERANCE, RESULTS, Limits, save
from bench.scaling import MODELS, scaling_spec
from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.runner import run_experiment
from gradswitch.experiment.spec import Engine
from gradswitch.experiment.tables.reading import load
from gradswitch.experiment.training_graph import spec_training_graph
from gradswitch.sim import instructions
from gradswitch.sim.instructions import Counter
from gradswitch.workload.generators import iteration_times

WORKERS = (8, 16, 32, 64)
ITERATIONS = 3  # 2 measured after one warm-up (the study's runs are 2 iterations, 1 measured)
WARMUP = 1
ALGOS = ("ring", "netreduce-hier")  # of the study's: the graph engines have no parameter server
TOLERANCE = ENGINES_TOLERANCE  # bench/common.py
T = TypeVar("T")


def point(model: str, workers: int, earlier: dict[str, Any], out: Path, algo: str = "ring",
          counter: Counter | None = Counter.PERF) -> dict[str, Any]:
    """Run one of the study's points (ring, or NetReduce in the fat tree's switches) as a graph; its row."""
    spec = scaling_spec(model, workers, algo)
    assert spec.workload.emulate is not None
    # The graph carries the workload: the spec keeps the study's fabric, rate, transport and checks.
    run_spec, graph, _dilation = spec_training_graph(spec, ITERATIONS)  # dilation 1 on the simulator
    started = time.monotonic()
    report, cpu_s = child_cpu(lambda: counting(counter is Counter.PERF,
                                               lambda: run_graph_spec(run_spec, graph, out / spec.label)))
    wall_s = time.monotonic() - started
    count = instructions.read(out / spec.label / "sim")
    if counter is Counter.CALLGRIND:
        counting(True, lambda: run_graph_spec(run_spec, graph, out / f"{spec.label}-callgrind"), counter)
        count = instructions.read(out / f"{spec.label}-callgrind" / "sim")
    iteration_s = statistics.median(iteration_times(graph, report.run)[WARMUP:])
    ratio = iteration_s / earlier["iteration_s"]
    return {"model": model, "algo": algo, "workers": workers, "iterations": ITERATIONS, "iteration_s": iteration_s,
            "iteration_s_study": earlier["iteration_s"], "over_study": ratio,
            "within_tolerance": abs(ratio - 1) <= TOLERANCE,
            "samples_per_s": workers * spec.workload.emulate.batch / iteration_s,
            "samples_per_s_study": earlier["samples_per_s"],
            "checked": report.checked, "errors": list(report.errors), "wall_s": wall_s,
            "sim_wall_s": sim_wall_s(out / spec.label / "sim"), "sim_cpu_s": cpu_s,
            "wall_s_study": earlier["wall_s"], **instruction_fields("sim", counter, count),
            **Limits.simulated_figures(report.busiest_link_load)}


def loop_point(model: str, workers: int, out: Path, algo: str = "ring",
               counter: Counter | None = Counter.PERF) -> dict[str, Any]:
    """The study's point on the training loop for the graph's ITERATIONS iterations (the same job as the graph's):
    what the loop costs the simulator (`loop_*` figures of the row) and its iteration (the study's is of 2)."""
    spec = scaling_spec(model, workers, algo).but(iterations=ITERATIONS, engine=Engine.LOOP)
    where = out / f"{spec.label}-loop{ITERATIONS}"
    started = time.monotonic()
    results, cpu_s = child_cpu(lambda: counting(counter is Counter.PERF, lambda: run_experiment(spec, where)))
    wall_s = time.monotonic() - started
    count = instructions.read(where / "sim")
    if counter is Counter.CALLGRIND:
        counted_at = out / f"{spec.label}-loop{ITERATIONS}-callgrind"
        counting(True, lambda: run_experiment(spec, counted_at), counter)
        count = instructions.read(counted_at / "sim")
    training = results.get("training") or {}
    return {"loop_iterations": ITERATIONS, "loop_ok": bool(results.get("ok")),
            "loop_iteration_s": training.get("iteration_s_real"), "loop_wall_s": wall_s,
            "loop_sim_wall_s": sim_wall_s(where / "sim"), "loop_sim_cpu_s": cpu_s,
            **instruction_fields("loop_sim", counter, count)}


def counting(on: bool, run: Callable[[], T], counter: Counter = Counter.PERF) -> T:
    """run()'s value, its simulator counted by `counter` when `on` (GRADSWITCH_SIM_INSTRUCTIONS for the run)."""
    if not on:
        return run()
    was = os.environ.get(instructions.ENV)
    os.environ[instructions.ENV] = counter.value
    try:
        return run()
    finally:
        if was is None:
            del os.environ[instructions.ENV]
        else:
            os.environ[instructions.ENV] = was


def instruction_fields(prefix: str, counter: Counter | None, count: instructions.InstructionCount | None
                       ) -> dict[str, Any]:
    """`<prefix>_instructions` (None when not counted) and `<prefix>_instructions_why` (why not)."""
    if counter is None:
        return {f"{prefix}_instructions": None, f"{prefix}_instructions_why": "not counted (--instructions none)"}
    if count is None:
        return {f"{prefix}_instructions": None, f"{prefix}_instructions_why": "the run left no sim-instructions.json"}
    return {f"{prefix}_instructions": count.instructions, f"{prefix}_instructions_why": count.why,
            "instructions_counter": count.counter.value}


def child_cpu(run: Callable[[], T]) -> tuple[T, float]:
    """run()'s value and the CPU seconds (user and system) of the processes it ran and waited for: the simulator."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    value = run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return value, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def sim_wall_s(sim_dir: Path) -> float:
    """The simulator's own wall time of its run (its event loop), from the results it wrote."""
    return float(json.loads((sim_dir / "sim-results.json").read_text())["wall_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--workers", default=",".join(map(str, WORKERS)))
    ap.add_argument("--algos", default=",".join(ALGOS), help=f"of {', '.join(ALGOS)}")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-scaling-graph"))
    ap.add_argument("--no-loop", action="store_true", help="do not run the training loop on the same job beside it")
    ap.add_argument("--instructions", choices=[*(c.value for c in Counter), "none"], default=Counter.PERF.value,
                    help="count each engine's simulator instructions: perf (hardware counters, same run), callgrind "
                         "(valgrind, a second run at 20-100x its time) or none")
    args = ap.parse_args()
    counter = None if args.instructions == "none" else Counter(args.instructions)
    if counter is not None and (why := instructions.missing_tool(counter)) is not None:
        raise SystemExit(f"error: --instructions {counter.value}: {why}; or give --instructions none")
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
          f"sim wall s, CPU s: graph / loop ({ITERATIONS} iterations each)", flush=True)
    for (m, a, n), name in names.items():
        row = point(m, n, study[name], args.out, a, counter)
        if not args.no_loop:
            row.update(loop_point(m, n, args.out, a, counter))
            if row.get("sim_instructions") and row.get("loop_sim_instructions"):
                row["instructions_over_loop"] = row["sim_instructions"] / row["loop_sim_instructions"]
        if (old := kept.get((m, a, n))) is not None:
            row["before"] = old.get("before") or {"wall_s": old["wall_s"], "wall_s_study": old["wall_s_study"]}
        kept[(m, a, n)] = row
        loop = (f"{row['loop_sim_wall_s']:.1f}, {row['loop_sim_cpu_s']:.1f}" if "loop_sim_wall_s" in row else "-")
        by_count = (f"; instructions graph / loop {row['instructions_over_loop']:.4f}"
                    if "instructions_over_loop" in row else f"; instructions: {row['sim_instructions_why']}")
        print(f"{m:<10}{a:<16}{n:>5}{row['iteration_s'] * 1e3:>11.3f}{row['iteration_s_study'] * 1e3:>11.3f}"
              f"{row['over_study']:>8.4f}  {row['checked']!s:<7}  {row['sim_wall_s']:.1f}, {row['sim_cpu_s']:.1f} / "
              f"{loop}{by_count}", flush=True)
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
        "all_checked": all(r["checked"] for r in rows)}, engines=[Engine.LOOP, Engine.GRAPH])
    print(f"graph / study iteration: {min(ratios):.4f}-{max(ratios):.4f}; wrote {path}")


def previous_rows() -> list[dict[str, Any]]:
    path = RESULTS / "scaling-graph.json"
    return list(load(RESULTS, path.name)["rows"]) if path.exists() else []


def study_workers(study: dict[str, Any]) -> list[int]:
    return sorted({p["workers"] for p in study.values()})


if __name__ == "__main__":
    main()
