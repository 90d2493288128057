"""Training speed-ups as ratios of real-equivalent training throughput, measured in one run.

Runs the compare specs gradswitch/specs/training-speedup.toml (ResNet-50, VGG-16, BERT-base; ring,
PS and NetReduce; FIFO buckets and priority partitions; rack and 2x2 leaf-spine),
gradswitch/specs/dlcp-contention.toml (a training job under contention, DLCP's mechanisms in turn,
against its baselines) and gradswitch/specs/dlcp-spray.toml (spraying where ECMP's flow hashing
collides), each run as many times as the spec's `repeat` says (or --repeat), and prints the
ratios of samples_per_s_real (N x batch / real-equivalent iteration):

- NetReduce / ring and PS / ring, per model and topology, under the same scheduling;
- priority / FIFO per model, topology and algorithm;
- each DLCP run / the best of its spec's baselines, and spraying and flowlets / ECMP on the same placement;
- (learning, gradswitch/specs/training.toml: a real model) time to 90 % test accuracy / the best baseline's;

each the ratio of the two runs' medians over their repetitions, with its min and max (one run's
smallest repetition over the other's largest, and its largest over the other's smallest), next to the
ideal ratio (both runs' iterations with every reduction at its link-rate bound on the emulated
cluster, gradswitch/hosts/ideal.py) and with what limited the runs it compares: the busiest link's load
(near what the ideal keeps: the links) and the machine's idle CPU during the iterations (near 0:
the machine). Repetitions that were machine-bound (gradswitch/experiment/bottleneck.py) are left
out of the medians; a ratio whose runs had no other is marked and is not a headline. Runs of
one topology share one network (the same switches and links). Full reports (report.md,
summary.json, plots) land in --out; started again with the same --out, a run resumes where it
stopped (every complete repetition is kept). The figures go to bench/results/training-speedup.json,
training-dlcp.json or training-learning.json with --only, all three in training.json without. Every run runs on
its spec's engine (the default: the graph engine); `--engine loop|graph` runs them all on that one instead (their
reports under --out in SPEC-ENGINE/) and names the results ...-ENGINE.json (`--only learning --engine graph`:
training-learning-graph.json), to set beside the default's. The JSON records the engines (`engines`).
Needs root, BMv2, Mininet.

    python -m bench.training [--out runs/bench-training] [--only speedup|dlcp|learning] [--repeat N]
                             [--models resnet50,vgg16,bert-base] [--topos rack,leafspine] [--engine loop|graph]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import RESULTS, bmv2_option, save, spec_engines, use_bmv2
from gradswitch.experiment.compare import TRAINING_FIGURE, CompareSpec, best_baseline, load_spec, ratio_of, run_compare
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.shipped_specs import EXPERIMENTS
from gradswitch.experiment.spec import Engine, ExperimentSpec
from gradswitch.experiment.summary_file import Summary
from gradswitch.net.bmv2 import one_switch_user_at_a_time

SPECS = EXPERIMENTS  # the shipped compare specs (gradswitch/specs/)


# ---- runs sharing networks ----


def _network_key(spec: ExperimentSpec) -> tuple[Any, ...]:
    return (spec.network.topo, spec.network.leaves, spec.network.spines, spec.network.bw_mbps)


class SharedNetworks:
    """A compare runner that keeps one network up for consecutive runs of the same topology kind,
    sized for the largest of them; the networks' own files go under `net_dir`."""

    def __init__(self, runs: list[ExperimentSpec], net_dir: Path) -> None:
        self.runs = runs
        self.net_dir = net_dir
        self._stack = contextlib.ExitStack()
        self._key: tuple[Any, ...] | None = None
        self._net: Any = None
        self._networks = 0

    def __call__(self, spec: ExperimentSpec, out_dir: Path) -> Results:
        from gradswitch.experiment.placement import topology_for
        from gradswitch.experiment.runner import run_on
        from gradswitch.experiment.testbed import Testbed
        from gradswitch.net.network import NetworkOptions

        key = _network_key(spec)
        if key != self._key:
            self._stack.close()
            biggest = max((r for r in self.runs if _network_key(r) == key), key=lambda r: r.hosts_needed())
            self._networks += 1
            self._net = self._stack.enter_context(Testbed(topology_for(biggest), NetworkOptions(
                run_dir=self.net_dir / f"net{self._networks}-{spec.network.topo}")))
            self._key = key
        return run_on(self._net, spec, out_dir, progress=False)

    def close(self) -> None:
        self._stack.close()


def run(spec: CompareSpec, out: Path, repeat: int | None = None) -> Summary:
    """The compare spec's runs (every repetition, the complete ones left from an earlier start
    skipped), runs of one topology kind on one network, one after another; their reports in out/SPEC-NAME/."""
    if repeat is not None:
        spec = replace(spec, repeat=repeat)
    runner = SharedNetworks(spec.runs, out / spec.name)
    try:
        return run_compare(spec, out / spec.name, runner, log=_log, group=_network_key)
    finally:
        runner.close()


# ---- ratios ----


def limits(*runs: Mapping[str, Any]) -> dict[str, float | None]:
    """What limited the runs a ratio compares, the least link-bound of them: the busiest link's load,
    the load a link-bound run with that computation reaches (the ideal iteration's), and the idle CPU."""
    def share(r: Mapping[str, Any]) -> float:
        return float(r.get("busiest_link_load") or 0.0) / float(r.get("ideal_link_load") or 1.0)

    known = [r for r in runs if r.get("busiest_link_load") is not None]
    least = min(known, key=share) if known else {}
    idle = [float(r["cpu_idle"]) for r in runs if r.get("cpu_idle") is not None]
    return {"busiest_link_load": least.get("busiest_link_load"), "ideal_link_load": least.get("ideal_link_load"),
            "cpu_idle": min(idle) if idle else None}


def compared(what: str, a: Mapping[str, Any], b: Mapping[str, Any], **where: str) -> dict[str, Any]:
    """Run a's training throughput over run b's (medians over their repetitions, the ratio's min and
    max beside), measured and ideal (every reduction at its link bound, gradswitch/hosts/ideal.py), with what
    limited the two runs. `headline`: neither run was machine-bound in every repetition."""
    r = ratio_of(a, b, TRAINING_FIGURE) if a and b else ratio_of({}, {}, TRAINING_FIGURE)
    ideal = ratio_of(a, b, "ideal_samples_per_s_real")["ratio"] if a and b else None
    return {**where, "what": what, "ratio": r["ratio"], "ratio_min": r["min"], "ratio_max": r["max"],
            "headline": r["headline"], "ideal": ideal, "of_ideal": [a.get("of_ideal"), b.get("of_ideal")],
            "repetitions": [a.get("headline_repetitions"), b.get("headline_repetitions")], **limits(a, b)}


def speedup(out: Path, models: list[str], topos: list[str], repeat: int | None, engine: Engine | None = None
            ) -> dict[str, Any]:
    spec = on_engine(load_spec(SPECS / "training-speedup.toml"), engine)
    spec = replace(spec, runs=[r for r in spec.runs if r.workload.workload in models and str(r.network.topo) in topos])
    summary = run(spec, out, repeat)
    runs = {r.label: r for r in spec.runs}
    rows = []
    for model in models:
        for topo in topos:
            def name(algo: str, sched: str, model: str = model, topo: str = topo) -> str:
                return f"{model}-{topo}-{algo}-{sched}"

            for sched in ("fifo", "priority"):
                ring, ps, nr = (summary.get(name(a, sched), {}) for a in ("ring", "ps", "netreduce"))
                rows.append(compared(f"NetReduce / ring ({sched})", nr, ring, model=model, topo=topo))
                rows.append(compared(f"PS / ring ({sched})", ps, ring, model=model, topo=topo))
            for algo in ("ring", "ps", "netreduce"):
                fifo, prio = summary.get(name(algo, "fifo"), {}), summary.get(name(algo, "priority"), {})
                rows.append(compared(f"priority / FIFO ({algo})", prio, fifo, model=model, topo=topo))
    print(f"\n{'run':<34}{'samples/s [min, max]':>24}{'ideal':>8}{'iter ms':>9}{'exposed s':>10}{'overlap':>8}"
          f"{'link':>6}{'idle':>6}{'resent':>7}  (D) repetitions used")
    for label, s in summary.items():
        d = runs[label].dilation if label in runs else None
        iteration = s.get("iteration_s")
        print(f"{label:<34}{_spread(s, TRAINING_FIGURE, 24)}{_f(s.get('ideal_samples_per_s_real'), 8, 0)}"
              f"{_f((iteration / d * 1e3) if iteration and d else None, 9, 0)}"
              f"{_f(s.get('exposed_comm_s'), 10)}{_pct(s.get('overlap'), 8)}{_pct(s.get('busiest_link_load'), 6)}"
              f"{_pct(s.get('cpu_idle'), 6)}{_f(s.get('retransmissions'), 7, 0)}  {d or '-'} {_used(s)}")
    _print_ratios(rows)
    plot_speedup(summary, models, topos, RESULTS / "training-speedup.png")
    return {"runs": summary, "ratios": rows}


def plot_speedup(summary: Mapping[str, Mapping[str, Any]], models: list[str], topos: list[str], path: Path) -> None:
    """Real-equivalent samples/s per model and topology: ring, PS and NetReduce side by side, FIFO
    hatched and priority solid, each with its ideal (every reduction at its link-rate bound) as a tick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ring": "tab:blue", "ps": "tab:orange", "netreduce": "tab:green"}
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.8), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        x = 0.0
        ticks, labels = [], []
        for topo in topos:
            ticks.append(x + 2.5 * 0.45)
            labels.append(topo)
            for algo, color in colors.items():
                for sched in ("fifo", "priority"):
                    h = summary.get(f"{model}-{topo}-{algo}-{sched}", {})
                    value = h.get("samples_per_s_real") or 0.0
                    sp = h.get("spread", {}).get("samples_per_s_real")
                    err = [[value - sp["min"]], [sp["max"] - value]] if sp and value else None
                    ax.bar(x, value, 0.42, color=color, yerr=err, capsize=2,
                           hatch="//" if sched == "fifo" else None, alpha=0.55 if sched == "fifo" else 1.0,
                           label=f"{algo} {sched}" if topo == topos[0] else None)
                    if h.get("ideal_samples_per_s_real"):
                        ax.plot([x - 0.21, x + 0.21], [h["ideal_samples_per_s_real"]] * 2, color="black", lw=1.2)
                    x += 0.45
            x += 0.6
        ax.set_xticks(ticks, labels)
        ax.set_title(model)
        ax.set_ylabel("samples/s (real-equivalent)")
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=6, fontsize=8)
    fig.suptitle("training throughput, N = 4: medians, bars min to max over the repetitions (black ticks: every "
                 "reduction at its link-rate bound)", fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def dlcp(out: Path, repeat: int | None, engine: Engine | None = None) -> dict[str, Any]:
    """dlcp-contention (DLCP's runs against the best of its baselines) and dlcp-spray (spraying
    against ECMP): every run's median throughput over the best baseline's, min and max beside."""
    figures: dict[str, Any] = {}
    for spec_name in ("dlcp-contention", "dlcp-spray"):
        spec = on_engine(load_spec(SPECS / f"{spec_name}.toml"), engine)
        if not spec.baselines:
            raise SystemExit(f"error: gradswitch/specs/{spec_name}.toml names no baselines: give "
                             "baselines = [\"run\", ...] (the runs DLCP is measured against)")
        summary = run(spec, out, repeat)
        best = best_baseline(spec, summary, TRAINING_FIGURE)

        # each run against the best baseline it is measured against (the spec's baselines_within)
        base_of = {name: best_baseline(spec, summary, TRAINING_FIGURE, name) for name in summary}
        rows = [{**compared(f"{name} / {base_of[name]} ({spec_name})", s, summary.get(base_of[name] or "", {})),
                 "baseline": base_of[name],
                 "p99_ratio": ratio_of(s, summary[b], "p99_s")["ratio"] if (b := base_of[name]) else None,
                 "retransmissions": s.get("retransmissions"), "dlcp_dropped": s.get("dlcp_dropped"),
                 "zero_filled_packets": s.get("zero_filled_packets"), "max_relative_error": s.get("max_relative_error"),
                 "background_goodput_mbps": s.get("background_goodput_mbps"),
                 "uplink_imbalance": s.get("uplink_imbalance")}
                for name, s in summary.items() if name not in spec.baselines]
        print(f"\n{spec_name}: best baseline {best or '(none usable)'} of {', '.join(spec.baselines)}")
        print(f"{'run':<28}{'samples/s [min, max]':>24}{'p99 s':>8}{'resent':>7}{'dropped':>8}{'zeroed':>7}"
              f"{'bulk Mb/s':>10}{'uplinks max/mean':>17}{'link':>6}{'idle':>6}  repetitions used")
        for name, s in summary.items():
            print(f"{name:<28}{_spread(s, TRAINING_FIGURE, 24)}{_f(s.get('p99_s'))}"
                  f"{_f(s.get('retransmissions'), 7, 0)}{_f(s.get('dlcp_dropped'), 8, 0)}"
                  f"{_f(s.get('zero_filled_packets'), 7, 0)}{_f(s.get('background_goodput_mbps'), 10, 2)}"
                  f"{_f(s.get('uplink_imbalance'), 17, 2)}{_pct(s.get('busiest_link_load'), 6)}"
                  f"{_pct(s.get('cpu_idle'), 6)}  {_used(s)}")
        _print_ratios(rows)
        for plot in ("figures.png", "links.png"):
            if (out / spec.name / plot).exists():
                shutil.copy(out / spec.name / plot, RESULTS / f"{spec.name}-{plot}")
        figures[spec_name] = {"runs": summary, "baselines": spec.baselines, "best_baseline": best, "ratios": rows}
    return figures


def on_engine(spec: CompareSpec, engine: Engine | None) -> CompareSpec:
    """The spec's runs on `engine` (None: the spec as it is, each run on its own engine), named SPEC-ENGINE so that
    their reports stay apart from the default's; the runs the engine does not take left out, said."""
    if engine is None:
        return spec
    runs = [r.but(engine=engine) for r in spec.runs]
    kept = [r for r in runs if not r.engine_problems()]
    for r in runs:
        if r.engine_problems():
            print(f"{r.label}: left out on engine {engine}: {r.engine_problems()[0]}")
    names = {r.label for r in kept}
    return replace(spec, name=f"{spec.name}-{engine}", runs=kept,
                   baselines=[b for b in spec.baselines if b in names])


def learning(out: Path, repeat: int | None, engine: Engine | None = None) -> dict[str, Any]:
    """gradswitch/specs/training.toml: a real model (train-digits) under bulk TCP, exact against DLCP's dropping by the
    switches: per run the training time and iterations to 90 % test accuracy, the final accuracy, the gradient's
    error, what the switches trimmed and the receivers zero-filled, the bulk streams' goodput; each run's median
    time to accuracy over the best baseline's. `engine`: the engine every run runs on (None: each run's own)."""
    spec = on_engine(load_spec(SPECS / "training.toml"), engine)
    summary = run(spec, out, repeat)
    figure = "time_to_accuracy_s"
    best = best_baseline(spec, summary, figure)
    base = summary.get(best, {}) if best else {}
    rows = []
    print(f"\ntraining (learning): best baseline {best or '(none usable)'} of {', '.join(spec.baselines)} "
          f"by {figure}")
    print(f"{'run':<22}{'time to 90 % s [min, max]':>28}{'iterations':>11}{'final acc':>10}{'median s':>9}"
          f"{'rel. err':>9}{'dropped':>8}{'zeroed':>7}{'resent':>7}{'bulk Mb/s':>10}{'idle':>6}  repetitions used")
    for name, s in summary.items():
        print(f"{name:<22}{_spread(s, figure, 28)}{_f(s.get('iterations_to_accuracy'), 11, 0)}"
              f"{_f(s.get('final_accuracy'), 10)}{_f(s.get('median_s'), 9)}{_f(s.get('max_relative_error'), 9, 2)}"
              f"{_f(s.get('dlcp_dropped'), 8, 0)}{_f(s.get('zero_filled_packets'), 7, 0)}"
              f"{_f(s.get('retransmissions'), 7, 0)}{_f(s.get('background_goodput_mbps'), 10, 2)}"
              f"{_pct(s.get('cpu_idle'), 6)}  {_used(s)}")
        if name not in spec.baselines and base:
            r = ratio_of(s, base, figure)
            rows.append({"what": f"{name} / {best}: time to 90 % test accuracy", "ratio": r["ratio"],
                         "ratio_min": r["min"], "ratio_max": r["max"], "headline": r["headline"],
                         "median_ratio": ratio_of(s, base, "median_s")["ratio"], **limits(s, base)})
    for r in rows:
        span = f"{r['ratio']:.2f} [{r['ratio_min']:.2f}, {r['ratio_max']:.2f}]" if r["ratio"] is not None else "-"
        print(f"{r['what']:<60}{span:>20}  (median iteration {_f(r['median_ratio'], 0, 2)})")
    suffix = "" if engine is None else f"-{engine}"
    if (out / spec.name / "learning.png").exists():
        shutil.copy(out / spec.name / "learning.png", RESULTS / f"training-learning{suffix}.png")
    return {"runs": summary, "baselines": spec.baselines, "best_baseline": best, "figure": figure, "ratios": rows}


def _print_ratios(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'ratio of samples/s (real), medians':<52}{'ratio [min, max]':>20}{'ideal':>7}  limited by")
    for r in rows:
        where = f"{r['model']}, {r['topo']}: " if "model" in r else ""
        span = (f"{r['ratio']:.2f} [{r['ratio_min']:.2f}, {r['ratio_max']:.2f}]" if r.get("ratio") is not None
                else "-")
        note = "" if r.get("headline") or r.get("ratio") is None else " (machine-bound: not a headline)"
        print(f"{where + r['what']:<52}{span:>20}{_f(r.get('ideal'), 7, 2)}  {verdict(r)}{note}")


def verdict(row: dict[str, Any]) -> str:
    """What limited the runs behind a ratio, from the busiest link's load (against what a link-bound
    run with the same computation reaches: the links idle while every GPU computes) and the idle CPU."""
    load, idle, full = row.get("busiest_link_load"), row.get("cpu_idle"), row.get("ideal_link_load")
    text = (f"busiest link {_pct(load, 0).strip()} (link-bound: {_pct(full, 0).strip()}), "
            f"CPU {_pct(idle, 0).strip()} idle")
    if load is not None and load >= 0.9 * (full or 1.0):
        return f"{text}: the links"
    if idle is not None and idle < 0.1:
        return f"{text}: the machine (no CPU left)"
    return f"{text}: neither saturated (latency: per-message costs of BMv2 and the Python hosts)"


def _f(v: float | None, width: int = 8, digits: int = 3) -> str:
    return f"{v:>{width}.{digits}f}" if isinstance(v, int | float) else f"{'-':>{width}}"


def _spread(s: Mapping[str, Any], key: str, width: int) -> str:
    """A run's median of `key` with [min, max] over its repetitions."""
    sp = s.get("spread", {}).get(key)
    if not sp:
        return f"{'-':>{width}}"
    text = f"{sp['median']:.1f}" + (f" [{sp['min']:.1f}, {sp['max']:.1f}]" if sp["n"] > 1 else "")
    return f"{text:>{width}}"


def _used(s: Mapping[str, Any]) -> str:
    """Repetitions in the medians, of those done, and which were machine-bound."""
    text = f"{s.get('headline_repetitions', 0)}/{s.get('repetitions_done', 0)}"
    bound = s.get("machine_bound_repetitions") or []
    return text + (f", machine-bound: {bound}" if bound else "")


def _pct(v: float | None, width: int) -> str:
    return f"{v:>{width}.0%}" if isinstance(v, int | float) else f"{'-':>{width}}"


def _log(line: str) -> None:
    if line.startswith("[") or "failed" in line:  # progress: [k/n] run (repetition), skipped or started
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-training"))
    parser.add_argument("--only", choices=("speedup", "dlcp", "learning"))
    parser.add_argument("--models", default="resnet50,vgg16,bert-base")
    parser.add_argument("--topos", default="rack,leafspine")
    parser.add_argument("--repeat", type=int, help="repetitions of every run (default: each spec's `repeat`)")
    parser.add_argument("--engine", type=Engine, choices=list(Engine),
                        help="what runs every run's iterations (default: each spec's own, the graph engine unless it "
                        "names the loop); names the results ...-ENGINE.json")
    bmv2_option(parser)
    args = parser.parse_args()
    if args.repeat is not None and args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: at least 1 repetition")
    use_bmv2(args)
    figures: dict[str, Any] = {}
    started = time.monotonic()
    if args.only in (None, "speedup"):
        figures["speedup"] = speedup(args.out, args.models.split(","), args.topos.split(","), args.repeat,
                                     args.engine)
    if args.only in (None, "dlcp"):
        figures["dlcp"] = dlcp(args.out, args.repeat, args.engine)
    if args.only in (None, "learning"):
        figures["learning"] = learning(args.out, args.repeat, args.engine)
    figures["wall_s"] = time.monotonic() - started
    name = f"training-{args.only}" if args.only else "training"
    if args.engine is not None:
        name += f"-{args.engine}"
    parts = {"speedup": ("training-speedup",), "dlcp": ("dlcp-contention", "dlcp-spray"), "learning": ("training",)}
    ran = [on_engine(load_spec(SPECS / f"{s}.toml"), args.engine) for part, names in parts.items()
           if args.only in (None, part) for s in names]
    path = save(name, figures, engines=spec_engines(r for spec in ran for r in spec.runs))
    print(f"reports under {args.out}; written {path}")


if __name__ == "__main__":
    with one_switch_user_at_a_time():  # no test or other benchmark on the switches meanwhile
        main()
