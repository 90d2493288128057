"""The simulator's tables: its speed and where its time goes (bench/results/ns3-speed.json, ns3-profile.json), over
MPI ranks (mpi-scaling.json), training at scale (scaling.json), NetReduce's reduce-scatter and all-gather
(sim-netreduce-rs-ag.json) and the scaling study on its graph engine (scaling-graph.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradswitch.experiment.tables.cells import MODELS, mib, num, pct, table
from gradswitch.experiment.tables.reading import load


def ns3_speed_table(results: Path) -> str:
    doc = load(results, "ns3-speed.json")
    rows = []
    for r in doc["runs"]:
        size = "full-size gradients" if r["workload"] != "synthetic" else mib(r["size_bytes"])
        worst = max(r["iteration_s"]) if r["iteration_s"] else None
        bound = f"{worst / r['bound_s']:.3f}" if worst is not None and r["bound_s"] else "-"
        rows.append([r["scenario"], r["algo"], str(r["workers"]), f"{r['workload']}, {size}", str(r["iterations"]),
                     ("yes" if r["ok"] else "**no**") + f" ({r['check']})",
                     "-" if worst is None else f"{worst * 1e3:,.3f}", bound, f"{r['wall_s']:,.1f}",
                     f"{r['packet_hops_per_s'] / 1e6:.2f}", f"{r['peak_rss_mb']:,.0f}"])
    return table(["scenario", "algorithm", "workers", "workload", "iterations", "checked",
                  "slowest iteration ms (simulated)", "/ link-rate bound", "wall s", "M packet-hops per wall s",
                  "peak MB"], rows)


# ---- where the simulator's time goes (bench/results/ns3-profile.json) ----


def ns3_profile_table(results: Path) -> str:
    doc = load(results, "ns3-profile.json")
    runs = doc["profiles"]
    rows = [[c, *(f"{100 * r['categories'].get(c, 0.0):.1f} %" for r in runs)] for c in doc["categories"]]
    rows.append(["samples (wall s under perf)", *(f"{r['samples']:,} ({r['wall_s']:.1f})" for r in runs)])
    return table(["own time (perf, by function)", *(f"{r['scenario']}: {r['algo']} x{r['workers']}" for r in runs)],
                 rows)


def ns3_schedulers_table(results: Path) -> str:
    walls = load(results, "ns3-profile.json")["scheduler_wall_s"]
    fastest = min(walls.values())
    return table(["ns-3 event list (`scheduler`)", "speed scenario, wall s", "over the fastest"],
                 [[name, f"{wall:.2f}", f"{wall / fastest:.2f}"] for name, wall in walls.items()])


# ---- the simulator over MPI ranks (bench/results/mpi-scaling.json) ----


def mpi_scaling_table(results: Path) -> str:
    doc = load(results, "mpi-scaling.json")
    diffs = [0.0, *(max(d) for d in doc["same_answer"]["iteration_relative_difference"])]
    rows = []
    for m, diff in zip(doc["measured"], diffs, strict=True):
        rows.append([str(m["ranks"]), m["sync"] if m["ranks"] > 1 else "-", f"{m['wall_s']:,.1f}",
                     f"{m['total_s']:,.1f}", ", ".join(f"{x:,.0f}" for x in m["peak_rss_mb_per_rank"]),
                     f"{m['iteration_s'][0] * 1e3:.4f}", f"{100 * diff:.3f} %",
                     ("yes" if m["correct"] else "**no**") + f" ({m['check']})", str(m["cut_links"])])
    run = doc["run"]
    return table([f"ranks ({run['algo']}, {run['workers']} workers, {run['topology']})", "sync",
                  "simulator wall s", "whole run s", "peak MB per rank", "iteration ms (simulated)",
                  "iteration vs one rank", "checked", "cut links"], rows)


def mpi_projection_table(results: Path) -> str:
    doc = load(results, "mpi-scaling.json")
    rows = [[str(p["ranks"]), f"{100 * p['busiest_share']:.1f} %", str(p["cut_links"]), f"{p['cut_packets']:,}",
             f"{p['wall_s']:,.1f}", f"{p['speedup']:.2f}", f"{p['peak_rss_mb_per_rank']:,.0f}"]
            for p in doc["projected"]]
    return table(["ranks (projected: a model, not a measurement)", "busiest rank's share of deliveries",
                  "cut links", "cut-link packets of the busiest rank", "wall s", "speed-up over one rank",
                  "peak MB per rank"], rows)


# ---- training at scale on the simulator (bench/results/scaling.json) ----


def scaling_table(results: Path) -> str:
    doc = load(results, "scaling.json")
    ratios = {(r["model"], r["workers"], r["what"]): r["ratio"] for r in doc["speedups"]}
    rows = []
    for m in doc["models"]:
        for n in doc["workers"]:
            ring = doc["points"].get(f"{m}-ring-n{n}")
            if ring is None:
                continue
            cells = [num(ratios.get((m, n, f"{a} / ring"))) for a in ("netreduce-hier", "netreduce-flat", "ps")]
            rows.append([MODELS.get(m, m), str(n), f"{ring['samples_per_s']:,.0f}",
                         f"{ring['linear_samples_per_s']:,.0f}", num(ring["scaling_efficiency"]), *cells])
    return table(["model", "workers", "ring samples/s", "linear (N x one GPU)", "ring's scaling efficiency",
                  "NetReduce hierarchical / ring", "NetReduce flat / ring", "PS / ring"], rows)


def scaling_bandwidth_table(results: Path) -> str:
    doc = load(results, "scaling.json")
    rows = [[MODELS.get(r["model"], r["model"]), str(r["workers"]), f"{r['rate_mbps'] / 1000:g}",
             f"{r['ring_samples_per_s']:,.0f}", num(r["ring_scaling_efficiency"]), num(r["ring_exposed_comm_s"], 4),
             f"{r['netreduce_samples_per_s']:,.0f}", num(r["ratio"]), "yes" if r["correct"] else "**no**"]
            for r in doc.get("bandwidth", [])]
    return table(["model", "workers", "link Gb/s", "ring samples/s", "ring's scaling efficiency",
                  "ring's exposed communication s", "NetReduce hierarchical samples/s", "NetReduce / ring",
                  "checked (digest)"], rows)


def scaling_dlcp_table(results: Path) -> str:
    doc = load(results, "scaling.json")
    rows = []
    for name, r in doc.get("dlcp", {}).items():
        error = r.get("max_relative_error")
        rows.append([name, f"{r['samples_per_s']:,.0f}", num(r.get("over_baseline")), num(r.get("iteration_s"), 3),
                     f"{r['dlcp_dropped']:,}" if r.get("dlcp_dropped") is not None else "-",
                     f"{r['zero_filled_packets']:,.0f}" if r.get("zero_filled_packets") is not None else "-",
                     num(error, 3) if error is not None else "-",
                     "yes" if r.get("correct") else "**no** (over the 0.2 error bound)",
                     f"{r['background_goodput_mbps'] / 1000:,.1f}" if r.get("background_goodput_mbps") else "-",
                     pct(r.get("busiest_link_load"))])
    return table(["run (2 jobs x 64 workers, 16 bulk TCP flows)", "job 1 samples/s", "over baseline-class",
                  "iteration s", "packets trimmed", "zero-filled (job 1)", "relative error (digest, job 1)",
                  "within the error bound", "TCP goodput Gb/s", "busiest link"], rows)


def sim_netreduce_rs_ag_table(results: Path) -> str:
    """bench.sim_netreduce_rs_ag: NetReduce reduce-scatter and all-gather over the hosts' ring on the simulator, per
    collective, buffer and link rate, on each fabric and N (the job's 4 credits; 8, the P4 program's most, after);
    all-gather again on switches that could grow a placeholder (the what-if rows)."""
    doc = load(results, "sim-netreduce-rs-ag.json")
    cells = {(r["collective"], r["size_kib"], r["gbps"], r["fabric"], r["ranks"]): r for r in doc["ratios"]}
    fabrics = sorted({(r["fabric"], r["ranks"]) for r in doc["ratios"]}, key=lambda f: (f[0] != "rack", f))
    rows = []
    for kind, label, key in (("reduce_scatter", "reduce-scatter", "netreduce"),
                             ("all_gather", "all-gather", "netreduce"),
                             ("all_gather", "all-gather, switches that could grow a placeholder (what-if)", "grown")):
        for size in sorted({r["size_kib"] for r in doc["ratios"]}):
            for gbps in sorted({r["gbps"] for r in doc["ratios"]}):
                row = [label, mib(size * 1024), f"{gbps:g} Gb/s"]
                exact = True
                for fabric, n in fabrics:
                    c = cells.get((kind, size, gbps, fabric, n))
                    row.append("-" if c is None or f"{key}_over_ring" not in c else
                               f"{c[f'{key}_over_ring']:.2f} ({c[f'{key}_8_over_ring']:.2f})")
                    exact = exact and (c is None or c["all_exact"])
                rows.append([*row, "yes" if exact else "**no**"])
    return table(["collective", "buffer", "hosts' links",
                  *(f"{f}, N = {n}: NetReduce / ring, 4 (8) credits" for f, n in fabrics), "exact"], rows)


def scaling_graph_table(results: Path) -> str:
    """bench/scaling_graph.py: the scaling study's ring and NetReduce points on the simulator's graph engine against
    the study's own figures (its training loop)."""
    doc = load(results, "scaling-graph.json")
    tol = f"{100 * doc['tolerance']:g} %"
    algos = {"ring": "ring", "netreduce-hier": "NetReduce (hierarchical)"}

    def pair(r: dict[str, Any], graph: str, loop: str) -> str:
        return f"{r[graph]:.1f} / {r[loop]:.1f}" if r.get(graph) is not None and r.get(loop) is not None else "-"

    def before(r: dict[str, Any]) -> dict[str, Any]:
        # the first table's walls (graph: its whole run; loop: the study's 2 iterations): a row measured since keeps
        # them under `before`, one not measured since holds them itself
        kept: dict[str, Any] = r.get("before", {} if "sim_cpu_s" in r else r)
        return kept

    def instructions(r: dict[str, Any]) -> str:
        # user-space instructions (counted: bench/scaling_graph.py --instructions), the figure load does not move
        graph, loop = r.get("sim_instructions"), r.get("loop_sim_instructions")
        if graph is None or loop is None:
            return "-"
        return f"{graph / 1e9:.2f} / {loop / 1e9:.2f} ({graph / loop:.4f})"

    rows = [[MODELS.get(r["model"], r["model"]), algos[r["algo"]], str(r["workers"]),
             num(r["iteration_s_study"] * 1000, 3), num(r["iteration_s"] * 1000, 3), f"{r['over_study']:.4f}",
             "yes" if r["within_tolerance"] else "**no**", "yes" if r["checked"] else "**no**",
             instructions(r), pair(r, "sim_cpu_s", "loop_sim_cpu_s"), pair(r, "sim_wall_s", "loop_sim_wall_s"),
             f"{r['wall_s']:.1f}" if "sim_cpu_s" in r else "-",
             pair(before(r), "wall_s", "wall_s_study")]
            for r in doc["rows"]]
    return table(["model (fat tree, 100 Gb/s)", "all-reduce", "workers", "training loop: iteration ms",
                  "graph engine: iteration ms", "graph / loop", f"within {tol}", "exact (digest)",
                  "simulator instructions, 10^9, 3 iterations each: graph / loop (graph / loop)",
                  "simulator CPU s, 3 iterations each: graph / loop", "simulator run wall s: graph / loop",
                  "graph's whole run wall s", "before: wall s graph (whole run, 3 iterations) / loop (study, 2)"],
                 rows)


def engines_sim_table(results: Path) -> str:
    """bench/engines_sim.py: the same spec on the simulator's training loop and on its graph engine (engine = loop,
    engine = graph), through the product's run: samples/s of each (a run without emulate: its median iteration),
    their ratio, the bytes on the wire."""
    doc = load(results, "engines-sim.json")
    tol = f"{100 * doc['summary']['tolerance']:g} %"
    def samples(run: dict[str, Any]) -> str:
        if "samples_per_s_real" not in run:
            return f"failed: {run.get('error')}"
        if run["samples_per_s_real"] is None:  # no emulated cluster: no samples
            return f"{run['median_s']:.4f} s an iteration"
        return f"{run['samples_per_s_real']:,.1f}"

    def wall(run: dict[str, Any]) -> str:
        return f"{run['simulator_wall_s']:.1f}" if "simulator_wall_s" in run else "-"

    rows = []
    for r in doc["rows"]:
        if r["study"] == "dlcp-drop":
            continue  # engines_sim_dlcp_table
        loop, graph = r["loop"], r["graph"]
        ratio = r["graph_over_loop"]
        rows.append([r["study"], r["run"], samples(loop), samples(graph), "-" if ratio is None else f"{ratio:.4f}",
                     "yes" if r["agrees"] else "**no**", "yes" if r["same_bytes"] else "no",
                     f"{wall(graph)} / {wall(loop)}"])
    return table(["study", "run (ns-3)", "loop: samples/s", "graph engine: samples/s", "graph / loop",
                  f"within {tol}", "same bytes", "simulator wall s: graph / loop (shared machine)"], rows)


def engines_sim_dlcp_table(results: Path) -> str:
    """bench/engines_sim.py --only dlcp-drop: DLCP dropping's training runs on the simulator's training loop and its
    graph engine: samples/s (a swept run's: medians [min, max] over its link rates, judged by the graph's median
    within the loop's range), the outcome, the switches' trimmed packets, the zero-filled packets and the largest
    relative error (job 1's), the retransmissions (a swept run's: at the spec's own rate)."""
    doc = load(results, "engines-sim.json")
    tol = f"{100 * doc['summary']['tolerance']:g} %"

    def pair(r: dict[str, Any], key: str, fmt: str) -> str:
        values = [r[e].get(key) for e in ("graph", "loop")]
        return " / ".join("-" if v is None else format(v, fmt) for v in values)

    def samples(r: dict[str, Any]) -> str:
        if "sweep" not in r:  # one run per engine
            return pair(r, "samples_per_s_real", ",.1f")
        sw = r["sweep"]  # bench/engines_sim.py Sweep: over link rates the dilation undoes

        def over(s: dict[str, float]) -> str:
            return f"{s['median']:,.1f} [{s['min']:,.1f}, {s['max']:,.1f}]"

        return (f"{over(sw['graph_samples_per_s'])} / {over(sw['loop_samples_per_s'])} (medians [min, max] over "
                f"{len(sw['factors'])} link rates x {', '.join(f'{f:g}' for f in sw['factors'])})")

    rows = []
    for r in doc["rows"]:
        if r["study"] != "dlcp-drop":
            continue
        ratio = r["graph_over_loop"]
        rows.append([r["run"], str(r["workers"]), samples(r),
                     "-" if ratio is None else f"{ratio:.4f}", pair(r, "outcome", "s"),
                     "yes" if r["agrees"] else "**no**", pair(r, "dlcp_dropped", ",.0f"),
                     pair(r, "zero_filled_packets", ",.0f"), pair(r, "max_relative_error", ".3f"),
                     pair(r, "retransmissions", ",.0f")])
    return table(["run (ns-3)", "workers per job", "samples/s: graph / loop", "graph / loop",
                  "outcome: graph / loop", f"agrees: within {tol}, same outcome (swept: the graph's median within "
                  "the loop's range, same outcomes)", "trimmed by switches: graph / loop",
                  "zero-filled (job 1): graph / loop", "max relative error (job 1): graph / loop",
                  "retransmissions: graph / loop"], rows)
