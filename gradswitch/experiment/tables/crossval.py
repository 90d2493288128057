"""The simulator against the testbed (bench/results/crossval*.json, bench.crossval): each figure on both backends
and whether it was judged and agreed, the algorithms' rankings, the graph engine against the training loop, and
every collective of the graph engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradswitch.experiment.crossval import host_pattern
from gradswitch.experiment.tables.cells import num, table
from gradswitch.experiment.tables.reading import Json, load


def crossval_table(results: Path, name: str = "crossval.json") -> str:
    cv = load(results, name)
    rows = []
    for f in cv["figures"]:
        judged = "yes" if f["usable"] else "no: fewer than 3 BMv2 runs not machine-bound"
        within = "-" if f["within"] is None else ("yes" if f["within"] else "**no**")
        rows.append([f["what"], num(f["bmv2"], 3), num(f["ns3"], 3), f"{100 * f['error']:+.1f} %", judged, within])
    tol = f"{100 * cv['tolerance']:g} %"
    return table(["figure", "BMv2 (median of the runs not machine-bound)", "ns-3", "ns-3 / BMv2 - 1", "judged",
                  f"within {tol}"], rows)


def crossval_rankings_table(results: Path, name: str = "crossval.json") -> str:
    cv = load(results, name)
    rows = [[r["what"], " < ".join(r["bmv2"]), " < ".join(r["ns3"]),
             ", ".join(" = ".join(t) for t in r.get("ties", [])) or "-",
             "-" if r["same"] is None else ("yes" if r["same"] else "**no**")] for r in cv["rankings"]]
    return table(["topology, N", "BMv2, fastest first", "ns-3, fastest first", "tied (within 10 % on both)",
                  "the same"], rows)


def crossval_engines_table(results: Path, name: str) -> str:
    """A loop part and its graph part measured in one bench.crossval run: each run's graph beside its loop on each
    backend (runs.graph_vs_loop, bench/crossval_engines.py; the graph's emulated seconds times the loop's
    dilation)."""
    cv = load(results, name)

    def rng(r: Any) -> str:
        return "-" if not r else f"[{r[0]:.3f}-{r[1]:.3f}]"

    verdict = {None: "not judged", True: "yes", False: "**no**"}
    rows = [[r["run"], r["backend"], f"{num(r['loop_iteration_s'], 3)} {rng(r['loop_range_s'])}",
             f"{num(r['graph_iteration_s'], 3)} {rng(r['graph_range_s'])}", num(r["graph_over_loop"], 3),
             verdict[r["agrees"]]] for r in cv["runs"]["graph_vs_loop"]]
    return table(["run", "backend", "training loop: iteration s [range]", "graph, dilated: iteration s [range]",
                  "graph / loop", "agree (ranges widened by 1 %)"], rows)


def crossval_collectives_table(results: Path, name: str = "crossval-collectives.json") -> str:
    """bench.crossval's collectives part: per fabric, N and collective the graph's time on both backends (BMv2:
    median [min-max] of the exact runs not machine-bound, how many of all) and its time over ring all-reduce's (a
    collective in the switches, `...-netreduce`, or on a parameter server, `...-ps`: over the ring's of the same
    collective)."""
    cv = load(results, name)
    figures = {f["what"]: f for f in cv["figures"]}
    tol = f"{100 * cv['tolerance']:g} %"

    def verdict(f: Json | None, why: str = "") -> str:
        if f is None or f["within"] is None:
            return "not judged" + ("" if f is None or f["usable"] else
                                   f": under {cv['min_repetitions']} BMv2 runs{why}")
        return "yes" if f["within"] else "**no**"

    def limits(reps: list[Json]) -> str:
        """What the machine-bound BMv2 runs had, where their reports say: busiest link and idle CPU, min-max."""
        loads = [r["busiest_link_load"] for r in reps if r.get("machine_bound") and r.get("busiest_link_load")]
        idle = [r["cpu_idle"] for r in reps if r.get("machine_bound") and r.get("cpu_idle") is not None]
        if not loads or not idle:
            return ""
        return (f" (busiest link {100 * min(loads):.0f}-{100 * max(loads):.0f} % loaded, "
                f"CPU {100 * min(idle):.0f}-{100 * max(idle):.0f} % idle)")

    def error(f: Json | None) -> str:
        return f"{100 * f['error']:+.1f} %" if f is not None and f["error"] is not None else "-"

    def min_max(values: list[int]) -> str:
        return str(min(values)) if min(values) == max(values) else f"{min(values)}-{max(values)}"

    def resent(reps: list[Json]) -> str:
        """Packets sent again in a run and, where kept, those the links' queues dropped, min-max over the
        repetitions (kept since 2026-11-27: '-' before)."""
        counts = [int(r["resent_packets"]) for r in reps if r.get("resent_packets") is not None]
        drops = [int(r["link_drops"]) for r in reps if r.get("link_drops") is not None]
        if not counts:
            return "-"
        return min_max(counts) + (f" ({min_max(drops)})" if drops else "")

    rows = []
    for r in cv["runs"]["collectives"]["runs"]:
        b, s = r["bmv2"], r["ns3"]
        key = f"{r['topo']} N={r['workers']} {r['pattern']}"
        over = host_pattern(r["pattern"]) if host_pattern(r["pattern"]) != r["pattern"] else "all_reduce"
        t, ratio = figures.get(f"{key} (s)"), figures.get(f"{key} / {over}")
        span = f" [{num(b['spread_s'][0], 3)}-{num(b['spread_s'][1], 3)}]" if b["spread_s"] else ""
        rows.append([r["topo"], str(r["workers"]), r["pattern"],
                     f"{num(b['median_s'], 3)}{span} ({b['usable']} of {len(b['repetitions'])})", num(s["median_s"], 3),
                     error(t), verdict(t, limits(b["repetitions"])),
                     "-" if ratio is None else f"{num(ratio['bmv2'], 3)} / {num(ratio['ns3'], 3)}",
                     error(ratio), "-" if ratio is None else verdict(ratio),
                     f"{resent(b['repetitions'])} / {resent(s['repetitions'])}"])
    return table(["fabric", "N", "collective", "BMv2 s: median [min-max] (runs not machine-bound of all)", "ns-3 s",
                  "ns-3 / BMv2 - 1", f"within {tol}",
                  "over ring all-reduce (`-netreduce`, `-ps`: over the ring's same collective): BMv2 / ns-3",
                  "ns-3 / BMv2 - 1", f"within {tol}",
                  "packets sent again a run (dropped by the links): BMv2 / ns-3"], rows)
