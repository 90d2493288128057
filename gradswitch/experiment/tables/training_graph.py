"""The training speed-up table's runs as execution graphs on BMv2's hosts (bench/results/training-graph*.json,
bench/training_graph.py), against the training loop's runs of the same jobs."""

from __future__ import annotations

import re
from pathlib import Path

from gradswitch.experiment.tables.cells import MODELS, table
from gradswitch.experiment.tables.reading import Json, load


def training_graph_table(results: Path, name: str = "training-graph.json") -> str:
    """bench/training_graph.py: the training speed-up table's ring and NetReduce (or parameter-server) runs as graphs
    on BMv2's hosts, against the training loop's runs of the same jobs the same day and against the table's loop
    figures; NetReduce / ring (or PS / ring) on each."""
    doc = load(results, name)

    def span(s: Json | None) -> str:
        return "-" if s is None else f"{s['median']:.0f} [{s['min']:.0f}-{s['max']:.0f}]"

    def counted(s: Json | None, used: int, of: int) -> str:
        return f"{span(s)} ({used} of {of})"

    def ratio_cell(q: Json | None, key: str) -> str:
        return "-" if q is None or key not in q else f"{q[key]:.2f} [{q[key + '_min']:.2f}-{q[key + '_max']:.2f}]"

    def versus(r: Json, over: str, within: str) -> str:
        return "-" if over not in r else f"{r[over]:.3f} ({'overlap' if r[within] else 'apart'})"

    ratios = {(q["model"], q.get("topo", "rack"), q.get("scheduling", "fifo"), q.get("algo", "netreduce")): q
              for q in doc["ratios"]}
    over = " and ".join({"netreduce": "NetReduce", "ps": "PS"}[a] for a in doc.get("algos", ["ring", "netreduce"])
                        if a != "ring")
    schedulings = doc.get("schedulings", ["fifo"])
    rows = []
    for r in doc["runs"]:
        label = re.fullmatch(r"(.+)-(rack|leafspine)-(\w+)-(fifo|priority)", r["run"])
        if label is None:
            raise ValueError(f"{name}: run {r['run']!r} is not MODEL-TOPOLOGY-ALGORITHM-SCHEDULING")
        model, topo, algo, sched = label.groups()
        q = ratios.get((model, topo, sched, algo))
        loops = r.get("loop_repetitions", [])
        exact = r["exact"] and r.get("loop_exact", True)
        rows.append([f"{MODELS.get(model, model)} {algo}" + ("" if topo == "rack" else f" ({topo})")
                     + ("" if len(schedulings) == 1 else f", {sched}"),
                     counted(r.get("samples_per_s_real_loop_today"), r.get("loop_usable", 0), len(loops)),
                     counted(r.get("samples_per_s_real"), r["usable"], len(r["repetitions"])),
                     versus(r, "over_loop_today", "within_spread_today"),
                     span(r["samples_per_s_real_loop"]), versus(r, "over_loop", "within_spread"),
                     "yes" if exact else "**no**", ratio_cell(q, "loop_today_ratio"), ratio_cell(q, "ratio"),
                     ratio_cell(q, "loop_ratio")])
    when = str(doc.get("table_when", "another day"))[:10]
    kinds = {"fifo": "FIFO buckets", "priority": "priority partitions"}
    return table([f"run ({', '.join(doc.get('topos', ['rack']))}, 4 emulated V100s, "
                  f"{' and '.join(kinds[s] for s in schedulings)})",
                  "training loop today: samples/s median [min-max] (runs not machine-bound of all)",
                  "graph engine today: samples/s (not machine-bound of all)", "graph / loop today (ranges)",
                  f"training loop, table of {when}", "graph / table (ranges)", "exact (both engines)",
                  f"{over} / ring: loop today", f"{over} / ring: graph", f"{over} / ring: table"], rows)
