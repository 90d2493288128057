"""The scaling study's points bench.scaling_graph and bench.engines_sim had not re-measured, run on the graph engine
(ns-3) and compared with the loop's figures in bench/results/scaling.json.

bench.scaling published its study from the simulator's training loops (scaling.json). The graph engine (the default)
re-measured ring and hierarchical NetReduce at 8-64 workers (scaling-graph.json) and ring, PS and NetReduce at 8 and
16 (engines-sim.json). This runs the rest, in parts, through bench.scaling's own run (the same specs, the same
resumable run directories under --out; the engine is the spec's default, the graph):

- `dlcp`: the study's DLCP runs without dropping (baseline-class and priority: two ResNet-50 ring jobs of 64 workers
  on the 8.5:1 leaf-spine under 16 bulk TCP flows);
- `points`: PS and flat NetReduce at 32 and 64 workers, the three models;
- `bandwidth`: the bandwidth sweep's runs (ring and hierarchical NetReduce at 64 workers, 10, 25 and 40 Gb/s; its
  100 Gb/s points are the study's own, in scaling-graph.json);
- `n128`: every algorithm at 128 workers, the three models.

Per run, the figures the study publishes against the loop's: samples/s and the iteration (simulated seconds: the
study's one measured iteration after its warm-up), judged within 1 % (the simulator's runs do not vary with the seed:
the engines' judgement, bench.engines_sim), and its outputs checked (digest) and correct as the loop's were. DLCP's
runs also keep each engine's throughput over its baseline, the bandwidth sweep NetReduce / ring per model and rate.
Only the runs found complete under --out are compared; the parts not run are listed as not re-measured.
`--loop RUN,...` also runs those runs on today's loop (under --out/loop): a run that misses the published figure is
then compared with the loop at today's code as well (`samples_over_loop_today`), which tells the engines' difference
from a change since the study. Writes bench/results/scaling-graph-rest.json.

    python -m bench.scaling_graph_rest [--parts dlcp,points,bandwidth,n128] [--out runs/bench-scaling-graph-rest]
                                       [--shard K/N] [--compare-only] [--loop RUN,...]
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import scaling
from bench.common import ENGINES_TOLERANCE, RESULTS, Limits, save
from gradswitch.experiment.compare import completed_report
from gradswitch.experiment.spec import Engine, ExperimentSpec
from gradswitch.experiment.tables.reading import load
from gradswitch.protocol.choice import Choice

NAME = "scaling-graph-rest"
TOLERANCE = ENGINES_TOLERANCE  # bench/common.py
POINTS_WORKERS = (32, 64)
POINTS_ALGOS = ("ps", "netreduce-flat")
LARGE_WORKERS = 128


class Part(Choice):
    DLCP = "dlcp"
    POINTS = "points"
    BANDWIDTH = "bandwidth"
    N128 = "n128"


def part_runs(part: Part) -> list[ExperimentSpec]:
    """The study's specs of one part (bench.scaling's own: the default engine, the graph)."""
    models = list(scaling.MODELS)
    if part is Part.DLCP:
        return [s for s in scaling.dlcp_runs() if not s.transport.dlcp.drop]
    if part is Part.POINTS:
        return scaling.scaling_runs(models, list(POINTS_WORKERS), list(POINTS_ALGOS))
    if part is Part.BANDWIDTH:
        return scaling.bandwidth_runs(models)
    return scaling.scaling_runs(models, [LARGE_WORKERS], list(scaling.ALGOS))


@dataclass(frozen=True)
class Published:
    """What scaling.json (the loop's) published for one run."""

    samples_per_s: float
    iteration_s: float | None  # the bandwidth sweep keeps ring's alone
    correct: bool | None
    wall_s: float | None
    job2_jct_s: float | None = None  # DLCP's runs: the second job's completion


@dataclass(frozen=True)
class Row:
    """One run of the study on the graph engine against the loop's published figures."""

    part: Part
    run: str
    model: str
    workers: int
    engine: Engine
    samples_per_s: float
    samples_per_s_loop: float
    samples_over_loop: float
    iteration_s: float
    iteration_s_loop: float | None
    iteration_over_loop: float | None
    within_tolerance: bool
    check: str | None
    correct: bool | None
    correct_loop: bool | None
    agrees: bool  # within the tolerance, and correct as the loop's was
    sim_wall_s: float | None
    sim_wall_s_loop: float | None
    busiest_link_load: float | None
    job2_jct_s: float | None  # a DLCP run's second job's completion (the study's job2_jct_s); None elsewhere
    job2_jct_s_loop: float | None
    samples_per_s_loop_today: float | None = None  # the same spec on today's loop (--loop), where it was run
    samples_over_loop_today: float | None = None
    correct_loop_today: bool | None = None
    jct_s_by_job: dict[str, float] | None = None  # a DLCP run's jobs' completions, on the graph and on today's loop
    jct_s_by_job_loop_today: dict[str, float] | None = None


def published(part: Part, spec: ExperimentSpec, study: Mapping[str, Any]) -> Published | None:
    """The loop's figures for the spec's run, from scaling.json (None: it published none)."""
    if part is Part.DLCP:
        p = study["dlcp"].get(spec.label.removeprefix("dlcp-"))
    elif part is Part.BANDWIDTH:
        return _bandwidth_published(spec, study)
    else:
        p = study["points"].get(spec.label)
    if p is None or not p.get("samples_per_s"):
        return None
    return Published(p["samples_per_s"], p.get("iteration_s"), p.get("correct"), p.get("wall_s"), p.get("job2_jct_s"))


def _bandwidth_published(spec: ExperimentSpec, study: Mapping[str, Any]) -> Published | None:
    ring = str(spec.algorithm.algo) == "ring"
    for r in study["bandwidth"]:
        if r["model"] == spec.workload.workload and r["rate_mbps"] == spec.network.bw_mbps:
            return Published(r["ring_samples_per_s"] if ring else r["netreduce_samples_per_s"],
                             r["ring_iteration_s"] if ring else None, r["correct"], None)
    return None


def row(part: Part, spec: ExperimentSpec, report: Mapping[str, Any], loop: Published,
        loop_today: Mapping[str, Any] | None = None) -> Row:
    """The graph's run of the spec (its results.json) against the loop's figures (and today's loop's report)."""
    p = scaling.point(report, spec)
    today = scaling.point(loop_today, spec) if loop_today is not None else None
    job2 = (report.get("jobs") or {}).get("2") if part is Part.DLCP else None
    samples, iteration = float(p["samples_per_s"]), float(p["iteration_s"])
    ratio = samples / loop.samples_per_s
    iteration_ratio = iteration / loop.iteration_s if loop.iteration_s else None
    within = abs(ratio - 1) <= TOLERANCE and (iteration_ratio is None or abs(iteration_ratio - 1) <= TOLERANCE)
    correct = p["correct"]
    return Row(part=part, run=spec.label, model=spec.workload.workload, workers=spec.network.workers,
               engine=spec.algorithm.engine, samples_per_s=samples, samples_per_s_loop=loop.samples_per_s,
               samples_over_loop=ratio, iteration_s=iteration, iteration_s_loop=loop.iteration_s,
               iteration_over_loop=iteration_ratio, within_tolerance=within, check=p["check"], correct=correct,
               correct_loop=loop.correct, agrees=within and correct is True and loop.correct is True,
               sim_wall_s=p["wall_s"], sim_wall_s_loop=loop.wall_s,
               busiest_link_load=(report.get("headline_extra") or {}).get("busiest_link_load"),
               job2_jct_s=job2.get("jct_s") if job2 else None, job2_jct_s_loop=loop.job2_jct_s,
               samples_per_s_loop_today=today["samples_per_s"] if today else None,
               samples_over_loop_today=samples / today["samples_per_s"] if today else None,
               correct_loop_today=today["correct"] if today else None,
               jct_s_by_job=jcts(report) if part is Part.DLCP else None,
               jct_s_by_job_loop_today=jcts(loop_today) if part is Part.DLCP and loop_today is not None else None)


def jcts(report: Mapping[str, Any]) -> dict[str, float]:
    """Each job's completion time (simulated seconds), by job id."""
    return {job: float(j["jct_s"]) for job, j in (report.get("jobs") or {}).items() if j.get("jct_s") is not None}


def dlcp_over_baseline(rows: list[Row]) -> dict[str, dict[str, float]]:
    """Each DLCP run's samples/s over the baseline-class run's, per engine (the study's `over_baseline`)."""
    by = {r.run: r for r in rows if r.part is Part.DLCP}
    base = by.get("dlcp-baseline-class")
    if base is None:
        return {}
    return {name: {"graph": r.samples_per_s / base.samples_per_s,
                   "loop": r.samples_per_s_loop / base.samples_per_s_loop} for name, r in by.items()}


def bandwidth_ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """The sweep's figure per model and rate: hierarchical NetReduce / ring samples/s, per engine."""
    by = {r.run: r for r in rows if r.part is Part.BANDWIDTH}
    out = []
    for m in scaling.MODELS:
        for rate in scaling.BANDWIDTH_RATES_MBPS:
            ring, nr = (by.get(scaling.bandwidth_spec(m, a, rate).label) for a in scaling.BANDWIDTH_ALGOS)
            if ring is None or nr is None:
                continue
            graph, loop = nr.samples_per_s / ring.samples_per_s, nr.samples_per_s_loop / ring.samples_per_s_loop
            out.append({"model": m, "rate_mbps": rate, "netreduce_over_ring": graph,
                        "netreduce_over_ring_loop": loop, "over_loop": graph / loop})
    return out


def compare(parts: list[Part], out: Path, study: Mapping[str, Any]) -> dict[str, Any]:
    """Every complete graph run of the parts under out against scaling.json; the runs not found, by part."""
    rows: list[Row] = []
    missing: dict[str, list[str]] = {}
    for part in parts:
        for spec in part_runs(part):
            report = completed_report(out / "runs" / spec.label, spec)
            loop = published(part, spec, study)
            if report is None or loop is None:
                missing.setdefault(str(part), []).append(spec.label + ("" if loop else " (not in scaling.json)"))
                continue
            today = completed_report(out / "loop" / "runs" / spec.label, spec.but(engine=Engine.LOOP))
            rows.append(row(part, spec, report, loop, today))
    ratios = [r.samples_over_loop for r in rows]
    return {"rows": [{**asdict(r), **Limits.simulated_figures(r.busiest_link_load)} for r in rows],
            "not_remeasured": missing, "dlcp_over_baseline": dlcp_over_baseline(rows),
            "bandwidth_ratios": bandwidth_ratios(rows),
            "summary": {"runs": len(rows), "agree": sum(r.agrees for r in rows),
                        "within_tolerance": sum(r.within_tolerance for r in rows),
                        "samples_over_loop_min": min(ratios, default=None),
                        "samples_over_loop_max": max(ratios, default=None), "tolerance": TOLERANCE,
                        "misses": [r.run for r in rows if not r.agrees],
                        "misses_over_loop_today": {r.run: r.samples_over_loop_today for r in rows
                                                   if not r.agrees and r.samples_over_loop_today is not None}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(Part.names()), help=f"of {', '.join(Part.names())}")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-scaling-graph-rest"))
    parser.add_argument("--shard", default="0/1", help="K/N: run every N-th run from the K-th (default 0/1: all)")
    parser.add_argument("--compare-only", action="store_true", help="run nothing: compare the runs found under --out")
    parser.add_argument("--loop", default="", help="runs (by name) to run on today's loop too, under --out/loop")
    args = parser.parse_args()
    names = [p for p in args.parts.split(",") if p]
    if unknown := [p for p in names if p not in Part.names()]:
        parser.error(f"--parts {args.parts}: unknown {unknown[0]!r}; give some of {', '.join(Part.names())}")
    parts = [Part(p) for p in names]
    k, n = (int(x) for x in args.shard.split("/"))
    if not 0 <= k < n:
        parser.error(f"--shard {args.shard}: K/N with 0 <= K < N")
    every_run = {s.label: s for p in Part for s in part_runs(p)}
    loop = [r for r in args.loop.split(",") if r]
    if unknown_runs := [r for r in loop if r not in every_run]:
        parser.error(f"--loop {args.loop}: no run {unknown_runs[0]!r}; give runs of the parts (e.g. dlcp-priority)")
    if not args.compare_only:
        scaling.run([s for p in parts for s in part_runs(p)], args.out, (k, n))
        if loop:
            scaling.run([every_run[r].but(engine=Engine.LOOP) for r in loop], args.out / "loop", (k, n))
    study = load(RESULTS, "scaling.json")
    every = list(Part)  # the file is the whole comparison, from every run found (a part run alone keeps the others)
    figures = compare(every, args.out, study)
    for r in figures["rows"]:
        print(f"{r['run']:<34}{r['samples_per_s']:>12.1f}{r['samples_per_s_loop']:>12.1f}"
              f"{r['samples_over_loop']:>9.4f}  {r['check']} {'correct' if r['correct'] else 'NOT CORRECT'}"
              f"{'' if r['agrees'] else '  MISS'}"
              + (f"; today's loop {r['samples_per_s_loop_today']:.1f}, {r['samples_over_loop_today']:.4f}"
                 if r["samples_over_loop_today"] is not None else ""))
    s = figures["summary"]
    print(f"{s['agree']} of {s['runs']} runs agree with the loop's within {TOLERANCE:.0%}")
    print(f"wrote {save(NAME, figures, engines=[Engine.LOOP, Engine.GRAPH])}")


if __name__ == "__main__":
    main()
