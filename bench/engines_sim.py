"""The training loop against the graph engine on ns-3, through the product's own run (`engine = loop` and `engine =
graph` of the same spec, gradswitch.experiment.runner.run_experiment): the graph engine is to take over the loop's
runs (one engine for every workload), so each run's results.json must agree.

Runs: every run of gradswitch/specs/training-speedup.toml on the simulator (3 models x rack and leaf-spine x ring, PS
and NetReduce x FIFO buckets and priority partitions, 4 emulated V100s, D = 4), and the scaling study's points
(bench/scaling.py scaling_spec: the fat tree at 100 Gb/s, ring, PS, NetReduce hierarchical and flat) at `--workers`.
Per run: both engines' median iteration (simulated seconds), samples/s of the emulated cluster, exposed communication,
bytes on the wire, outcome and check, and the simulator's wall seconds (the machine is shared while it runs:
bench.scaling_graph and docs/performance.md judge the engines' speed). A run agrees when its samples/s are within 1 %
(the judgement for the simulator, whose runs do not vary) and both are checked and ok; bytes on the wire are reported,
equal or not. The simulator's runs do not vary with the seed here, so each is run once. Writes
bench/results/engines-sim.json; a run of some points keeps the file's other rows.

    python -m bench.engines_sim [--only speedup|scaling] [--workers 8,16] [--models resnet50,vgg16,bert-base]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, Limits, save
from bench.scaling import scaling_spec
from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.runner import run_experiment
from gradswitch.experiment.shipped_specs import shipped_spec
from gradswitch.experiment.spec import Backend, Engine, ExperimentSpec
from gradswitch.experiment.tables.reading import load
from gradswitch.version import code_version

NAME = "engines-sim"
TOLERANCE = 0.01  # the graph engine reproduces the loop's figures on ns-3 within 1 %
SCALING_ALGOS = ("ring", "ps", "netreduce-hier", "netreduce-flat")
MODELS = ("resnet50", "vgg16", "bert-base")


def speedup_runs(models: tuple[str, ...]) -> list[ExperimentSpec]:
    path = shipped_spec("training-speedup")
    assert path is not None, "gradswitch/specs/training-speedup.toml is shipped"
    spec = load_spec(path)
    return [r.but(backend=Backend.NS3) for r in spec.runs if r.workload.workload in models]


def scaling_runs(models: tuple[str, ...], workers: tuple[int, ...]) -> list[ExperimentSpec]:
    return [scaling_spec(m, n, a).but(iterations=3) for m in models for n in workers for a in SCALING_ALGOS]


def engine_figures(spec: ExperimentSpec, engine: Engine, out: Path) -> dict[str, Any]:
    """One engine's run of the spec: its figures, or the one line that stopped it."""
    started = time.monotonic()
    try:
        r = run_experiment(spec.but(engine=engine), out / f"{spec.label}-{engine}", progress=False)
    except Exception as e:  # a run that cannot be is a row saying why, not the end of the benchmark
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
    training = r["training"] or {}
    return {"outcome": r["outcome"], "ok": r["ok"], "check": r["check"], "median_s": r["summary"]["median_s"],
            "samples_per_s_real": training.get("samples_per_s_real"), "exposed_comm_s": training.get("exposed_comm_s"),
            "overlap": training.get("overlap"), "bytes_on_wire": r["bytes_on_wire"],
            "simulator_wall_s": r["simulator"]["wall_s"],
            **Limits.simulated_figures(r["headline_extra"].get("busiest_link_load")),
            "run_wall_s": time.monotonic() - started}


def row(spec: ExperimentSpec, study: str, out: Path) -> dict[str, Any]:
    loop, graph = engine_figures(spec, Engine.LOOP, out), engine_figures(spec, Engine.GRAPH, out)
    ratio = None
    if loop.get("samples_per_s_real") and graph.get("samples_per_s_real"):
        ratio = graph["samples_per_s_real"] / loop["samples_per_s_real"]
    agrees = ratio is not None and abs(ratio - 1) <= TOLERANCE and loop.get("ok") is True and graph.get("ok") is True
    return {"study": study, "run": spec.label, "workload": spec.workload.workload, "topo": str(spec.network.topo),
            "algo": str(spec.algorithm.algo), "scheduling": str(spec.algorithm.scheduling),
            "workers": spec.network.workers,
            "dilation": spec.dilation, "loop": loop, "graph": graph, "graph_over_loop": ratio, "agrees": agrees,
            "same_bytes": loop.get("bytes_on_wire") == graph.get("bytes_on_wire") and "bytes_on_wire" in loop,
            "wall_graph_over_loop": graph["simulator_wall_s"] / loop["simulator_wall_s"]
            if loop.get("simulator_wall_s") and graph.get("simulator_wall_s") else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("speedup", "scaling"), help="one study's runs (default: both)")
    parser.add_argument("--workers", default="8,16", help="the scaling study's worker counts (default 8,16)")
    parser.add_argument("--models", default=",".join(MODELS), help="models (default: all three)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-engines-sim"))
    args = parser.parse_args()
    models = tuple(m for m in args.models.split(",") if m)
    todo: list[tuple[str, ExperimentSpec]] = []
    if args.only in (None, "speedup"):
        todo += [("training-speedup", s) for s in speedup_runs(models)]
    if args.only in (None, "scaling"):
        todo += [("scaling", s) for s in scaling_runs(models, tuple(int(w) for w in args.workers.split(",")))]
    path = RESULTS / f"{NAME}.json"
    kept = {(r["study"], r["run"]): r for r in load(RESULTS, f"{NAME}.json")["rows"]} if path.exists() else {}
    for i, (study, spec) in enumerate(todo, start=1):
        r = row(spec, study, args.out)
        kept[(study, spec.label)] = r
        ratio = f"{r['graph_over_loop']:.4f}" if r["graph_over_loop"] is not None else "-"
        walls = [r[e].get("simulator_wall_s", float("nan")) for e in ("graph", "loop")]
        print(f"[{i}/{len(todo)}] {study} {spec.label}: graph / loop samples/s {ratio}, agrees {r['agrees']}, "
              f"bytes equal {r['same_bytes']}, simulator wall s graph / loop {walls[0]:.2f} / {walls[1]:.2f}",
              flush=True)
    rows = sorted(kept.values(), key=lambda r: (r["study"], r["run"]))
    ratios = [r["graph_over_loop"] for r in rows if r["graph_over_loop"] is not None]
    summary = {"runs": len(rows), "agree": sum(r["agrees"] for r in rows),
               "same_bytes": sum(r["same_bytes"] for r in rows),
               "graph_over_loop_min": min(ratios, default=None), "graph_over_loop_max": max(ratios, default=None),
               "tolerance": TOLERANCE, "code_version": code_version(),
               "bottleneck": "the simulated links and emulated GPUs (each row's limited_by: simulated time, "
                             "the machine does not set it)"}
    print(f"{summary['agree']} of {summary['runs']} runs agree within {TOLERANCE:.0%}; graph / loop samples/s "
          f"{summary['graph_over_loop_min']} to {summary['graph_over_loop_max']}; bottleneck: {summary['bottleneck']}")
    save(NAME, {"summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
