"""The training speed-up table's ring, NetReduce and parameter-server runs measured again on the graph engine (BMv2).

bench.training runs gradswitch/specs/training-speedup.toml with the hosts' training loop
(gradswitch/hosts/iteration.py).
The same jobs as execution graphs (gradswitch/experiment/training_graph.py: the spec's model, scale,
emulated V100s, sync, buckets or priority partitions; a forward and a backward node per layer, an all-reduce
per DDP bucket or ByteScheduler partition, started by its dependencies when the training loop starts it)
run on the hosts' graph engine (gradswitch/hosts/graph_engine.py), ring all-reduce, NetReduce in the switches or a
parameter server (--algos ring,ps: gradswitch/hosts/collectives/ps.py, one server on a host of its own),
on one network of BMv2 switches per topology (the rack; the 2x2 leaf-spine with --topos) at the spec's 20 Mb/s,
computation dilated by the spec's D = 4.
Per run and repetition (seeds 1..R, as the compare's): samples/s of the emulated cluster (N x batch
over the median iteration after the warm-up, each iteration from its first forward node to the next
one's, the last to when a next forward could start, as the loop counts them) and whether every sum was
exact. Each repetition's job also runs on the training loop, on the same network right after it
(`gradswitch.experiment.runner.run_on`, bench.training's runs), so the two engines are compared on the
same machine the same day. Per run the median over the repetitions that were not machine-bound, with
[min, max], for both engines, and against the training loop's figure in the table
(bench/results/training-speedup.json, measured on another day) with its spread; NetReduce / ring per
model, topology and scheduling on each (PS / ring with --algos ring,ps). Writes
bench/results/training-graph.json (table `training-graph` in docs/performance.md).
Needs root, BMv2, Mininet.

    python -m bench.training_graph [--models resnet50,vgg16,bert-base] [--topos rack] [--scheduling fifo]
                                   [--algos ring,netreduce] [--repeat 3] [--bw MBPS]
                                   [--out runs/bench-training-graph] [--bmv2 PATH]

At another rate (--bw: the same emulated cluster, D following the rate, so the emulated samples/s are comparable
with the table's), with other topologies (--topos rack,leafspine) or the table's priority runs (--scheduling
priority, or fifo,priority) the figures go to
bench/results/training-graph[-<algorithms but ring>][-<topologies>][-<schedulings>][-<rate>mbps].json (the
algorithms named unless they are ring and NetReduce: training-graph-ps.json for --algos ring,ps).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.common import RESULTS, Limits, bmv2_option, save, use_bmv2
from gradswitch.experiment.compare import headline, load_spec
from gradswitch.experiment.graph_experiment import run_workload_on
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.runner import run_on
from gradswitch.experiment.spec import Engine, ExperimentSpec
from gradswitch.experiment.stats import spread
from gradswitch.experiment.tables.reading import load
from gradswitch.experiment.testbed import Testbed
from gradswitch.experiment.training_graph import ideal_link_load, spec_training_graph
from gradswitch.net.network import NetworkOptions
from gradswitch.workload.generators import iteration_times
from gradswitch.workload.job import Scheduling

SPEC = Path(__file__).parent.parent / "gradswitch" / "specs" / "training-speedup.toml"
MODELS = ("resnet50", "vgg16", "bert-base")
TOPOS = ("rack", "leafspine")
ALGOS = ("ring", "ps", "netreduce")
DEFAULT_ALGOS = ("ring", "netreduce")  # training-graph*.json; with ps the name says it (result_name)
RATIO_NAMES = {"netreduce": "NetReduce", "ps": "PS"}  # the table's ratios: "NetReduce / ring (fifo)", "PS / ring ..."
SCHEDULINGS = tuple(Scheduling.names())  # fifo (DDP buckets), priority (ByteScheduler partitions)


def runs(models: list[str], bw_mbps: float | None = None, topos: tuple[str, ...] = ("rack",),
         schedulings: tuple[str, ...] = ("fifo",), algos: tuple[str, ...] = DEFAULT_ALGOS) -> list[ExperimentSpec]:
    """The speed-up spec's runs of these algorithms (ring, ps, netreduce) on these topologies for these models and
    schedulings (topology by topology); at another link rate (the same emulated cluster: its dilation follows the
    rate), if given."""
    by_label = {r.label: r for r in load_spec(SPEC).runs}
    specs = [by_label[f"{m}-{t}-{a}-{s}"] for t in topos for s in schedulings for m in models for a in algos]
    return specs if bw_mbps is None else [s.but(bw_mbps=bw_mbps) for s in specs]


def result_name(specs: list[ExperimentSpec]) -> str:
    """training-graph for the rack's FIFO ring and NetReduce runs at the spec's rate; the algorithms but ring, the
    topologies, the schedulings and the rate named otherwise (training-graph-ps, training-graph-10mbps,
    training-graph-leafspine-10mbps, training-graph-priority-10mbps)."""
    default = load_spec(SPEC).runs[0].network.bw_mbps
    rate = specs[0].network.bw_mbps
    algos = [a for a in dict.fromkeys(str(s.algorithm.algo) for s in specs) if a != "ring"]
    topos = list(dict.fromkeys(s.network.topo for s in specs))
    schedulings = list(dict.fromkeys(str(s.algorithm.scheduling) for s in specs))
    return ("training-graph" + ("" if algos == ["netreduce"] else "-" + "-".join(algos))
            + ("" if topos == ["rack"] else "-" + "-".join(topos))
            + ("" if schedulings == ["fifo"] else "-" + "-".join(schedulings))
            + ("" if rate == default else f"-{rate:g}mbps"))


def repetition(net: Testbed, spec: ExperimentSpec, seed: int, out: Path) -> dict[str, Any]:
    run_spec, graph, dilation = spec_training_graph(spec.but(seed=seed), spec.measurement.iterations)
    report = run_workload_on(net, run_spec, graph, out / f"{spec.label}-seed{seed}", dilation=dilation)
    assert spec.workload.emulate is not None
    times = iteration_times(graph, report.run)  # the emulated cluster's seconds
    iteration_s = statistics.median(times[spec.measurement.warmup:])
    # Judged as the loop's runs are: idle CPU, and the busiest link against the ideal iteration's load.
    limits = Limits(report.busiest_link_load, report.cpu_idle, ideal_link_load=ideal_link_load(spec, net.topo))
    return {"seed": seed, "iteration_s_real": iteration_s,
            "samples_per_s_real": spec.network.workers * spec.workload.emulate.batch /
            iteration_s, "iterations_s_real": list(times), "resent_packets": report.resent_packets,
            "checked": report.checked, "errors": list(report.errors), **limits.figures()}


def loop_repetition(net: Testbed, spec: ExperimentSpec, seed: int, out: Path) -> dict[str, Any]:
    """The same job on the training loop (gradswitch/hosts/iteration.py), as bench.training runs it."""
    h = headline(run_on(net, spec.but(seed=seed, engine=Engine.LOOP), out / f"{spec.label}-loop-seed{seed}",
                        progress=False))
    return {"seed": seed, "iteration_s_real": h["iteration_s"], "samples_per_s_real": h["samples_per_s_real"],
            "resent_packets": h["retransmissions"], "checked": bool(h.get("correct")) and h["ok"],
            "busiest_link_load": h.get("busiest_link_load"), "ideal_link_load": h.get("ideal_link_load"),
            "cpu_idle": h.get("cpu_idle"), "machine_bound": bool(h.get("machine_bound")),
            "machine_bound_reason": h.get("machine_bound_reason")}


def usable(reps: list[dict[str, Any]]) -> list[float]:
    """Samples/s of the repetitions that count: exact and not machine-bound."""
    return [r["samples_per_s_real"] for r in reps if not r["machine_bound"] and r["checked"]]


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    """Within the repetitions' spread: the two ranges overlap."""
    return a["min"] <= b["max"] and b["min"] <= a["max"]


def summary(spec: ExperimentSpec, reps: list[dict[str, Any]], loop_reps: list[dict[str, Any]],
            table: dict[str, Any]) -> dict[str, Any]:
    graph, today = usable(reps), usable(loop_reps)
    loop_spread = table["runs"][spec.label]["spread"]["samples_per_s_real"]
    table_loop = {k: loop_spread[k] for k in ("min", "median", "max")}
    row: dict[str, Any] = {"run": spec.label, "model": spec.workload.workload, "topo": spec.network.topo,
                           "algo": str(spec.algorithm.algo),
                           "scheduling": str(spec.algorithm.scheduling),
                           "repetitions": reps, "usable": len(graph),
                           "exact": all(r["checked"] for r in reps), "samples_per_s_real_loop": table_loop,
                           "loop_repetitions": loop_reps, "loop_usable": len(today),
                           "loop_exact": all(r["checked"] for r in loop_reps)}
    if today:
        row["samples_per_s_real_loop_today"] = spread(today)
        row["loop_today_over_table"] = row["samples_per_s_real_loop_today"]["median"] / table_loop["median"]
    if graph:
        s = spread(graph)
        row["samples_per_s_real"] = s
        row["over_loop"] = s["median"] / table_loop["median"]
        row["within_spread"] = overlap(s, table_loop)
        if today:
            row["over_loop_today"] = s["median"] / row["samples_per_s_real_loop_today"]["median"]
            row["within_spread_today"] = overlap(s, row["samples_per_s_real_loop_today"])
    return row


def ratio_figures(ring: dict[str, float], nr: dict[str, float]) -> tuple[float, float, float]:
    """An algorithm's over ring of two runs' spreads: medians, smallest over largest, largest over smallest."""
    return nr["median"] / ring["median"], nr["min"] / ring["max"], nr["max"] / ring["min"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--topos", default="rack", help=f"of {', '.join(TOPOS)} (comma-separated): one network each")
    ap.add_argument("--scheduling", default="fifo",
                    help=f"of {', '.join(SCHEDULINGS)} (comma-separated): DDP buckets, ByteScheduler's partitions")
    ap.add_argument("--algos", default=",".join(DEFAULT_ALGOS),
                    help=f"of {', '.join(ALGOS)} (comma-separated; ring is each ratio's baseline)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bw", type=float, default=None, metavar="MBPS",
                    help="every link at this rate instead of the spec's 20 Mb/s (the same emulated cluster, its "
                         "dilation D following the rate): where the machine keeps up with NetReduce")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-training-graph"))
    bmv2_option(ap)
    args = ap.parse_args()
    use_bmv2(args)
    table_doc = load(RESULTS, "training-speedup.json")
    table = table_doc["speedup"]
    topos = tuple(t for t in args.topos.split(",") if t)
    if bad := [t for t in topos if t not in TOPOS]:
        ap.error(f"--topos {','.join(bad)}: the speed-up spec's topologies are {', '.join(TOPOS)}")
    models = [m for m in args.models.split(",") if m]
    if bad := [m for m in models if m not in MODELS]:
        ap.error(f"--models {','.join(bad)}: the speed-up spec's models are {', '.join(MODELS)}")
    schedulings = tuple(s for s in args.scheduling.split(",") if s)
    bad = [s for s in schedulings if s not in SCHEDULINGS] if schedulings else [args.scheduling]
    if bad:
        ap.error(f"--scheduling {','.join(bad)}: the speed-up spec's schedulings are {', '.join(SCHEDULINGS)}")
    algos = tuple(a for a in args.algos.split(",") if a)
    if bad := [a for a in algos if a not in ALGOS]:
        ap.error(f"--algos {','.join(bad)}: the speed-up spec's algorithms are {', '.join(ALGOS)}")
    if "ring" not in algos or len(algos) < 2:
        ap.error(f"--algos {args.algos}: ring and at least one of {', '.join(RATIO_NAMES)} (each ratio is over ring)")
    specs = runs(models, args.bw, topos, schedulings, algos)
    out = args.out.resolve()
    reps: dict[str, list[dict[str, Any]]] = {s.label: [] for s in specs}
    loop_reps: dict[str, list[dict[str, Any]]] = {s.label: [] for s in specs}
    for topo in topos:
        measure([s for s in specs if s.network.topo == topo], args.repeat, out / topo, reps, loop_reps)
    rows = [summary(s, reps[s.label], loop_reps[s.label], table) for s in specs]
    ratios = speedups(rows, table, algos)
    report(rows, ratios)
    spec = specs[0]
    path = save(result_name(specs), {
        "what": f"training-speedup.toml's {' and '.join(schedulings)} {', '.join(algos)} runs on {' and '.join(topos)} "
                f"(4 emulated V100s, {spec.network.bw_mbps:g} Mb/s, D = {spec.dilation:g}) as execution graphs "
                "on the hosts' graph engine, against the training loop's runs of the same jobs on the same network "
                "right after each (today) and against the loop's figures in training-speedup.json (table)",
        "table_when": table_doc["when"],
        "bw_mbps": spec.network.bw_mbps, "dilation": spec.dilation, "topos": list(topos),
        "schedulings": list(schedulings), "algos": list(algos),
        "bottleneck": "see each repetition's busiest_link_load (against its ideal_link_load) and cpu_idle, judged "
                      "alike on both engines; machine-bound ones are left out",
        "repeat": args.repeat, "runs": rows, "ratios": ratios}, engines=[Engine.LOOP, Engine.GRAPH],
        bmv2_log_level="info")
    print(f"wrote {path}")


def measure(specs: list[ExperimentSpec], repeat: int, out: Path, reps: dict[str, list[dict[str, Any]]],
            loop_reps: dict[str, list[dict[str, Any]]]) -> None:
    """Every spec (one topology) on one network, round by round as a compare runs its repetitions: the graph
    engine's repetition, then the training loop's of the same job."""
    widest = max(specs, key=lambda s: s.hosts_needed())  # a parameter server's run needs a host more
    with Testbed(topology_for(widest), NetworkOptions(run_dir=out / "net")) as net:
        for seed in range(1, repeat + 1):
            for spec in specs:
                r = repetition(net, spec, seed, out)
                reps[spec.label].append(r)
                print(f"  {spec.label} seed {seed}: {r['samples_per_s_real']:.1f} samples/s (emulated), "
                      f"exact {r['checked']}; busiest link {r['busiest_link_load']:.0%} loaded, "
                      f"CPU {r['cpu_idle']:.0%} idle: "
                      f"{r['machine_bound_reason'] or 'not machine-bound'}", flush=True)
                q = loop_repetition(net, spec, seed, out)
                loop_reps[spec.label].append(q)
                idle = "CPU idle unknown" if q["cpu_idle"] is None else f"CPU {q['cpu_idle']:.0%} idle"
                print(f"  {spec.label} seed {seed} on the training loop: {q['samples_per_s_real']:.1f} samples/s "
                      f"(emulated), exact {q['checked']}, {q['resent_packets']:.0f} packets resent; {idle}: "
                      f"{q['machine_bound_reason'] or 'not machine-bound'}", flush=True)


def speedups(rows: list[dict[str, Any]], table: dict[str, Any], algos: tuple[str, ...] = DEFAULT_ALGOS
             ) -> list[dict[str, Any]]:
    """Each algorithm but ring over ring (NetReduce / ring, PS / ring) per model, topology and scheduling on the
    graph engine and the loop today (where both runs had usable repetitions), beside the table's."""
    ratios = []
    loop_ratios = {(r["model"], r["topo"], r["what"]): r for r in table["ratios"]}
    pairs = {(r["model"], r["topo"], r["scheduling"]) for r in rows}
    for m, topo, sched, algo in sorted(((*p, a) for p in pairs for a in algos if a != "ring"), key=lambda p: (
            TOPOS.index(p[1]), SCHEDULINGS.index(p[2]), MODELS.index(p[0]), ALGOS.index(p[3]))):
        ring, nr = (next(r for r in rows if r["run"] == f"{m}-{topo}-{a}-{sched}") for a in ("ring", algo))
        loop = loop_ratios[(m, topo, f"{RATIO_NAMES[algo]} / ring ({sched})")]
        q: dict[str, Any] = {"model": m, "topo": topo, "scheduling": sched, "algo": algo, "loop_ratio": loop["ratio"],
                             "loop_ratio_min": loop["ratio_min"], "loop_ratio_max": loop["ratio_max"]}
        if "samples_per_s_real" in ring and "samples_per_s_real" in nr:
            q.update(zip(("ratio", "ratio_min", "ratio_max"),
                         ratio_figures(ring["samples_per_s_real"], nr["samples_per_s_real"]), strict=True))
        if "samples_per_s_real_loop_today" in ring and "samples_per_s_real_loop_today" in nr:
            q.update(zip(("loop_today_ratio", "loop_today_ratio_min", "loop_today_ratio_max"),
                         ratio_figures(ring["samples_per_s_real_loop_today"], nr["samples_per_s_real_loop_today"]),
                         strict=True))
        ratios.append(q)
    return ratios


def report(rows: list[dict[str, Any]], ratios: list[dict[str, Any]]) -> None:
    """What the run measured, one line a run and a line a ratio."""
    for r in rows:
        got = r.get("samples_per_s_real")
        print(f"{r['run']:<33} graph {got['median']:.1f} [{got['min']:.1f}-{got['max']:.1f}]" if got else
              f"{r['run']:<33} graph: no usable repetition", end="")
        today = r.get("samples_per_s_real_loop_today")
        print(f"  loop today {today['median']:.1f} [{today['min']:.1f}-{today['max']:.1f}]" if today else
              "  loop today: no usable repetition", end="")
        if got and today:
            print(f" ({r['over_loop_today']:.3f}x, overlap: {r['within_spread_today']})", end="")
        loop = r["samples_per_s_real_loop"]
        print(f"  table's loop {loop['median']:.1f} [{loop['min']:.1f}-{loop['max']:.1f}]"
              + (f" ({r['over_loop']:.3f}x, overlap: {r['within_spread']})" if got else ""))
    for q in ratios:
        graph = (f"{q['ratio']:.3f} [{q['ratio_min']:.3f}-{q['ratio_max']:.3f}] on the graph engine" if "ratio" in q
                 else "none on the graph engine")
        today = (f"{q['loop_today_ratio']:.3f} [{q['loop_today_ratio_min']:.3f}-{q['loop_today_ratio_max']:.3f}] on "
                 "the loop today" if "loop_today_ratio" in q else "none on the loop today")
        print(f"{q['model']} on {q['topo']} ({q['scheduling']}): {RATIO_NAMES[q.get('algo', 'netreduce')]} / ring "
              f"{graph}, {today}, "
              f"{q['loop_ratio']:.3f} [{q['loop_ratio_min']:.3f}-{q['loop_ratio_max']:.3f}] in the table's loop runs")


if __name__ == "__main__":
    main()
