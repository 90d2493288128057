"""The training speed-up table's FIFO pairs on the rack measured again on the graph engine (BMv2).

bench.training runs experiments/training-speedup.toml with the hosts' training loop (workers/iteration.py).
The same jobs as execution graphs (gradswitch/experiment/training_graph.py: the spec's model, scale,
emulated V100s, sync, buckets; a forward and a backward node per layer, an all-reduce per DDP bucket)
run on the hosts' graph engine (workers/graph_engine.py), ring all-reduce or NetReduce in the switches,
on one rack network of BMv2 switches at the spec's 20 Mb/s, computation dilated by the spec's D = 4.
Per run and repetition (seeds 1..R, as the compare's): samples/s of the emulated cluster (N x batch
over the median iteration after the warm-up, each iteration from its first forward node to the next
one's) and whether every sum was exact; per run the median over the repetitions that were not
machine-bound, with [min, max], against the training loop's figure in bench/results/training-speedup.json
and its own spread; NetReduce / ring per model, against the table's ratio. Writes
bench/results/training-graph.json (table `training-graph` in docs/performance.md). Needs root, BMv2,
Mininet.

    python -m bench.training_graph [--models resnet50,vgg16,bert-base] [--repeat 3] [--out runs/bench-training-graph]
                                   [--bmv2 PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import RESULTS, Limits, bmv2_option, save, use_bmv2
from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.graph_run import run_graph_on
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.training_graph import spec_training_graph
from gradswitch.testbed import Testbed
from mininet_topos.network import NetworkOptions
from workload.generators import iteration_times

SPEC = Path(__file__).parent.parent / "experiments" / "training-speedup.toml"
MODELS = ("resnet50", "vgg16", "bert-base")
ALGOS = ("ring", "netreduce")
LINKS = "idle while the emulated GPUs compute: the machine is judged by its idle CPU"


def runs(models: list[str]) -> list[ExperimentSpec]:
    """The speed-up spec's FIFO runs on the rack for these models and algorithms."""
    by_label = {r.label: r for r in load_spec(SPEC).runs}
    return [by_label[f"{m}-rack-{a}-fifo"] for m in models for a in ALGOS]


def repetition(net: Testbed, spec: ExperimentSpec, seed: int, out: Path) -> dict[str, Any]:
    run_spec, graph, dilation = spec_training_graph(replace(spec, seed=seed), spec.iterations)
    report = run_graph_on(net, run_spec, graph, out / f"{spec.label}-seed{seed}", dilation=dilation)
    assert spec.emulate is not None
    times = iteration_times(graph, report.run)  # the emulated cluster's seconds
    iteration_s = statistics.median(times[spec.warmup:])
    # With computation the links idle by design: the graph engine judges the machine by its idle CPU alone.
    return {"seed": seed, "iteration_s_real": iteration_s, "samples_per_s_real": spec.workers * spec.emulate.batch /
            iteration_s, "iterations_s_real": list(times), "resent_packets": report.resent_packets,
            "checked": report.checked, "errors": list(report.errors),
            **Limits(None, report.cpu_idle, LINKS).figures(), "busiest_link_load": report.busiest_link_load}


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summary(spec: ExperimentSpec, reps: list[dict[str, Any]], table: dict[str, Any]) -> dict[str, Any]:
    usable = [r["samples_per_s_real"] for r in reps if not r["machine_bound"] and r["checked"]]
    loop = table["runs"][spec.label]
    loop_spread = loop["spread"]["samples_per_s_real"]
    row: dict[str, Any] = {"run": spec.label, "repetitions": reps, "usable": len(usable),
                           "exact": all(r["checked"] for r in reps),
                           "samples_per_s_real_loop": {k: loop_spread[k] for k in ("min", "median", "max")}}
    if usable:
        s = spread(usable)
        row["samples_per_s_real"] = s
        row["over_loop"] = s["median"] / loop_spread["median"]
        # Within the repetitions' spread: the two ranges overlap.
        row["within_spread"] = s["min"] <= loop_spread["max"] and loop_spread["min"] <= s["max"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("runs/bench-training-graph"))
    bmv2_option(ap)
    args = ap.parse_args()
    use_bmv2(args)
    table = json.loads((RESULTS / "training-speedup.json").read_text())["speedup"]
    specs = runs([m for m in args.models.split(",") if m])
    out = args.out.resolve()
    reps: dict[str, list[dict[str, Any]]] = {s.label: [] for s in specs}
    with Testbed(topology_for(specs[0]), NetworkOptions(run_dir=out / "net")) as net:
        for seed in range(1, args.repeat + 1):  # round by round, as a compare runs its repetitions
            for spec in specs:
                r = repetition(net, spec, seed, out)
                reps[spec.label].append(r)
                print(f"  {spec.label} seed {seed}: {r['samples_per_s_real']:.1f} samples/s (emulated), "
                      f"exact {r['checked']}; busiest link {r['busiest_link_load']:.0%} loaded, "
                      f"CPU {r['cpu_idle']:.0%} idle: "
                      f"{r['machine_bound_reason'] or 'not machine-bound'}", flush=True)
    rows = [summary(s, reps[s.label], table) for s in specs]
    ratios = []
    loop_ratios = {(r["model"], r["what"]): r for r in table["ratios"] if r["topo"] == "rack"}
    for m in sorted({s.workload for s in specs}, key=list(MODELS).index):
        ring, nr = (next(r for r in rows if r["run"] == f"{m}-rack-{a}-fifo") for a in ALGOS)
        if "samples_per_s_real" not in ring or "samples_per_s_real" not in nr:
            continue
        loop = loop_ratios[(m, "NetReduce / ring (fifo)")]
        ratios.append({"model": m, "ratio": nr["samples_per_s_real"]["median"] / ring["samples_per_s_real"]["median"],
                       "ratio_min": nr["samples_per_s_real"]["min"] / ring["samples_per_s_real"]["max"],
                       "ratio_max": nr["samples_per_s_real"]["max"] / ring["samples_per_s_real"]["min"],
                       "loop_ratio": loop["ratio"], "loop_ratio_min": loop["ratio_min"],
                       "loop_ratio_max": loop["ratio_max"]})
    for r in rows:
        got = r.get("samples_per_s_real")
        print(f"{r['run']:<28} graph {got['median']:.1f} [{got['min']:.1f}-{got['max']:.1f}]" if got else
              f"{r['run']:<28} graph: no usable repetition", end="")
        loop = r["samples_per_s_real_loop"]
        print(f"  loop {loop['median']:.1f} [{loop['min']:.1f}-{loop['max']:.1f}]"
              + (f"  {r['over_loop']:.3f}x, within spread: {r['within_spread']}" if got else ""))
    for q in ratios:
        print(f"{q['model']}: NetReduce / ring {q['ratio']:.3f} [{q['ratio_min']:.3f}-{q['ratio_max']:.3f}] on the "
              f"graph engine, {q['loop_ratio']:.3f} [{q['loop_ratio_min']:.3f}-{q['loop_ratio_max']:.3f}] on the loop")
    path = save("training-graph", {
        "what": "training-speedup.toml's FIFO runs on the rack (4 emulated V100s, 20 Mb/s, D = 4) as execution graphs "
                "on the hosts' graph engine, against the training loop's figures (training-speedup.json)",
        "bottleneck": "see each repetition's busiest_link_load and cpu_idle; machine-bound ones are left out",
        "repeat": args.repeat, "runs": rows, "ratios": ratios}, bmv2_log_level="info")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
