"""The training tables: NetReduce and priority scheduling's speed-ups (bench/results/training-speedup.json, every
run repeated), DLCP under contention and its spraying (training-dlcp.json), TensorLights (dlcp-tensorlights.json)
and the time to accuracy (training-learning.json)."""

from __future__ import annotations

from pathlib import Path

from gradswitch.experiment.tables.cells import (
    MODELS,
    check_mark,
    idle,
    marked,
    num,
    over_baseline,
    pct,
    ratio,
    repetitions,
    spread_cell,
    spread_pct,
    table,
)
from gradswitch.experiment.tables.reading import Json, load, machine_bound


def speedup(results: Path) -> tuple[dict[str, Json], list[Json]]:
    """training-speedup.json's runs by name and its ratios."""
    sp = load(results, "training-speedup.json")["speedup"]
    runs: dict[str, Json] = sp["runs"]
    rows: list[Json] = sp["ratios"]
    return runs, rows


def places(rows: list[Json]) -> list[tuple[str, str]]:
    """The (model, topology) pairs of the ratios, in their order."""
    return list(dict.fromkeys((r["model"], r["topo"]) for r in rows))


def ratio_row(rows: list[Json], model: str, topo: str, what: str) -> Json:
    """The ratio `what` of a model on a topology."""
    return next(r for r in rows if r["model"] == model and r["topo"] == topo and r["what"] == what)


def _pair_ratio(row: Json, bound: bool) -> str:
    """A ratio of two runs' medians, [min, max] beside it where the runs were repeated."""
    if "ratio_min" not in row:
        return marked(num(row["ratio"]), bound)
    return ratio(row["ratio"], row["ratio_min"], row["ratio_max"], bool(row.get("headline", True)) and not bound)


def pair_bound(runs: dict[str, Json], *names: str) -> bool:
    """Whether a run behind a ratio was machine-bound."""
    return any(machine_bound(runs[n]) for n in names)


def training_netreduce_table(results: Path) -> str:
    runs, rows = speedup(results)
    out = []
    for model, topo in places(rows):
        for sched in ("fifo", "priority"):
            ring, nr = (f"{model}-{topo}-{algo}-{sched}" for algo in ("ring", "netreduce"))
            r = ratio_row(rows, model, topo, f"NetReduce / ring ({sched})")
            a, b = runs[ring], runs[nr]
            out.append([MODELS.get(model, model), topo, sched, spread_cell(a, "samples_per_s_real", 0),
                        spread_cell(b, "samples_per_s_real", 0), _pair_ratio(r, pair_bound(runs, ring, nr)),
                        num(r["ideal"]), f"{num(a['of_ideal'])}, {num(b['of_ideal'])}",
                        f"{pct(a['busiest_link_load'])} ({pct(a['ideal_link_load'])}), "
                        f"{pct(b['busiest_link_load'])} ({pct(b['ideal_link_load'])})", idle(r["cpu_idle"])])
    return table(["model", "topology", "scheduling", "ring samples/s", "NetReduce samples/s", "NetReduce / ring",
                  "ideal", "of ideal: ring, NetReduce", "busiest link: ring, NetReduce (a link-bound run's)",
                  "CPU idle (the lower)"], out)


def training_priority_table(results: Path) -> str:
    runs, rows = speedup(results)
    out = []
    for model, topo in places(rows):
        def cell(what: str, a: str, b: str, model: str = model, topo: str = topo) -> list[str]:
            r = ratio_row(rows, model, topo, what)
            bound = pair_bound(runs, f"{model}-{topo}-{a}", f"{model}-{topo}-{b}")
            return [_pair_ratio(r, bound), num(r["ideal"])]

        out.append([MODELS.get(model, model), topo, *cell("PS / ring (priority)", "ps-priority", "ring-priority"),
                    *cell("priority / FIFO (ring)", "ring-priority", "ring-fifo"),
                    *cell("priority / FIFO (ps)", "ps-priority", "ps-fifo"),
                    *cell("priority / FIFO (netreduce)", "netreduce-priority", "netreduce-fifo")])
    return table(["model", "topology", "PS / ring (priority)", "ideal", "ring: priority / FIFO", "ideal",
                  "PS: priority / FIFO", "ideal", "NetReduce: priority / FIFO", "ideal"], out)


# ---- DLCP (bench/results/training-dlcp.json), TensorLights, learning ----


def dlcp_section(results: Path, name: str) -> Json:
    """One study of training-dlcp.json (`dlcp-contention`, `dlcp-spray`)."""
    section: Json = load(results, "training-dlcp.json")["dlcp"][name]
    return section


def dlcp_contention_table(results: Path) -> str:
    c = dlcp_section(results, "dlcp-contention")
    rows = []
    for name, s in c["runs"].items():
        vs = "1 (best baseline)" if name == c["best_baseline"] else over_baseline(s)
        rows.append([name + check_mark(s), spread_cell(s, "samples_per_s_real", 1), vs, spread_cell(s, "p99_s"),
                     spread_cell(s, "retransmissions", 0), spread_cell(s, "dlcp_dropped", 0),
                     spread_cell(s, "zero_filled_packets", 0), spread_cell(s, "max_relative_error"),
                     spread_cell(s, "background_goodput_mbps"),
                     spread_pct(s, "busiest_link_load"), spread_pct(s, "cpu_idle", low_mark=True), repetitions(s)])
    return table(["run", "samples/s (real)", f"/ {c['best_baseline']} (ratio of samples/s)", "p99 s", "resent",
                  "trimmed by switches", "zero-filled", "max relative error", "bulk TCP Mb/s", "busiest link",
                  "CPU idle", "repetitions in the medians"], rows)


BALANCING = {"ecmp": "ECMP", "flowlet": "flowlets, 50 ms gap", "flowlet-150ms": "flowlets, 150 ms gap",
             "spray": "spraying (DLCP)"}


def dlcp_spray_table(results: Path) -> str:
    c = dlcp_section(results, "dlcp-spray")
    order = {b: i for i, b in enumerate(BALANCING)}
    placements = list(dict.fromkeys(name.split("-", 1)[0] for name in c["runs"]))
    names = sorted(c["runs"], key=lambda n: (placements.index(n.split("-", 1)[0]),
                                             order.get(n.split("-", 1)[1], len(order))))
    rows = []
    for name in names:
        s = c["runs"][name]
        place, how = name.split("-", 1)
        rows.append([place, BALANCING.get(how, how) + check_mark(s), spread_cell(s, "samples_per_s_real", 0),
                     "1 (baseline)" if s.get("is_baseline") else over_baseline(s), spread_cell(s, "uplink_imbalance"),
                     spread_cell(s, "retransmissions", 0), spread_pct(s, "busiest_link_load"),
                     spread_pct(s, "cpu_idle", low_mark=True), repetitions(s)])
    return table(["ring placement", "balancing", "samples/s (real)",
                  "/ ECMP on the same placement (ratio of samples/s)", "busiest uplink / mean", "resent",
                  "busiest link", "CPU idle", "repetitions in the medians"], rows)


TENSORLIGHTS = {"tensorlights-2jobs": "2 jobs", "tensorlights": "4 jobs",
                "tensorlights-rr": "4 jobs, favoured server rotating every 2 s",
                "tensorlights-25g": "4 jobs, 25 Gb/s emulated"}  # gradswitch/specs/tensorlights.toml


def tensorlights_table(results: Path) -> str:
    runs = load(results, "dlcp-tensorlights.json")["tensorlights"]
    rows = []
    for name, r in runs.items():
        bound = r.get("machine_bound_repetitions") or []
        used = str(r["repetitions"]) + (f"; machine-bound: {', '.join(map(str, bound))}" if bound else "")
        rows.append([name, TENSORLIGHTS.get(name, "-"), num(r["baseline_avg_jct_s"]), num(r["tensorlights_avg_jct_s"]),
                     ratio(r["ratio"], r["ratio_min"], r["ratio_max"], bool(r["headline"])), used,
                     pct(r["busiest_link_load"]), idle(r["cpu_idle"])])
    return table(["run", "jobs (2 workers each)", "avg JCT s, baseline (median)", "avg JCT s, TensorLights (median)",
                  "TensorLights / baseline (ratio of avg JCTs)", "repetitions in the medians", "busiest link",
                  "CPU idle"], rows)


def learning_table(results: Path) -> str:
    learn = load(results, "training-learning.json")["learning"]
    rows = []
    for name, s in learn["runs"].items():
        vs = "1 (best baseline)" if name == learn["best_baseline"] else over_baseline(s)
        rows.append([name + check_mark(s), spread_cell(s, "time_to_accuracy_s"), vs,
                     spread_cell(s, "iterations_to_accuracy", 0), spread_cell(s, "final_accuracy", 3),
                     spread_cell(s, "max_relative_error"), spread_cell(s, "dlcp_dropped", 0),
                     spread_cell(s, "zero_filled_packets", 0), spread_cell(s, "retransmissions", 0),
                     spread_cell(s, "background_goodput_mbps"), spread_pct(s, "cpu_idle", low_mark=True),
                     repetitions(s)])
    return table(["run", "time to 90 % test accuracy s",
                  f"/ {learn['best_baseline']} (ratio of times: over 1 is slower)", "iterations to 90 %",
                  "final test accuracy", "max relative error of an iteration's gradient", "trimmed by switches",
                  "zero-filled", "resent", "bulk TCP Mb/s", "CPU idle", "repetitions in the medians"], rows)
