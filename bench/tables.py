"""The performance tables (docs/performance.md, and the README's claims), generated from the JSON under bench/results/.

Every table of docs/performance.md comes from here, after a line `<!-- table: NAME -->`, and so do the
README's headline tables (README_TABLES); tests/unit/test_readme_figures.py fails when a copy differs
from what the JSON gives (a benchmark was run again and the document was not). A cell holds a figure of
the JSON, a ratio of two of its figures (the column says so), or a figure's median with [min, max] over
the repetitions where the JSON keeps a `spread`. Marks:

- `(machine-bound)`: the run, or a run behind a ratio, was limited by the machine, not the links
  (gradswitch/experiment/bottleneck.py). A compare marks it in the JSON (`machine_bound`,
  `machine_bound_repetitions`); a JSON older than that field is judged here by the same rule from
  the busiest link's load and the idle CPU it kept. Never a headline.
- `(low)`: the machine's CPU was under 20 % idle (bottleneck.TARGET_CPU_IDLE), `(low in some)` in
  some repetitions.
- `(check failed: k of n)`: k of the run's n repetitions gave a result that was wrong or beyond its
  error bound (`correct: false`; a compare lists them in `check_failed_repetitions`). Such a run, and a
  ratio behind which one stands, is never a headline.

    python -m bench.tables            # every table, each after its marker line
    python -m bench.tables --write    # the same, written into docs/performance.md (and README.md) in place of the old
                                      # tables
    python -m bench.tables --check    # exit 1, naming the document, when a table there is outdated
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.crossval_collectives import host_pattern
from gradswitch.experiment.bottleneck import TARGET_CPU_IDLE, judge

RESULTS = Path(__file__).resolve().parent / "results"
README = Path(__file__).resolve().parent.parent / "README.md"
PERFORMANCE = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
SIMULATOR = Path(__file__).resolve().parent.parent / "docs" / "simulator.md"  # its cross-validation section
FAULTS = Path(__file__).resolve().parent.parent / "docs" / "faults.md"  # its recovery measurements
NETREDUCE_DOC = Path(__file__).resolve().parent.parent / "docs" / "netreduce.md"  # the simulator's RS/AG figures
README_TABLES = ("claims",)  # the headline figures the README keeps; every table is in docs/performance.md

Json = dict[str, Any]

MODELS = {"resnet50": "ResNet-50", "vgg16": "VGG-16", "bert-base": "BERT-base"}
MACHINE_BOUND = "(machine-bound)"


# ---- reading ----


def load(results: Path, name: str) -> Json:
    data: Json = json.loads((results / name).read_text())
    return data


def build(data: Json) -> str:
    """The BMv2 build a JSON was measured on: with logging macros compiled in or not."""
    tc = data.get("toolchain", {})
    bmv2 = tc.get("bmv2")
    if isinstance(bmv2, dict) and "logging_macros" in bmv2:
        return "logging macros" if bmv2["logging_macros"] else "no logging macros"
    text = f"{tc.get('bmv2_executable', '')} {tc.get('bmv2_build', '')}"  # before `bmv2` was recorded
    if "nolog" in text:
        return "no logging macros"
    return "logging macros" if "with logging macros" in text else "not recorded"


def machine_bound(run: Mapping[str, Any]) -> bool:
    """A run's `machine_bound` as the JSON marks it; for a JSON older than the field, bottleneck.judge's verdict
    from its busiest link's load (against its ideal's where it has one, else 1) and its idle CPU."""
    if "machine_bound" in run:
        return bool(run["machine_bound"])
    return bool(judge(run.get("cpu_idle"), run.get("busiest_link_load"), run.get("ideal_link_load")).machine_bound)


# ---- cells ----


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def num(v: Any, digits: int = 2) -> str:
    return f"{v:,.{digits}f}" if _is_number(v) else "-"


def _percent(v: float) -> str:
    """A share in percent: whole percents, one decimal under TARGET_CPU_IDLE (19.6 is under 20, its whole percent
    is not)."""
    return f"{100 * v:.1f}" if v < TARGET_CPU_IDLE else f"{100 * v:.0f}"


def pct(v: Any) -> str:
    return f"{_percent(v)} %" if _is_number(v) else "-"


def idle(v: Any) -> str:
    """The machine's idle CPU, marked `(low)` under TARGET_CPU_IDLE."""
    return pct(v) + (" (low)" if _is_number(v) and v < TARGET_CPU_IDLE else "")


def spread(run: Mapping[str, Any], key: str, digits: int = 2) -> str:
    """`median [min, max]` of a figure over a run's repetitions; the figure alone when they agree or the JSON keeps
    no spread for it."""
    s = run.get("spread", {}).get(key)
    if not s:
        return num(run.get(key), digits)
    text, lo, hi = num(s["median"], digits), num(s["min"], digits), num(s["max"], digits)
    return text if s["n"] < 2 or lo == hi else f"{text} [{lo}, {hi}]"


def spread_pct(run: Mapping[str, Any], key: str, low_mark: bool = False) -> str:
    """A share's `median [min, max]` in percent; with low_mark, `(low)` when the median is under TARGET_CPU_IDLE and
    `(low in some)` when only some repetitions were."""
    s = run.get("spread", {}).get(key)
    if not s:
        return idle(run.get(key)) if low_mark else pct(run.get(key))
    text = pct(s["median"])
    if s["n"] > 1 and pct(s["min"]) != pct(s["max"]):
        text += f" [{_percent(s['min'])}, {_percent(s['max'])}]"
    if low_mark and s["median"] < TARGET_CPU_IDLE:
        text += " (low)"
    elif low_mark and s["min"] < TARGET_CPU_IDLE:
        text += " (low in some)"
    return text


def ratio(value: Any, lo: Any, hi: Any, headline: bool = True) -> str:
    """A ratio of two runs' medians with [min, max] (one run's smallest repetition over the other's largest, and
    its largest over the other's smallest); marked when a run behind it was machine-bound."""
    text = f"{num(value)} [{num(lo)}, {num(hi)}]"
    return text if headline else f"{text} {MACHINE_BOUND}"


def over_baseline(run: Mapping[str, Any]) -> str:
    o = run.get("over_baseline")
    if not o:
        return "baseline"
    if check_failures(run)[0]:  # a result broke its check: never a headline
        return f"{num(o['ratio'])} [{num(o['min'])}, {num(o['max'])}]{check_mark(run)}, not a headline"
    return ratio(o["ratio"], o["min"], o["max"], bool(o["headline"]))


def repetitions(run: Mapping[str, Any]) -> str:
    """How many repetitions the medians use, of those done, and which were machine-bound or failed."""
    text = f"{run.get('headline_repetitions')} of {run.get('repetitions_done')}"
    bound, failed = run.get("machine_bound_repetitions") or [], run.get("failed_repetitions") or []
    if run.get("machine_bound"):
        text += ": all machine-bound (the medians are over all of them; not a headline)"
    elif bound:
        text += f"; machine-bound: {', '.join(str(b) for b in bound)}"
    if failed:
        text += f"; failed: {', '.join(str(f) for f in failed)}"
    return text


def check_failures(run: Mapping[str, Any]) -> tuple[int, int]:
    """How many of a run's repetitions broke their check (a result marked correct: false), of how many ran; from
    `check_failed_repetitions` where the compare kept it, else from the repetitions' own `correct`."""
    reps = [r for r in run.get("repetitions") or [] if not r.get("error")]
    kept = run.get("check_failed_repetitions")
    if kept is not None:
        return len(kept), len(reps) or run.get("repetitions_done") or len(kept)
    if reps:
        return sum(1 for r in reps if r.get("correct") is False), len(reps)
    return (1, 1) if run.get("correct") is False else (0, 1)


def check_mark(run: Mapping[str, Any]) -> str:
    """" (check failed: k of n)" for a run some of whose repetitions broke their check, "" otherwise."""
    bad, of = check_failures(run)
    return f" (check failed: {bad} of {of})" if bad else ""


def marked(text: str, bound: bool) -> str:
    return f"{text} {MACHINE_BOUND}" if bound else text


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def mib(size: Any) -> str:
    return f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size / 2**10:g} KiB"


# ---- one switch: transport, instructions, forwarding ----


def transport_table(results: Path) -> str:
    d = load(results, "transport.json")
    names = {"gbn": "go-back-N", "sr": "selective repeat"}
    rows = [[names.get(mode, mode), num(m["switch"]["goodput_mbps"], 0), num(m["direct"]["goodput_mbps"], 0),
             num(m["ratio"]), f"{m['switch']['retransmitted']}, {m['direct']['retransmitted']}", build(d)]
            for mode, m in d["modes"].items()]
    return table([f"transport: {mib(d['bytes'])} RoCE WRITE, MTU {d['mtu']}, one run", "through one BMv2 Mb/s",
                  "bare veth Mb/s", "BMv2 / veth", "resent (BMv2, veth)", "BMv2"], rows)


BEFORE_HEADERS = "before NetReduce's state became a header"
INSTRUCTION_FILES = (("first version", "-before"), (BEFORE_HEADERS, "-128fields"), ("now", ""))


def instructions_table(results: Path) -> str:
    rows = []
    for logging in ("-nolog", ""):
        for label, tag in INSTRUCTION_FILES:
            name = f"instructions{logging}{tag}.json"
            d = load(results, name)
            ours, base = d["per_packet"]["gradswitch"], d["per_packet"].get("one-table")
            rows.append(_instruction_row(build(d), f"gradswitch.p4, {label}", ours, base, name))
        rows.append(_instruction_row(build(d), "one-table program", base, None, name))
    return table(["BMv2", "program", "instructions per packet", "receive thread (zeroing metadata)",
                  "ingress thread", "egress thread", "transmit", "/ the one-table program's total in the same JSON",
                  "JSON"], rows)


def _instruction_row(bmv2: str, label: str, per: Json, base: Json | None, name: str) -> list[str]:
    return [bmv2, label, num(per["total"], 0), f"{num(per['receive'], 0)} ({num(per['reset_metadata'], 0)})",
            num(per["ingress"], 0), num(per["egress"], 0), num(per["transmit"], 0),
            num(per["total"] / base["total"]) if base else "-", name]


def forwarding_table(results: Path) -> str:
    rows = []
    for logging in ("-nolog", ""):
        for label, tag in ((BEFORE_HEADERS, "-before"), ("now", "")):
            name = f"forwarding{logging}{tag}.json"
            rows.append(_forwarding_row(load(results, name), label, name))
    return table(["BMv2", "gradswitch.p4", "packets/s, gradswitch.p4 vs one-table (the median run)",
                  "gradswitch.p4 / one-table, median [min, max] over runs", "runs", "machine-bound runs",
                  "CPU idle, gradswitch.p4 (median run)", "JSON"], rows)


def _forwarding_row(d: Json, label: str, name: str) -> list[str]:
    runs = d["runs"]
    median = next((r for r in runs if r["ratio"] == d["ratio"]), None)
    bound = [r for r in runs if machine_bound(r["gradswitch_limits"]) or machine_bound(r["minimal_limits"])]
    ratios = [r["ratio"] for r in runs]
    rates = f"{num(median['gradswitch_pps'] / 1e3, 0)} k vs {num(median['minimal_pps'] / 1e3, 0)} k" if median else "-"
    return [build(d), label, rates, ratio(d["ratio"], min(ratios), max(ratios)), str(len(runs)),
            f"{len(bound)} of {len(runs)}", idle(median["gradswitch_limits"]["cpu_idle"]) if median else "-", name]


# ---- collectives: all-reduce, NetReduce, the switch's aggregation rate ----


def allreduce_table(results: Path) -> str:
    rows = []
    for name in ("allreduce-5mbps.json", "allreduce-20mbps.json"):
        d = load(results, name)
        where = f"{d['bw_mbps']:g} Mb/s, {mib(d['size_bytes'])}, {build(d)}"
        for algo in ("ring", "ps"):
            rows += [[where, algo, str(r["workers"]), num(r["median_s"], 3), num(r["lower_bound_s"], 3),
                      marked(num(r["ratio_to_bound"]), machine_bound(r)), str(r["retransmissions"]),
                      pct(r["busiest_link_load"]), idle(r["cpu_idle"]), name]
                     for r in d["rows"] if r["algo"] == algo]
    return table(["links, tensor, BMv2", "algorithm", "N", "median s", "link-rate bound s", "time / bound", "resent",
                  "busiest link", "CPU idle", "JSON"], rows)


NETREDUCE_FILES = ("netreduce-10mbps.json", "netreduce-20mbps-nolog.json", "netreduce-50mbps-nolog.json",
                   "netreduce-5mbps.json")


def netreduce_table(results: Path) -> str:
    rows = []
    for name in NETREDUCE_FILES:
        d = load(results, name)
        where = f"{d['bw_mbps']:g} Mb/s, {mib(d['size_bytes'])}, {build(d)}"
        for r in d["rows"]:
            rows.append(_netreduce_row(r, where, d.get("iterations"), name))
    return table(["topology, N", "links, tensor, BMv2", "iterations", "NetReduce s", "NetReduce / its bound",
                  "ring / NetReduce (ratio of median times)", "ideal", "PS / NetReduce", "ideal",
                  "resent: NetReduce, ring, PS", "busiest link: NetReduce, ring, PS", "CPU idle: NetReduce, ring, PS",
                  "JSON"], rows)


def _netreduce_row(r: Json, where: str, iterations: Any, name: str) -> list[str]:
    algos = ("netreduce", "ring", "ps")
    lim, sent = r["limits"], r["retransmissions"]
    bound = {a: machine_bound(lim[a]) for a in algos}
    ring = marked(num(r["ring_over_netreduce"]), bound["netreduce"] or bound["ring"])
    ps = marked(num(r["ps_over_netreduce"]), bound["netreduce"] or bound["ps"])
    return [f"{r['topo']}, {r['workers']}", where, str(iterations), num(r["netreduce_s"], 3),
            num(r["netreduce_ratio_to_bound"]), ring, num(r["ideal_ring"]), ps,
            num(r["ideal_ps"]), ", ".join(str(sent[a]) for a in algos),
            ", ".join(pct(lim[a]["busiest_link_load"]) for a in algos),
            ", ".join(idle(lim[a]["cpu_idle"]) for a in algos), name]


def netreduce_switch_table(results: Path) -> str:
    rows = []
    for label, tag in (("now", "after"), ("before", "before")):
        for logging in ("log", "nolog"):
            name = f"netreduce-switch-{tag}-{logging}.json"
            d = load(results, name)
            bound = machine_bound({"cpu_idle": d["machine_cpu_idle"]})
            rows.append([label, build(d), str(d["elements_per_packet"]),
                         marked(num(d["contributions_per_s"], 0), bound), f"{num(d['values_per_s'] / 1e6)} M",
                         str(d["wrong_results"]), num(d["switch_busiest_thread_cpu"]), idle(d["machine_cpu_idle"]),
                         name])
    return table(["gradswitch.p4", "BMv2", "values per packet", "contributions/s", "values/s", "wrong results",
                  "switch's busiest thread, cores", "CPU idle", "JSON"], rows)


# ---- training speed-ups (bench/results/training-speedup.json: every run repeated) ----


def _speedup(results: Path) -> tuple[dict[str, Json], list[Json]]:
    sp = load(results, "training-speedup.json")["speedup"]
    runs: dict[str, Json] = sp["runs"]
    rows: list[Json] = sp["ratios"]
    return runs, rows


def _places(rows: list[Json]) -> list[tuple[str, str]]:
    return list(dict.fromkeys((r["model"], r["topo"]) for r in rows))


def _ratio_row(rows: list[Json], model: str, topo: str, what: str) -> Json:
    return next(r for r in rows if r["model"] == model and r["topo"] == topo and r["what"] == what)


def _pair_ratio(row: Json, bound: bool) -> str:
    """A ratio of two runs' medians, [min, max] beside it where the runs were repeated."""
    if "ratio_min" not in row:
        return marked(num(row["ratio"]), bound)
    return ratio(row["ratio"], row["ratio_min"], row["ratio_max"], bool(row.get("headline", True)) and not bound)


def _pair_bound(runs: dict[str, Json], *names: str) -> bool:
    return any(machine_bound(runs[n]) for n in names)


def training_netreduce_table(results: Path) -> str:
    runs, rows = _speedup(results)
    out = []
    for model, topo in _places(rows):
        for sched in ("fifo", "priority"):
            ring, nr = (f"{model}-{topo}-{algo}-{sched}" for algo in ("ring", "netreduce"))
            r = _ratio_row(rows, model, topo, f"NetReduce / ring ({sched})")
            a, b = runs[ring], runs[nr]
            out.append([MODELS.get(model, model), topo, sched, spread(a, "samples_per_s_real", 0),
                        spread(b, "samples_per_s_real", 0), _pair_ratio(r, _pair_bound(runs, ring, nr)),
                        num(r["ideal"]), f"{num(a['of_ideal'])}, {num(b['of_ideal'])}",
                        f"{pct(a['busiest_link_load'])} ({pct(a['ideal_link_load'])}), "
                        f"{pct(b['busiest_link_load'])} ({pct(b['ideal_link_load'])})", idle(r["cpu_idle"])])
    return table(["model", "topology", "scheduling", "ring samples/s", "NetReduce samples/s", "NetReduce / ring",
                  "ideal", "of ideal: ring, NetReduce", "busiest link: ring, NetReduce (a link-bound run's)",
                  "CPU idle (the lower)"], out)


def training_priority_table(results: Path) -> str:
    runs, rows = _speedup(results)
    out = []
    for model, topo in _places(rows):
        def cell(what: str, a: str, b: str, model: str = model, topo: str = topo) -> list[str]:
            r = _ratio_row(rows, model, topo, what)
            bound = _pair_bound(runs, f"{model}-{topo}-{a}", f"{model}-{topo}-{b}")
            return [_pair_ratio(r, bound), num(r["ideal"])]

        out.append([MODELS.get(model, model), topo, *cell("PS / ring (priority)", "ps-priority", "ring-priority"),
                    *cell("priority / FIFO (ring)", "ring-priority", "ring-fifo"),
                    *cell("priority / FIFO (ps)", "ps-priority", "ps-fifo"),
                    *cell("priority / FIFO (netreduce)", "netreduce-priority", "netreduce-fifo")])
    return table(["model", "topology", "PS / ring (priority)", "ideal", "ring: priority / FIFO", "ideal",
                  "PS: priority / FIFO", "ideal", "NetReduce: priority / FIFO", "ideal"], out)


# ---- DLCP (bench/results/training-dlcp.json), TensorLights, learning ----


def _dlcp(results: Path, name: str) -> Json:
    section: Json = load(results, "training-dlcp.json")["dlcp"][name]
    return section


def dlcp_contention_table(results: Path) -> str:
    c = _dlcp(results, "dlcp-contention")
    rows = []
    for name, s in c["runs"].items():
        vs = "1 (best baseline)" if name == c["best_baseline"] else over_baseline(s)
        rows.append([name + check_mark(s), spread(s, "samples_per_s_real", 1), vs, spread(s, "p99_s"),
                     spread(s, "retransmissions", 0), spread(s, "dlcp_dropped", 0), spread(s, "zero_filled_packets", 0),
                     spread(s, "max_relative_error"), spread(s, "background_goodput_mbps"),
                     spread_pct(s, "busiest_link_load"), spread_pct(s, "cpu_idle", low_mark=True), repetitions(s)])
    return table(["run", "samples/s (real)", f"/ {c['best_baseline']} (ratio of samples/s)", "p99 s", "resent",
                  "trimmed by switches", "zero-filled", "max relative error", "bulk TCP Mb/s", "busiest link",
                  "CPU idle", "repetitions in the medians"], rows)


BALANCING = {"ecmp": "ECMP", "flowlet": "flowlets, 50 ms gap", "flowlet-150ms": "flowlets, 150 ms gap",
             "spray": "spraying (DLCP)"}


def dlcp_spray_table(results: Path) -> str:
    c = _dlcp(results, "dlcp-spray")
    order = {b: i for i, b in enumerate(BALANCING)}
    placements = list(dict.fromkeys(name.split("-", 1)[0] for name in c["runs"]))
    names = sorted(c["runs"], key=lambda n: (placements.index(n.split("-", 1)[0]),
                                             order.get(n.split("-", 1)[1], len(order))))
    rows = []
    for name in names:
        s = c["runs"][name]
        place, how = name.split("-", 1)
        rows.append([place, BALANCING.get(how, how) + check_mark(s), spread(s, "samples_per_s_real", 0),
                     "1 (baseline)" if s.get("is_baseline") else over_baseline(s), spread(s, "uplink_imbalance"),
                     spread(s, "retransmissions", 0), spread_pct(s, "busiest_link_load"),
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
        rows.append([name + check_mark(s), spread(s, "time_to_accuracy_s"), vs, spread(s, "iterations_to_accuracy", 0),
                     spread(s, "final_accuracy", 3), spread(s, "max_relative_error"), spread(s, "dlcp_dropped", 0),
                     spread(s, "zero_filled_packets", 0), spread(s, "retransmissions", 0),
                     spread(s, "background_goodput_mbps"), spread_pct(s, "cpu_idle", low_mark=True), repetitions(s)])
    return table(["run", "time to 90 % test accuracy s",
                  f"/ {learn['best_baseline']} (ratio of times: over 1 is slower)", "iterations to 90 %",
                  "final test accuracy", "max relative error of an iteration's gradient", "trimmed by switches",
                  "zero-filled", "resent", "bulk TCP Mb/s", "CPU idle", "repetitions in the medians"], rows)


# ---- the papers' claims beside the testbed's figures ----


def _range(values: Sequence[float]) -> str:
    if not values:
        return "-"
    lo, hi = num(min(values)), num(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def _netreduce_claim(runs: dict[str, Json], rows: list[Json], models: set[str]) -> list[str]:
    """NetReduce / ring over the rows of `models` whose runs were not machine-bound: their range, their ideal's."""
    chosen, left = [], 0
    for r in rows:
        if r["model"] in models and r["what"].startswith("NetReduce / ring"):
            sched = r["what"].split("(")[1].rstrip(")")
            names = [f"{r['model']}-{r['topo']}-{algo}-{sched}" for algo in ("ring", "netreduce")]
            if _pair_bound(runs, *names):
                left += 1
            else:
                chosen.append(r)
    reps = sorted({n for r in chosen for n in r.get("repetitions", [1])})
    span = str(reps[0]) if reps[0] == reps[-1] else f"{reps[0]}-{reps[-1]}"
    each = "one run each" if reps == [1] else f"medians of {span} runs each"
    text = f"{_range([r['ratio'] for r in chosen])} ({len(chosen)} rows, {each}"
    text += f"; {left} machine-bound rows left out)" if left else ")"
    return [text, _range([r["ideal"] for r in chosen])]


def claims_table(results: Path) -> str:
    runs, rows = _speedup(results)
    cnn = _netreduce_claim(runs, rows, {"resnet50", "vgg16"})
    bert = _netreduce_claim(runs, rows, {"bert-base"})
    contention, spray = _dlcp(results, "dlcp-contention"), _dlcp(results, "dlcp-spray")
    dlcp = [f"{name} {over_baseline(s)}" for name, s in contention["runs"].items()
            if s.get("over_baseline") and name != "alone"]  # `alone` is the reference, not DLCP
    sprays = [f"{name.split('-')[0]} {over_baseline(s)}" for name, s in spray["runs"].items()
              if name.endswith("-spray")]
    lights = load(results, "dlcp-tensorlights.json")["tensorlights"]
    jct = [f"{TENSORLIGHTS[n]} {ratio(r['ratio'], r['ratio_min'], r['ratio_max'], bool(r['headline']))}"
           for n in ("tensorlights", "tensorlights-2jobs") if (r := lights.get(n))]
    return table(["claim", "paper", "testbed", "ideal here"], [
        ["NetReduce / ring, training speed, CNNs (ResNet-50, VGG-16; 4 workers)", "up to 1.7x", *cnn],
        ["NetReduce / ring, training speed, transformers (BERT-base; 4 workers)", "up to 1.5x", *bert],
        [f"DLCP / {contention['best_baseline']}, training speed of a job under contention (synthetic gradients)",
         "up to +84 %", "; ".join(dlcp), "-"],
        ["DLCP's spraying / ECMP on the same placement, training speed (synthetic gradients)", "-",
         "; ".join(sprays), "-"],
        ["TensorLights / FIFO, average job completion time", "-31 %", "; ".join(jct), "-"],
    ])


# ---- all of them ----


# ---- the simulator against the testbed (bench/results/crossval.json) ----


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


# ---- the simulator's speed (bench/results/ns3-speed.json) ----


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


def switch_faults_table(results: Path) -> str:
    """bench/switch_faults.py: the controller's detection and rerouting times, a switch's restart."""
    data = json.loads((results / "switch-faults.json").read_text())
    s = data["summary"]
    mark = " (machine-bound)" if machine_bound(data) else ""

    def ms(key: str) -> str:
        return f"{s[key]['median'] * 1000:.0f} [{s[key]['min'] * 1000:.0f}-{s[key]['max'] * 1000:.0f}]"

    rows = [["spine1's process killed" + mark, ms("switch_detect_s"), ms("switch_reroute_s"), ms("switch_gap_s"),
             f"restarted, forwarding again: {ms('restart_s')}"],
            ["leaf1-spine1 cut (set_link, patched)" + mark, ms("link_detect_s"), ms("link_reroute_s"), ms("link_gap_s"),
             f"up: noticed {ms('link_up_detect_s')}, flow through spine1 {ms('link_back_s')}"]]
    return table([f"fault ({data['rounds']} rounds, ms: median [min-max])", "detected", "rerouted",
                  f"flow's longest gap ({data['flow']['rate_pps']:g} packets/s)", "back"], rows)


def sim_faults_table(results: Path) -> str:
    """bench/sim_faults.py: per fault on ns-3, detection (the assumed delay), recovery, iterations lost and the
    job's iterations/s before, during and after (medians [min-max] over the seeds)."""
    data = json.loads((results / "sim-faults.json").read_text())

    def spread(v: Any, scale: float = 1.0, digits: int = 0) -> str:
        if v is None:
            return "-"
        lo, mid, hi = (f"{v[k] * scale:.{digits}f}" for k in ("min", "median", "max"))
        return mid if lo == hi else f"{mid} [{lo}-{hi}]"

    rows = []
    for s in data["summary"].values():
        before, during, after = (spread(s[f"throughput_{p}"], digits=2) for p in ("before", "during", "after"))
        rows.append([f"{s['fabric']} ({s['workers']} workers): {', '.join(s['faults'])}", "/".join(s["outcomes"]),
                     spread(s["time_to_detect_s"], 1000), spread(s["time_to_recover_s"], 1000),
                     spread(s["recover_over_rto"], digits=2), spread(s["iterations_lost"]), before, during, after,
                     spread(s["during_over_clean"], digits=2), spread(s["after_over_clean"], digits=2),
                     f"{s['exact']} of {s['runs']}" + ("" if "interrupted" not in s["outcomes"] else
                                                      f" ({s['completed']['median']:.0f} of "
                                                      f"{data['iterations'][s['fabric']]} iterations kept)")])
    return table([f"fault ({data['model']} x{data['scale']:g}, {data['algo']}, {data['rate_mbps'] / 1000:g} Gb/s, "
                  f"seeds {len(data['seeds'])}: median [min-max])", "outcome", "detected ms (assumed)",
                  "recovered ms", "recovered / RTO", "iterations lost", "it/s before", "it/s during",
                  "it/s after", "during / clean", "after / clean", "exact"], rows)


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


def sim_netreduce_fallback_table(results: Path) -> str:
    """bench/sim_netreduce_fallback.py: NetReduce's fallback and return on ns-3 against the BMv2 runs of the same
    scenario (medians [min-max] over the ECMP seeds; the ratio to BMv2's median)."""
    data = json.loads((results / "sim-netreduce-fallback.json").read_text())

    def cell(case: dict[str, Any], key: str) -> str:
        v, ratio = case["ns3"][key], case["ns3_over_bmv2"][key]
        lo, mid, hi = (f"{v[k] * 1000:.0f}" if key in ("fallback_s", "return_s") else f"{v[k]:.3f}"
                       for k in ("min", "median", "max"))
        return (mid if lo == hi else f"{mid} [{lo}-{hi}]") + f" ({ratio:.2f}x)"

    rows = []
    for case in data["cases"].values():
        setup = case["setup"]
        rows.append([f"{setup['bw_mbps']:g} Mb/s" + (" (BMv2 machine-bound)" if case["bmv2_machine_bound"] else ""),
                     *(cell(case, k) for k in ("fallback_s", "return_s", "before_s", "during_s", "after_s")),
                     f"{case['ring_over_netreduce']['ns3']:.2f} / {case['ring_over_netreduce']['bmv2']:.2f}",
                     "yes" if case["all_exact"] else "NO"])
    return table([f"every link (ns-3, seeds {data['seeds']}; x: over BMv2's median)", "switch-down -> all on ring ms",
                  "switch-up -> all back ms", "iteration before s", "on ring s", "after s",
                  "ring / in-network ns-3 / BMv2", "exact"], rows)


def goodput_table(results: Path) -> str:
    """bench/goodput.py: goodput of a 1,024-worker job over 30 days with checkpoint restart or recovery in place."""
    data = json.loads((results / "goodput.json").read_text())
    s = data["study"]
    rows = []
    for key, name in (("checkpoint_restart", "checkpoint restart"), ("in_place", "recovery in place")):
        r = s["strategies"][key]
        g = r["goodput"]
        how = (f"every {r['interval_s'] / 60:.0f} min (Young/Daly), write {r['write_s']:g} s, "
               f"restart {r['restart_s']:g} s" if key == "checkpoint_restart" else
               f"spare joins in {r['rejoin_s']:g} s, reroute {r['reroute_s']:g} s")
        rows.append([name, how, f"{g['mean']:.4f} [{g['low']:.4f}-{g['high']:.4f}]",
                     f"{r['failures']['mean']:.1f} [{r['failures']['low']:.0f}-{r['failures']['high']:.0f}]",
                     num(r["lost_h"]), num(r["down_h"]), num(r["checkpoint_h"]), num(r["degraded_h"], 3),
                     f"{r['effective_samples_per_s']:,.0f}"])
    return table([f"{data['workers']} workers, {s['hours'] / 24:g} days ({s['seeds']} seeds: mean [min-max])",
                  "surviving a failure", "goodput", "failures", "work lost h", "down h", "checkpoints h",
                  "degraded iterations h", "samples/s"], rows)


def goodput_sensitivity_table(results: Path) -> str:
    """bench/goodput.py: goodput against the failure rates and the restart cost (means over the seeds)."""
    s = json.loads((results / "goodput.json").read_text())["study"]
    restart = s["strategies"]["checkpoint_restart"]["restart_s"]
    rows = [[f"x {r['rate_scale']:g}", num(r["job_mtbf_h"], 1), f"{r['young_interval_s'] / 60:.0f}", f"{restart:g}",
             f"{r['checkpoint_restart']:.4f}", f"{r['in_place']:.4f}", num(r["in_place"] / r["checkpoint_restart"], 3)]
            for r in s["rate_sweep"]]
    rows += [["x 1", num(s["job_mtbf_h"], 1), f"{s['young_daly_interval_s'] / 60:.0f}", f"{r['restart_s']:g}",
              f"{r['checkpoint_restart']:.4f}", f"{r['in_place']:.4f}", num(r["in_place"] / r["checkpoint_restart"], 3)]
             for r in s["restart_sweep"] if r["restart_s"] != restart]
    return table(["failure rates (x Llama 3's)", "job MTBF h", "checkpoint interval min", "restart s",
                  "checkpoint restart", "recovery in place", "in place / restart"], rows)


def goodput_interval_table(results: Path) -> str:
    """bench/goodput.py: checkpoint restart's goodput against its interval, around Young/Daly's."""
    s = json.loads((results / "goodput.json").read_text())["study"]
    best = max(p["goodput"] for p in s["interval_sweep"])
    rows = [[num(p["of_young"], 3), f"{p['interval_s'] / 60:.1f}", f"{p['goodput']:.4f}",
             ", ".join(([] if p["of_young"] != 1 else ["Young/Daly's"]) + (["the sweep's best"] if p["goodput"] == best
                                                                           else []))]
            for p in s["interval_sweep"]]
    return table([f"checkpoint interval (x Young/Daly's {s['young_daly_interval_s'] / 60:.1f} min)", "minutes",
                  f"goodput (mean of {s['seeds']} runs of {s['sweep_hours'] / 24:g} days)", ""], rows)


def goodput_fabric_table(results: Path) -> str:
    """bench/goodput.py: the job's iteration on ns-3 with the fabric intact and with one element gone."""
    data = json.loads((results / "goodput.json").read_text())
    f = data["fabric"]
    rows = [[r["label"], r["removed"] or "-", num(r["iteration_s"] * 1000, 3),
             num(r["iteration_s"] / f["iteration_s"], 4), pct(r["busiest_link_load"]), "yes" if r["ok"] else "**no**"]
            for r in f["runs"]]
    rows += [[cls, "not measured: the largest measured slowdown", num(f["degraded_s"][cls] * 1000, 3),
              num(f["degraded_s"][cls] / f["iteration_s"], 4), "-", "-"]
             for cls, how in f["how"].items() if how.startswith("not measured")]
    return table([f"fabric ({data['model']}, {data['algo']}, {data['workers']} workers, "
                  f"{data['topology']['name']} k = {data['topology']['k']})", "element gone", "iteration ms",
                  "over intact", "busiest link", "exact"], rows)


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

    rows = [[MODELS.get(r["model"], r["model"]), algos[r["algo"]], str(r["workers"]),
             num(r["iteration_s_study"] * 1000, 3), num(r["iteration_s"] * 1000, 3), f"{r['over_study']:.4f}",
             "yes" if r["within_tolerance"] else "**no**", "yes" if r["checked"] else "**no**",
             pair(r, "sim_cpu_s", "loop_sim_cpu_s"), pair(r, "sim_wall_s", "loop_sim_wall_s"),
             f"{r['wall_s']:.1f}" if "sim_cpu_s" in r else "-",
             pair(before(r), "wall_s", "wall_s_study")]
            for r in doc["rows"]]
    return table(["model (fat tree, 100 Gb/s)", "all-reduce", "workers", "training loop: iteration ms",
                  "graph engine: iteration ms", "graph / loop", f"within {tol}", "exact (digest)",
                  "simulator CPU s, 3 iterations each: graph / loop", "simulator run wall s: graph / loop",
                  "graph's whole run wall s", "before: wall s graph (whole run, 3 iterations) / loop (study, 2)"],
                 rows)


TRAINING_GRAPH_10 = "training-graph-10mbps.json"  # the same jobs at 10 Mb/s (D = 8), where NetReduce keeps up
TRAINING_GRAPH_LEAFSPINE_5 = "training-graph-leafspine-5mbps.json"  # the 2x2 leaf-spine's, at 5 Mb/s (D = 16)
TRAINING_GRAPH_PRIORITY_10 = "training-graph-priority-10mbps.json"  # ByteScheduler's partitions, at 10 Mb/s (D = 8)
TRAINING_GRAPH_PS = "training-graph-ps.json"  # the table's parameter-server rows (--algos ring,ps), at 20 Mb/s
TRAINING_GRAPH_LEAFSPINE_PRIORITY_5 = "training-graph-leafspine-priority-5mbps.json"  # theirs on the leaf-spine


def training_graph_table(results: Path, name: str = "training-graph.json") -> str:
    """bench/training_graph.py: the training speed-up table's ring and NetReduce (or parameter-server) runs as graphs
    on BMv2's hosts, against the training loop's runs of the same jobs the same day and against the table's loop
    figures; NetReduce / ring (or PS / ring) on each."""
    doc = load(results, name)

    def spread(s: Json | None) -> str:
        return "-" if s is None else f"{s['median']:.0f} [{s['min']:.0f}-{s['max']:.0f}]"

    def counted(s: Json | None, used: int, of: int) -> str:
        return f"{spread(s)} ({used} of {of})"

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
                     spread(r["samples_per_s_real_loop"]), versus(r, "over_loop", "within_spread"),
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


CROSSVAL_COLLECTIVES_4 = "crossval-collectives-4mbps.json"  # N = 8 at 4 Mb/s, where 8 Python hosts keep up
CROSSVAL_COLLECTIVES_N2 = "crossval-collectives-n2.json"  # N = 2 at 8 Mb/s (--workers 2 --tag n2)
# the leaf-spine at N = 8 and 2 Mb/s (--workers 8 --bw 2 --topos leafspine), where its NetReduce runs keep up
CROSSVAL_COLLECTIVES_2 = "crossval-collectives-2mbps.json"
# the DLCP pair's loop and graph parts at 2.5 Mb/s (--only dlcp,dlcp-graph --dlcp-bw 2.5), where this machine keeps up
CROSSVAL_DLCP_25 = "crossval-dlcp-dlcp-graph-dlcp2.5mbps.json"
# the loop's DLCP pair again with the testbed's TCP streams on the simulator's ports (background_fixed_ports)
CROSSVAL_DLCP_25_FIXED = "crossval-dlcp-dlcp2.5mbps-fixedports.json"
CROSSVAL_20 = "crossval-20mbps.json"  # the same study at 20 Mb/s, where BMv2 is machine-bound for NetReduce at N >= 4

TABLES: dict[str, Callable[[Path], str]] = {
    "transport": transport_table,
    "instructions": instructions_table,
    "forwarding": forwarding_table,
    "allreduce": allreduce_table,
    "netreduce": netreduce_table,
    "netreduce-switch": netreduce_switch_table,
    "claims": claims_table,
    "training-netreduce": training_netreduce_table,
    "training-priority": training_priority_table,
    "dlcp-contention": dlcp_contention_table,
    "dlcp-spray": dlcp_spray_table,
    "tensorlights": tensorlights_table,
    "learning": learning_table,
}
# Tables of measurements that are optional: in the README only once their JSON is in bench/results/.
OPTIONAL_TABLES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "crossval": ("crossval.json", crossval_table),
    "crossval-rankings": ("crossval.json", crossval_rankings_table),
    "crossval-20mbps": (CROSSVAL_20, lambda results: crossval_table(results, CROSSVAL_20)),
    "crossval-collectives": ("crossval-collectives.json", crossval_collectives_table),
    "crossval-collectives-4mbps": (CROSSVAL_COLLECTIVES_4,
                                   lambda results: crossval_collectives_table(results, CROSSVAL_COLLECTIVES_4)),
    "crossval-collectives-n2": (CROSSVAL_COLLECTIVES_N2,
                                lambda results: crossval_collectives_table(results, CROSSVAL_COLLECTIVES_N2)),
    "crossval-dlcp-2.5mbps": (CROSSVAL_DLCP_25, lambda results: crossval_table(results, CROSSVAL_DLCP_25)),
    "crossval-dlcp-2.5mbps-fixedports": (CROSSVAL_DLCP_25_FIXED,
                                         lambda results: crossval_table(results, CROSSVAL_DLCP_25_FIXED)),
    "crossval-engines-dlcp-2.5mbps": (CROSSVAL_DLCP_25,
                                      lambda results: crossval_engines_table(results, CROSSVAL_DLCP_25)),
    "crossval-collectives-2mbps": (CROSSVAL_COLLECTIVES_2,
                                   lambda results: crossval_collectives_table(results, CROSSVAL_COLLECTIVES_2)),
    "ns3-speed": ("ns3-speed.json", ns3_speed_table),
    "ns3-profile": ("ns3-profile.json", ns3_profile_table),
    "ns3-schedulers": ("ns3-profile.json", ns3_schedulers_table),
    "mpi-scaling": ("mpi-scaling.json", mpi_scaling_table),
    "mpi-projection": ("mpi-scaling.json", mpi_projection_table),
    "scaling": ("scaling.json", scaling_table),
    "scaling-bandwidth": ("scaling.json", scaling_bandwidth_table),
    "scaling-dlcp": ("scaling.json", scaling_dlcp_table),
    "switch-faults": ("switch-faults.json", switch_faults_table),
    "sim-faults": ("sim-faults.json", sim_faults_table),
    "sim-netreduce-fallback": ("sim-netreduce-fallback.json", sim_netreduce_fallback_table),
    "sim-netreduce-rs-ag": ("sim-netreduce-rs-ag.json", sim_netreduce_rs_ag_table),
    "scaling-graph": ("scaling-graph.json", scaling_graph_table),
    "training-graph": ("training-graph.json", training_graph_table),
    "training-graph-10mbps": (TRAINING_GRAPH_10, lambda results: training_graph_table(results, TRAINING_GRAPH_10)),
    "training-graph-ps": (TRAINING_GRAPH_PS, lambda results: training_graph_table(results, TRAINING_GRAPH_PS)),
    "training-graph-leafspine-5mbps": (TRAINING_GRAPH_LEAFSPINE_5,
                                        lambda results: training_graph_table(results, TRAINING_GRAPH_LEAFSPINE_5)),
    "training-graph-priority-10mbps": (TRAINING_GRAPH_PRIORITY_10,
                                        lambda results: training_graph_table(results, TRAINING_GRAPH_PRIORITY_10)),
    "training-graph-leafspine-priority-5mbps": (
        TRAINING_GRAPH_LEAFSPINE_PRIORITY_5,
        lambda results: training_graph_table(results, TRAINING_GRAPH_LEAFSPINE_PRIORITY_5)),
    "goodput": ("goodput.json", goodput_table),
    "goodput-sensitivity": ("goodput.json", goodput_sensitivity_table),
    "goodput-fabric": ("goodput.json", goodput_fabric_table),
    "goodput-interval": ("goodput.json", goodput_interval_table),
}


def marker(name: str) -> str:
    return f"<!-- table: {name} -->"


def generate(results: Path = RESULTS) -> dict[str, str]:
    tables = {name: make(results) for name, make in TABLES.items()}
    tables |= {name: make(results) for name, (needs, make) in OPTIONAL_TABLES.items() if (results / needs).exists()}
    return tables


def update_readme(text: str, tables: Mapping[str, str]) -> str:
    """`text` with the table after each `<!-- table: NAME -->` line (its lines that start with `|`) replaced by
    tables[NAME]; a marker with no such table gets one."""
    for name, body in tables.items():
        pattern = re.compile(rf"^{re.escape(marker(name))}\n(?:\|[^\n]*\n?)*", re.MULTILINE)
        text = pattern.sub(_literal(f"{marker(name)}\n{body}\n"), text)
    return text


def _literal(new: str) -> Callable[[re.Match[str]], str]:
    """re.sub's replacement for `new` as it is (a string would have its backslashes read as escapes)."""
    return lambda _match: new


def stale(tables: Mapping[str, str]) -> list[str]:
    """The documents whose tables differ from `tables` (what `--write` would change)."""
    headline = {name: tables[name] for name in README_TABLES}
    documents = [(PERFORMANCE, tables), (SIMULATOR, tables), (README, headline)]
    documents += [(doc, tables) for doc in (FAULTS, NETREDUCE_DOC) if doc.exists()]
    return [str(doc) for doc, wanted in documents if update_readme(doc.read_text(), wanted) != doc.read_text()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the JSON's directory (default bench/results)")
    parser.add_argument("--write", action="store_true",
                        help="replace the tables in docs/performance.md and README.md after their markers")
    parser.add_argument("--check", action="store_true",
                        help="exit 1, naming the documents, when a table there is not what the JSON gives")
    args = parser.parse_args()
    tables = generate(args.results)
    if args.check:
        outdated = stale(tables)
        for doc in outdated:
            print(f"{doc}: its tables are not what {args.results} gives: run `python -m bench.tables --write`")
        raise SystemExit(1 if outdated else 0)
    if args.write:
        PERFORMANCE.write_text(update_readme(PERFORMANCE.read_text(), tables))
        print(f"written {len(tables)} tables into {PERFORMANCE}")
        SIMULATOR.write_text(update_readme(SIMULATOR.read_text(), tables))
        for path in (FAULTS, NETREDUCE_DOC):
            if path.exists():
                path.write_text(update_readme(path.read_text(), tables))
        headline = {name: tables[name] for name in README_TABLES}
        README.write_text(update_readme(README.read_text(), headline))
        print(f"written {len(headline)} into {README}")
        return
    for name, body in tables.items():
        print(f"{marker(name)}\n{body}\n")


if __name__ == "__main__":
    main()

