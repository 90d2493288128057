"""The training loop against the graph engine on ns-3, through the product's own run (`engine = loop` and `engine =
graph` of the same spec, gradswitch.experiment.runner.run_experiment): the graph engine is to take over the loop's
runs (one engine for every workload), so each run's results.json must agree.

Runs: every run of gradswitch/specs/training-speedup.toml on the simulator (3 models x rack and leaf-spine x ring, PS
and NetReduce x FIFO buckets and priority partitions, 4 emulated V100s, D = 4), and the scaling study's points
(bench/scaling.py scaling_spec: the fat tree at 100 Gb/s, ring, PS, NetReduce hierarchical and flat) at `--workers`;
the DLCP-drop training runs the docs publish (`dlcp-drop`: gradswitch/specs/dlcp-contention.toml's runs with
`drop`, two VGG-16 ring jobs and 4 bulk TCP streams on a 2x2 leaf-spine at 10 Mb/s, on the simulator; and the
scaling study's DLCP runs with `drop`, bench/scaling.py dlcp_runs, two ResNet-50 jobs under 16 bulk streams, at
`--workers` instead of the study's 64), whose rows also carry the switches' trimmed packets, the zero-filled
packets, the largest relative error and the retransmissions of both engines. A DLCP run agrees when its samples/s
are within 1 % and both engines reach the same outcome (a check that fails on the loop, its error over the job's
max_relative_error, must fail on the graph engine too); `drops_graph_over_loop` compares the trimmed packets
(which packets are droppable differs packet by packet: the engines' data differ, docs/dlcp.md).
And (`allreduce`) the all-reduce runs without emulate whose ns-3 figures docs/performance.md publishes:
bench.crossval's (512 KiB of synthetic gradient, 6 iterations, `rack` and the 2x2 leaf-spine at 8 Mb/s, N = 2, 4, 8,
ring, PS and NetReduce, with the testbed's measured costs, bench/results/testbed-costs.json).
Per run: both engines' median iteration (simulated seconds), samples/s of the emulated cluster, exposed communication,
bytes on the wire, outcome and check, and the simulator's wall seconds (the machine is shared while it runs:
bench.scaling_graph and docs/performance.md judge the engines' speed). A run agrees when its samples/s (without
emulate: iterations per second, 1 / median iteration) are within 1 % (the judgement for the simulator, whose runs do
not vary) and both are checked and ok; bytes on the wire are reported, equal or not. The simulator's runs are
deterministic, so each is run once; but for the runs in SWEPT, whose figure their loss events set (which packets
overflow a queue, which timeout fires): a change of the link rate by 0.1-0.2 %, which the dilation undoes, moves such
a run on either engine by more than the judgement, so each runs on both engines at every rate of its Sweep and is
judged by the graph engine's median within the loop's [min, max] over them (and the same outcome at every rate), its
row keeping every rate's figures (`sweep`).

Faults (`--only faults`): the worker's faults docs/faults.md publishes from the loop on ns-3 (bench/sim_faults.py's
leaf-spine rows of bench/results/sim-faults.json: a worker crash and a slow worker, each at its published time, per
published seed) run on both engines. Such a run agrees when its samples/s are within 1 % and both engines end it
alike: the same outcome, the same iterations completed and the same record of the fault (outcome, time, iterations
lost, detail); each row keeps the published figures (iterations completed, outcome) it is a re-run of.

Writes bench/results/engines-sim.json; a run of some points keeps the file's other rows.

    python -m bench.engines_sim [--only speedup|scaling|dlcp-drop|allreduce|faults] [--workers 8,16]
                                [--models resnet50,vgg16,bert-base] [--algos ring,ps,netreduce-hier,netreduce-flat]
                                [--runs RUN,...] [--name NAME]
    python -m bench.engines_sim --merge NAME   # NAME.json's rows into engines-sim.json
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import ENGINES_TOLERANCE, RESULTS, Limits, save
from bench.crossval import DEFAULT_BW_MBPS, allreduce_specs, simulated
from bench.scaling import dlcp_runs, scaling_spec
from bench.sim_faults import Fabric, fabric_spec
from bench.testbed_costs import COSTS, load_costs
from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.runner import run_experiment
from gradswitch.experiment.shipped_specs import shipped_spec
from gradswitch.experiment.spec import Backend, Engine, ExperimentSpec
from gradswitch.experiment.stats import spread
from gradswitch.experiment.tables.reading import load
from gradswitch.topology.faults import parse_fault
from gradswitch.version import code_version

NAME = "engines-sim"
TOLERANCE = ENGINES_TOLERANCE  # bench/common.py
SCALING_ALGOS = ("ring", "ps", "netreduce-hier", "netreduce-flat")
MODELS = ("resnet50", "vgg16", "bert-base")
FAULT_CASES = ("worker-crash", "slow-worker")  # bench/sim_faults.py's cases of a worker's fault
FAULT_FIGURES = ("fault", "outcome", "injected_s", "time_to_detect_s", "iterations_lost", "job_stopped_s", "detail")


@dataclass(frozen=True)
class Sweep:
    """A run whose figure its loss events set, which the engines' small differences in timing move: it is run on
    both engines with its link rate (`bw_mbps`) times each of `factors` (the first 1: the spec's own), a change the
    dilation undoes (the emulated cluster's real time is the same; the simulated events move by nanoseconds to
    microseconds, enough to change which packets overflow a queue), and judged by the spread (judge_sweep)."""

    factors: tuple[float, ...]
    why: str


# The runs judged over a Sweep, and why (measured: their rows' `sweep`, and docs/performance.md)
SWEPT = {
    "dlcp-contention-drop": Sweep(
        (1.0, 1.001, 0.999, 1.002, 0.998),
        "two rings and 4 bulk TCP streams overflow FIFO queues; each loss waits for a 220 ms timeout"),
    "scaling-dlcp-priority+drop-n16": Sweep(
        (1.0, 0.999, 0.998),  # its 100 Gb/s is the most a link may be
        "about 120,000 packets trimmed and 33,000 resent per run; which ones differs between the engines (each "
        "generates its own data) and with the moments the queues fill"),
}


def allreduce_runs() -> list[ExperimentSpec]:
    """bench.crossval's all-reduce runs on the simulator, as docs/performance.md publishes them (its defaults)."""
    costs = load_costs(COSTS)
    runs = allreduce_specs(["rack", "leafspine"], [2, 4, 8], DEFAULT_BW_MBPS, 512 << 10, 6)
    return [simulated(r, costs) for r in runs]


def speedup_runs(models: tuple[str, ...]) -> list[ExperimentSpec]:
    path = shipped_spec("training-speedup")
    assert path is not None, "gradswitch/specs/training-speedup.toml is shipped"
    spec = load_spec(path)
    return [r.but(backend=Backend.NS3) for r in spec.runs if r.workload.workload in models]


def dlcp_drop_runs(workers: tuple[int, ...]) -> list[ExperimentSpec]:
    """gradswitch/specs/dlcp-contention.toml's runs with DLCP dropping, on the simulator; the scaling study's DLCP
    runs with dropping at each of `workers`."""
    path = shipped_spec("dlcp-contention")
    assert path is not None, "gradswitch/specs/dlcp-contention.toml is shipped"
    contention = [r.but(backend=Backend.NS3, name=f"dlcp-contention-{r.name}") for r in load_spec(path).runs
                  if r.transport.dlcp.drop]
    study = [s.but(workers=n, name=f"scaling-{s.name}-n{n}") for n in workers for s in dlcp_runs()
             if s.transport.dlcp.drop]
    return contention + study


def scaling_runs(models: tuple[str, ...], workers: tuple[int, ...], algos: tuple[str, ...] = SCALING_ALGOS
                 ) -> list[ExperimentSpec]:
    return [scaling_spec(m, n, a).but(iterations=3) for m in models for n in workers for a in algos]


def fault_runs() -> list[tuple[ExperimentSpec, dict[str, Any]]]:
    """The worker faults bench/results/sim-faults.json publishes from the loop on the leaf-spine: each its spec with
    the fault, and the published figures it re-runs."""
    published = load(RESULTS, "sim-faults.json")
    iterations = int(published["iterations"][str(Fabric.LEAFSPINE)])
    out = []
    for run in published["runs"]:
        if run["fabric"] != str(Fabric.LEAFSPINE) or run["case"] not in FAULT_CASES:
            continue
        base = fabric_spec(Fabric.LEAFSPINE, iterations, int(run["seed"]), float(published["scale"]))
        spec = base.but(faults=(parse_fault(run["fault"]),),
                        name=f"sim-faults-{run['fabric']}-{run['case']}-seed{run['seed']}")
        out.append((spec, {k: run[k] for k in ("fault", "seed", "completed", "outcome", "iterations_lost",
                                               "detail")}))
    return out


def engine_figures(spec: ExperimentSpec, engine: Engine, out: Path) -> dict[str, Any]:
    """One engine's run of the spec: its figures, or the one line that stopped it."""
    started = time.monotonic()
    try:
        r = run_experiment(spec.but(engine=engine), out / f"{spec.label}-{engine}", progress=False)
    except Exception as e:  # a run that cannot be is a row saying why, not the end of the benchmark
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
    training = r["training"] or {}
    extra = r["headline_extra"]
    dlcp = {"dlcp_dropped": extra.get("dlcp_dropped"), "zero_filled_packets": extra.get("zero_filled_packets"),
            "max_relative_error": extra.get("max_relative_error"),
            "retransmissions": r["retransmissions"]} if spec.transport.dlcp.drop else {}
    return {**dlcp, "outcome": r["outcome"], "ok": r["ok"], "check": r["check"], "median_s": r["summary"]["median_s"],
            "samples_per_s_real": training.get("samples_per_s_real"), "exposed_comm_s": training.get("exposed_comm_s"),
            "overlap": training.get("overlap"), "bytes_on_wire": r["bytes_on_wire"],
            "simulator_wall_s": r["simulator"]["wall_s"], "iterations_done": r["summary"]["iterations_done"],
            "fault_outcome": r.get("fault_outcome"),
            "faults": [{k: f.get(k) for k in FAULT_FIGURES} for f in r.get("faults") or []],
            **Limits.simulated_figures(r["headline_extra"].get("busiest_link_load")),
            "run_wall_s": time.monotonic() - started}


def judge_sweep(loop: list[dict[str, Any]], graph: list[dict[str, Any]]) -> dict[str, Any]:
    """Both engines' figures at each value of a Sweep (in the same order): the spread of each engine's samples/s,
    whether the graph engine's median lies within the loop's [min, max], whether the medians are within TOLERANCE,
    whether every value ended alike on both engines (the same outcome), and `agrees`: all of those but the
    TOLERANCE of the medians."""
    if not loop or len(loop) != len(graph):
        raise ValueError(f"a sweep's figures: {len(loop)} loop and {len(graph)} graph runs; give one per value")
    if any(f.get("samples_per_s_real") is None for f in [*loop, *graph]):
        return {"agrees": False, "why": "a run without samples/s (failed)"}
    lo, gr = (spread(float(f["samples_per_s_real"]) for f in runs) for runs in (loop, graph))
    in_range = lo["min"] <= gr["median"] <= lo["max"]
    ratio = gr["median"] / lo["median"]
    same_outcomes = all(a.get("outcome") == b.get("outcome") for a, b in zip(loop, graph, strict=True))
    return {"loop_samples_per_s": lo, "graph_samples_per_s": gr, "graph_median_over_loop_median": ratio,
            "graph_median_in_loop_range": in_range, "within_1pct_of_loop_median": abs(ratio - 1) <= TOLERANCE,
            "same_outcomes": same_outcomes, "agrees": in_range and same_outcomes}


def swept_row(spec: ExperimentSpec, study: str, out: Path, sweep: Sweep) -> dict[str, Any]:
    """A Sweep's run: both engines at each factor; the row's `loop` and `graph` are the spec's own rate's."""
    assert spec.network.bw_mbps is not None, f"{spec.label}: a sweep scales the link rate; the spec sets none"
    per_value: list[dict[str, Any]] = []
    for factor in sweep.factors:
        v = spec.network.bw_mbps * factor
        at = spec.but(bw_mbps=v, name=f"{spec.label}-bw{factor:g}")
        loop, graph = engine_figures(at, Engine.LOOP, out), engine_figures(at, Engine.GRAPH, out)
        ratio = (graph["samples_per_s_real"] / loop["samples_per_s_real"]
                 if loop.get("samples_per_s_real") and graph.get("samples_per_s_real") else None)
        per_value.append({"factor": factor, "bw_mbps": v, "dilation": at.dilation, "loop": loop, "graph": graph,
                          "graph_over_loop": ratio})
        print(f"  {spec.label} bw_mbps x {factor:g}: graph / loop samples/s "
              f"{'-' if ratio is None else format(ratio, '.4f')}", flush=True)
    judged = judge_sweep([p["loop"] for p in per_value], [p["graph"] for p in per_value])
    own = per_value[0]
    return {**base_row(spec, study, own["loop"], own["graph"]), "code_version": code_version(),
            "graph_over_loop": judged.get("graph_median_over_loop_median"), "agrees": judged["agrees"],
            "sweep": {"key": "bw_mbps", "factors": list(sweep.factors), "why": sweep.why, **judged,
                      "per_value": per_value}}


def base_row(spec: ExperimentSpec, study: str, loop: dict[str, Any], graph: dict[str, Any]) -> dict[str, Any]:
    """A row's figures that do not judge: the run, both engines' figures, the trimmed packets' ratio, the bytes."""
    drops = (graph["dlcp_dropped"] / loop["dlcp_dropped"] if loop.get("dlcp_dropped") and
             graph.get("dlcp_dropped") is not None else None)
    return {"study": study, "run": spec.label, "workload": spec.workload.workload,
            "topo": str(spec.network.topo), "algo": str(spec.algorithm.algo),
            "scheduling": str(spec.algorithm.scheduling), "workers": spec.network.workers,
            "dilation": spec.dilation, "loop": loop, "graph": graph,
            **({"drops_graph_over_loop": drops} if spec.transport.dlcp.drop else {}),
            "same_bytes": loop.get("bytes_on_wire") == graph.get("bytes_on_wire") and "bytes_on_wire" in loop,
            "wall_graph_over_loop": graph["simulator_wall_s"] / loop["simulator_wall_s"]
            if loop.get("simulator_wall_s") and graph.get("simulator_wall_s") else None}


def row(spec: ExperimentSpec, study: str, out: Path, published: dict[str, Any] | None = None) -> dict[str, Any]:
    if (sweep := SWEPT.get(spec.label)) is not None and published is None:
        return swept_row(spec, study, out, sweep)
    loop, graph = engine_figures(spec, Engine.LOOP, out), engine_figures(spec, Engine.GRAPH, out)
    ratio = None
    if loop.get("samples_per_s_real") and graph.get("samples_per_s_real"):
        ratio = graph["samples_per_s_real"] / loop["samples_per_s_real"]
    elif spec.workload.emulate is None and loop.get("median_s") and graph.get("median_s"):
        ratio = loop["median_s"] / graph["median_s"]  # iterations per second: no samples without emulate
    within = ratio is not None and abs(ratio - 1) <= TOLERANCE
    if published is not None:  # a fault's run: ended alike on both engines (an interrupted run is not ok on either)
        ended = ("outcome", "check", "iterations_done", "fault_outcome", "faults")
        agrees = within and "outcome" in loop and all(loop.get(k) == graph.get(k) for k in ended)
    elif spec.transport.dlcp.drop:  # bounded loss: the same outcome on both (a failed check fails on both)
        agrees = within and "outcome" in loop and loop.get("outcome") == graph.get("outcome")
    else:
        agrees = within and loop.get("ok") is True and graph.get("ok") is True
    extra = {} if published is None else {"published": published}
    return {**extra, **base_row(spec, study, loop, graph), "graph_over_loop": ratio, "agrees": agrees}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("speedup", "scaling", "dlcp-drop", "allreduce", "faults"),
                        help="one study's runs (default: every one)")
    parser.add_argument("--workers", default="8,16", help="the scaling study's worker counts (default 8,16)")
    parser.add_argument("--models", default=",".join(MODELS), help="models (default: all three)")
    parser.add_argument("--algos", default=",".join(SCALING_ALGOS),
                        help=f"the scaling study's algorithms (default: {','.join(SCALING_ALGOS)})")
    parser.add_argument("--runs", help="only these runs of the chosen studies, comma-separated (their `run`)")
    parser.add_argument("--name", default=NAME, help=f"bench/results/NAME.json to write (default {NAME}): a new "
                        "name keeps the published file as it is; its rows then go into it with --merge")
    parser.add_argument("--merge", metavar="SOURCE", help=f"run nothing: put the rows of bench/results/SOURCE.json "
                        f"into {NAME}.json (each replacing its study's run), stamped with SOURCE's code version")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-engines-sim"))
    args = parser.parse_args()
    if args.merge:
        if not (RESULTS / f"{args.merge}.json").exists():
            parser.error(f"--merge {args.merge}: no bench/results/{args.merge}.json; give the --name of an earlier run")
        merge(args.merge)
        return
    models = tuple(m for m in args.models.split(",") if m)
    todo: list[tuple[str, ExperimentSpec, dict[str, Any] | None]] = []
    if args.only in (None, "speedup"):
        todo += [("training-speedup", s, None) for s in speedup_runs(models)]
    if args.only in (None, "scaling"):
        algos = tuple(a for a in args.algos.split(",") if a)
        if unknown := [a for a in algos if a not in SCALING_ALGOS]:
            parser.error(f"--algos {args.algos}: unknown {unknown[0]!r}; give some of {', '.join(SCALING_ALGOS)}")
        todo += [("scaling", s, None)
                 for s in scaling_runs(models, tuple(int(w) for w in args.workers.split(",")), algos)]
    if args.only in (None, "allreduce"):
        todo += [("allreduce", s, None) for s in allreduce_runs()]
    if args.only in (None, "dlcp-drop"):
        todo += [("dlcp-drop", s, None) for s in dlcp_drop_runs(tuple(int(w) for w in args.workers.split(",")))]
    if args.only in (None, "faults"):
        todo += [("faults", s, published) for s, published in fault_runs()]
    if args.runs:
        wanted = set(args.runs.split(","))
        if unknown := sorted(wanted - {spec.label for _, spec, _ in todo}):
            parser.error(f"--runs {args.runs}: no run {unknown[0]!r} in the chosen studies; give some of "
                         f"{', '.join(spec.label for _, spec, _ in todo)}")
        todo = [t for t in todo if t[1].label in wanted]
    path = RESULTS / f"{args.name}.json"
    kept = {(r["study"], r["run"]): r for r in load(RESULTS, path.name)["rows"]} if path.exists() else {}
    for i, (study, spec, published) in enumerate(todo, start=1):
        r = row(spec, study, args.out, published)
        kept[(study, spec.label)] = r
        ratio = f"{r['graph_over_loop']:.4f}" if r["graph_over_loop"] is not None else "-"
        walls = [r[e].get("simulator_wall_s", float("nan")) for e in ("graph", "loop")]
        print(f"[{i}/{len(todo)}] {study} {spec.label}: graph / loop samples/s {ratio}, agrees {r['agrees']}, "
              f"bytes equal {r['same_bytes']}, simulator wall s graph / loop {walls[0]:.2f} / {walls[1]:.2f}",
              flush=True)
    write(args.name, list(kept.values()))


def write(name: str, rows: list[dict[str, Any]], version: str | None = None) -> None:
    """bench/results/NAME.json: the rows, sorted, and their summary (what agrees, graph / loop's range); `version`:
    the code version it names (default this code's: the one that ran its last rows)."""
    rows = sorted(rows, key=lambda r: (r["study"], r["run"]))
    ratios = [r["graph_over_loop"] for r in rows if r["graph_over_loop"] is not None]
    summary = {"runs": len(rows), "agree": sum(r["agrees"] for r in rows),
               "same_bytes": sum(r["same_bytes"] for r in rows),
               "graph_over_loop_min": min(ratios, default=None), "graph_over_loop_max": max(ratios, default=None),
               "tolerance": TOLERANCE, "code_version": version or code_version(),
               "swept": {r["run"]: r["sweep"]["factors"] for r in rows if "sweep" in r},
               "bottleneck": "the simulated links and emulated GPUs (each row's limited_by: simulated time, "
                             "the machine does not set it)"}
    print(f"{summary['agree']} of {summary['runs']} runs agree within {TOLERANCE:.0%} (swept runs: the graph's "
          f"median within the loop's range); graph / loop samples/s {summary['graph_over_loop_min']} to "
          f"{summary['graph_over_loop_max']}; bottleneck: {summary['bottleneck']}")
    save(name, {"summary": summary, "rows": rows}, engines=[Engine.LOOP, Engine.GRAPH])


def merge(source: str) -> None:
    """The rows of bench/results/SOURCE.json (a run of some rows under --name SOURCE) into engines-sim.json, each
    replacing the row of its study and run, stamped with the code version it was measured at (SOURCE's); the file's
    own code version stays (a merge measures nothing)."""
    got = load(RESULTS, f"{source}.json")
    version = got["summary"]["code_version"]
    target = load(RESULTS, f"{NAME}.json")
    kept = {(r["study"], r["run"]): r for r in target["rows"]}
    for r in got["rows"]:
        kept[(r["study"], r["run"])] = {**r, "code_version": r.get("code_version", version)}
    write(NAME, list(kept.values()), target["summary"]["code_version"])

if __name__ == "__main__":
    main()
