"""Cross-validation of the ns-3 simulator against the testbed (docs/simulator.md).

The same experiment specs run on BMv2 (the testbed: Python hosts, BMv2 switches, HTB-shaped veths) and on
ns-3 (`backend = ns3`), at the testbed's link rates, MTU and queue depths, the simulator given the testbed's
own costs as bench.testbed_costs measured them once (bench/results/testbed-costs.json: a switch's per-packet
delay, a Python host's per-message delay; never fitted to these runs) and no propagation delay (veths):

- all-reduce: ring, NetReduce and PS (one server) at N = 2, 4, 8 on `rack` and the 2x2 leaf-spine;
- a training speed-up pair: ResNet-50 on 4 emulated V100s, ring and NetReduce (FIFO buckets, layer sync), the
  emulated cluster's 10 Gb/s links dilated to the testbed's 20 Mb/s (D = 4), both backends with that dilation;
- a DLCP pair: VGG-16 training under bulk TCP on the leaf-spine, `baseline-class` (every RoCE packet in one
  class above TCP) against DLCP priority on top of it.
- collectives (bench/crossval_collectives.py; not in the default set, `--only collectives` writes
  bench/results/crossval-collectives.json): ring all-reduce, reduce-scatter and all-gather, pairwise all-to-all,
  broadcast and send/recv as the graph engines run them, at N = 4 and 8 on both fabrics; per pair the graph's
  time and its time over ring all-reduce's.
- training-graph (bench/crossval_training_graph.py; not in the default set, `--only training-graph` writes
  bench/results/crossval-training-graph.json): the training pair as execution graphs on both graph engines, the
  simulator's computation dilated as BMv2's; each run's median iteration and the speed-up.
- dlcp-graph (the same module; `--only dlcp-graph` writes bench/results/crossval-dlcp-graph.json): the DLCP pair
  as execution graphs on both graph engines, each partition's all-reduce in its DLCP layer class. `--dlcp-bw`
  runs the DLCP pair (loop and graph) at another link rate (results named ...-dlcpRATEmbps).

The allreduce, training and dlcp parts run their specs on the default engine (the graph engine; --engine loop: on
each algorithm's training loop, as their published figures were measured). A loop part run on the loop with its
graph part (`--only dlcp,dlcp-graph --engine loop`, `--only training,training-graph --engine loop`) also sets each
run's graph beside its loop on each backend (bench/crossval_engines.py; `runs.graph_vs_loop` in the JSON). The JSON
records the engines that ran its parts (`engines`).

Each BMv2 run is repeated (--repeat, default 3: seed, seed + 1, ...) and its figure is the median over the
repetitions that were not machine-bound (gradswitch/experiment/bottleneck.py; a pair without 3 such is not
judged); the simulator runs the same seeds. Per pair: the median iteration within 10 %; per (topology, N) the
ratios ring / NetReduce and PS / NetReduce within 10 % and the same ranking of the three algorithms; the
training speed-up (NetReduce / ring samples/s) and DLCP / baseline within 10 %. Writes the table, and
bench/results/crossval.json and crossval.png; the runs' own reports under --out (started again with the
same --out it resumes). Needs root, BMv2, Mininet and the built simulator. BMv2 runs want an idle machine:
--quiet holds /tmp/gradswitch-quiet while they run (other helpers pause their heavy work).

    python -m bench.crossval [--only allreduce,training,dlcp,collectives,training-graph,dlcp-graph]
                             [--topos rack,leafspine]
                             [--workers 2,4,8]
                             [--dlcp-bw 5] [--repeat 3] [--out runs/bench-crossval] [--bmv2 PATH] [--quiet]
                             [--tag TAG] [--engine graph|loop]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import RESULTS, bmv2_option, save, spec_engines, use_bmv2
from bench.crossval_engines import EngineAgreement, compare_engines
from bench.testbed_costs import COSTS, load_costs, quiet_machine
from gradswitch.experiment.compare import CompareSpec, run_compare
from gradswitch.experiment.crossval import ALGOS, MIN_REPETITIONS, TOLERANCE, Figure, judge_allreduce, judge_pair
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.spec import Backend, Engine, ExperimentSpec, SimOptions, Topo, spec_from_dict
from gradswitch.experiment.summary_file import Summary
from gradswitch.workload.job import Algorithm

# The all-reduce runs' link rate: at 8 Mb/s BMv2 summing 8 workers' packets leaves the CPU idle enough to judge every
# pair; at 20 Mb/s NetReduce at N >= 4 is machine-bound (bench/results/crossval-20mbps.json).
DEFAULT_BW_MBPS = 8.0
# The DLCP pair's link rate (the loop's pair was judged there on 2026-11-25); --dlcp-bw runs it at another, e.g.
# where a slower machine leaves the CPU idle enough to judge it.
DLCP_BW_MBPS = 5.0
PARTS = ("allreduce", "training", "dlcp", "collectives", "training-graph", "dlcp-graph")


def simulated(spec: ExperimentSpec, costs: dict[str, float]) -> ExperimentSpec:
    """The spec on ns-3, with the testbed's measured costs, no propagation delay and links that pass a packet on
    as it leaves their shaper (veths shaped by HTB: a switch has a packet as soon as the previous hop's token
    bucket lets it go, where a wire would serialize it first: 4 ms per 4 KiB packet and hop at 8 Mb/s)."""
    sim = SimOptions(link_delay_us=0.0, switch_delay_us=costs["switch_delay_us"], host_delay_us=costs["host_delay_us"],
                     shaped_links=True)
    return spec.but(backend=Backend.NS3, sim=sim, name=f"{spec.name}-ns3")


def allreduce_specs(topos: list[str], workers: list[int], bw: float, size: int, iterations: int
                    ) -> list[ExperimentSpec]:
    out = []
    for topo in topos:
        for n in workers:
            for algo in ALGOS:
                out.append(ExperimentSpec.of(name=f"{topo}-n{n}-{algo}", algo=algo, workers=n, topo=Topo(topo),
                                             size_bytes=size, bw_mbps=bw, iterations=iterations))
    return out


def training_specs() -> list[ExperimentSpec]:
    base = spec_from_dict({"workers": 4, "bw_mbps": 20, "scale": 0.008, "workload": "resnet50", "iterations": 4,
                           "warmup": 1, "sync": "layer", "scheduling": "fifo", "bucket_mb": 25,
                           "emulate": {"link_gbps": 10, "device": "v100", "precision": "fp32", "batch": 32}})
    return [base.but(name=f"training-{algo}", algo=algo) for algo in (Algorithm.RING, Algorithm.NETREDUCE)]


def dlcp_specs(bw_mbps: float = DLCP_BW_MBPS) -> list[ExperimentSpec]:
    base = spec_from_dict({"algo": "ring", "workers": 4, "topo": "leafspine", "bw_mbps": bw_mbps, "background_flows": 4,
                           "workload": "vgg16", "scale": 0.002, "sync": "layer", "scheduling": "priority",
                           "partition_mb": 16, "iterations": 5, "warmup": 1, "transport": "sr", "mtu": 1024,
                           "roce_class": True, "background_fixed_ports": True,
                           "emulate": {"link_gbps": 10, "device": "v100", "precision": "fp32", "batch": 32}})
    return [replace(base, name="dlcp-baseline-class"),
            spec_from_dict({"name": "dlcp-priority", "dlcp": {"priority": True}}, base)]


# ---- running: BMv2 runs of one topology on one network, ns-3 runs on their own ----


class Runner:
    def __init__(self, runs: list[ExperimentSpec], net_dir: Path) -> None:
        from bench.training import SharedNetworks

        self.bmv2 = SharedNetworks([r for r in runs if not r.network.simulated], net_dir)

    def __call__(self, spec: ExperimentSpec, out_dir: Path) -> Results:
        if spec.network.simulated:
            from gradswitch.experiment.runner import run_experiment

            return run_experiment(spec, out_dir, progress=False)
        return self.bmv2(spec, out_dir)

    def close(self) -> None:
        self.bmv2.close()


def group(spec: ExperimentSpec) -> tuple[Any, ...]:
    return ("ns3",) if spec.network.simulated else ("bmv2", spec.network.topo, spec.network.leaves, spec.network.spines,
                                                    spec.network.bw_mbps)


def run_pairs(name: str, bmv2_runs: list[ExperimentSpec], costs: dict[str, float], out: Path, repeat: int,
              quiet: bool = False) -> Summary:
    """Every BMv2 run `repeat` times (holding the quiet flag while they run) and its simulated twin with the same
    seeds; the compare summary (medians over the repetitions that were not machine-bound) by run name."""
    runs = bmv2_runs + [simulated(r, costs) for r in bmv2_runs]
    spec = CompareSpec(f"crossval-{name}", runs, repeat=repeat)
    runner = Runner(runs, out / spec.name)
    try:
        with quiet_machine(quiet):
            return run_compare(spec, out / spec.name, runner, log=_log, group=group)
    finally:
        runner.close()


# ---- judging: gradswitch.experiment.crossval (judge_allreduce, judge_pair) ----


# ---- reporting ----


def table(figures: list[Figure], rankings: list[dict[str, Any]]) -> str:
    lines = [f"{'figure':<44}{'BMv2':>10}{'ns-3':>10}{'ns-3/BMv2':>11}  verdict"]
    for f in figures:
        verdict = {True: "within 10 %", False: "DIFFERS", None: "not judged (BMv2 machine-bound or missing)"}[f.within]
        error = f"{f.error:+.1%}" if f.error is not None else "-"
        lines.append(f"{f.what:<44}{_num(f.bmv2):>10}{_num(f.ns3):>10}{error:>11}  {verdict}")
    for r in rankings:
        verdict = {True: "same ranking", False: "RANKING DIFFERS", None: "not judged"}[r["same"]]
        tied = "; tied within 10 %: " + ", ".join(" = ".join(t) for t in r["ties"]) if r.get("ties") else ""
        lines.append(f"{r['what'] + ': fastest first':<44}{' < '.join(r['bmv2']):>21}  ns-3: {' < '.join(r['ns3'])}  "
                     f"{verdict}{tied}")
    return "\n".join(lines)


def _num(v: float | None) -> str:
    return f"{v:.4g}" if v is not None else "-"


def plot(figures: list[Figure], path: Path) -> None:
    """ns-3 against BMv2 per figure: the ratio, with the 10 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [f for f in figures if f.error is not None]
    fig, ax = plt.subplots(figsize=(8, 0.22 * len(shown) + 1.5))
    y = list(range(len(shown)))[::-1]
    colors = ["tab:green" if f.within else "tab:red" if f.within is False else "tab:grey" for f in shown]
    ratios = [1 + (f.error or 0.0) for f in shown]
    ax.barh(y, ratios, color=colors, left=0)
    ax.axvspan(1 - TOLERANCE, 1 + TOLERANCE, color="tab:green", alpha=0.12)
    ax.axvline(1.0, color="black", lw=0.8)
    for yi, r in zip(y, ratios, strict=True):
        if abs(r - 1) > TOLERANCE:  # a figure outside the band says how far
            ax.text(r, yi, f" {r:.2f}", va="center", fontsize=6)
    ax.set_yticks(y, [f.what for f in shown], fontsize=6)
    ax.set_xlim(min(0.5, 0.1 * int(10 * min(ratios, default=1.0)) - 0.1), max(1.5, 1.1 * max(ratios, default=1.0)))
    ax.set_xlabel("ns-3 / BMv2 (green band: within 10 %; red: outside it;\ngrey: BMv2 side machine-bound, not judged)")
    ax.set_title("cross-validation: the simulator against the testbed, same specs", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # (a long figure's name would be cut at the left)
    plt.close(fig)


def _log(line: str) -> None:
    if line.startswith("[") or "failed" in line:
        print(line, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked: a bad value is one line before anything starts (before the machine's lock is
    waited for)."""
    parser = argparse.ArgumentParser(prog="python -m bench.crossval", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="allreduce,training,dlcp",
                        help="allreduce, training, dlcp, collectives, training-graph, dlcp-graph (comma-separated)")
    parser.add_argument("--topos", default="rack,leafspine")
    parser.add_argument("--workers", default="2,4,8")
    parser.add_argument("--bw", type=float, default=DEFAULT_BW_MBPS,
                        help=f"all-reduce runs' link rate, Mb/s (default {DEFAULT_BW_MBPS:g})")
    parser.add_argument("--dlcp-bw", type=float, default=DLCP_BW_MBPS,
                        help=f"the DLCP pair's link rate, Mb/s (dlcp and dlcp-graph; default {DLCP_BW_MBPS:g})")
    parser.add_argument("--size", type=int, default=512 << 10, help="all-reduce bytes (default 512 KiB)")
    parser.add_argument("--collective-bytes", type=int, default=1 << 20,
                        help="the collectives part's buffer S (default 1 MiB; all-gather: S / N a rank)")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of every run (default 3)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-crossval"))
    parser.add_argument("--costs", type=Path, default=COSTS, help="the testbed's measured costs")
    parser.add_argument("--quiet", action="store_true", help="hold /tmp/gradswitch-quiet while BMv2 runs")
    parser.add_argument("--tag", default="", help="ends the results' name (crossval-PARTS[-RATEmbps][-TAG].json): "
                        "keeps a measurement of other workers or fabrics beside the default one")
    parser.add_argument("--engine", type=Engine, choices=list(Engine),
                        help="what runs the allreduce, training and dlcp parts (default: each spec's, the graph "
                        "engine)")
    bmv2_option(parser)
    args = parser.parse_args(argv)
    if args.tag and not args.tag.replace("-", "").isalnum():
        parser.error(f"--tag {args.tag!r}: letters, digits and '-' only (it ends a file name), e.g. n2")
    if not args.dlcp_bw > 0:
        parser.error(f"--dlcp-bw {args.dlcp_bw:g}: give the DLCP pair's link rate in Mb/s, above 0 (default "
                     f"{DLCP_BW_MBPS:g})")
    unknown = [p for p in args.only.split(",") if p not in PARTS]
    if unknown:
        parser.error(f"--only {args.only}: unknown part {unknown[0]!r}; give some of {', '.join(PARTS)}, "
                     f"comma-separated")
    return args


def main(args: argparse.Namespace) -> None:
    costs = load_costs(args.costs, str(use_bmv2(args)))
    print(f"testbed costs ({args.costs}): switch {costs['switch_delay_us']:.1f} us per packet, host "
          f"{costs['host_delay_us']:.1f} us per message", flush=True)
    parts = args.only.split(",")
    topos, workers = args.topos.split(","), [int(n) for n in args.workers.split(",")]
    started = time.monotonic()
    figures: list[Figure] = []
    rankings: list[dict[str, Any]] = []
    summaries: dict[str, Any] = {}
    ran: list[ExperimentSpec] = []

    def on_engine(specs: list[ExperimentSpec]) -> list[ExperimentSpec]:
        """A spec part's runs on --engine (each spec's own without it), noted as run."""
        chosen = [s.but(engine=args.engine) for s in specs] if args.engine is not None else specs
        ran.extend(chosen)
        return chosen

    if "allreduce" in parts:
        runs = on_engine(allreduce_specs(topos, workers, args.bw, args.size, args.iterations))
        summaries["allreduce"] = run_pairs("allreduce", runs, costs, args.out, args.repeat, args.quiet)
        f, r = judge_allreduce(summaries["allreduce"], topos, workers)
        figures += f
        rankings += r
    if "training" in parts:
        summaries["training"] = run_pairs("training", on_engine(training_specs()), costs, args.out, args.repeat,
                                          args.quiet)
        figures += judge_pair(summaries["training"], "training speed-up: NetReduce / ring (samples/s)",
                              "training-netreduce", "training-ring")
    if "dlcp" in parts:
        summaries["dlcp"] = run_pairs("dlcp", on_engine(dlcp_specs(args.dlcp_bw)), costs, args.out, args.repeat,
                                      args.quiet)
        figures += judge_pair(summaries["dlcp"], "DLCP priority / baseline-class (samples/s)", "dlcp-priority",
                              "dlcp-baseline-class")
    if "collectives" in parts:
        from bench import crossval_collectives as cc

        workers_c = workers if args.workers != "2,4,8" else [4, 8]
        plan = cc.Plan(args.bw, args.collective_bytes, args.repeat, MIN_REPETITIONS, args.repeat, costs, simulated)
        store = cc.run_all(plan, topos, workers_c, args.out / "crossval-collectives")
        figures += cc.judge(store.runs, topos, workers_c, MIN_REPETITIONS)
        summaries["collectives"] = {"nbytes": args.collective_bytes, "bw_mbps": args.bw, "workers": workers_c,
                                    "topos": topos, "runs": cc.rows(store, topos, workers_c)}
    graph_pairs = {"training-graph": ("training", training_specs(),
                                      "training graph speed-up: NetReduce / ring (samples/s)"),
                   "dlcp-graph": ("dlcp", dlcp_specs(args.dlcp_bw),
                                  "DLCP graph: priority / baseline-class (samples/s)")}
    engines: list[EngineAgreement] = []
    for part, (loop_part, specs, ratio) in graph_pairs.items():  # a loop part's pair as graphs on both graph engines
        if part not in parts:
            continue
        from bench import crossval_training_graph as tg

        with quiet_machine(args.quiet):
            store = tg.run_all(specs, simulated, costs, args.repeat, MIN_REPETITIONS, args.repeat,
                               args.out / f"crossval-{part}")
        figures += tg.judge(store, specs[0].label, specs[1].label, MIN_REPETITIONS, ratio)
        summaries[part] = {"runs": tg.rows(store, [s.label for s in specs])}
        ran_on_loop = all(s.algorithm.engine == Engine.LOOP for s in ran if s.label in {x.label for x in specs})
        if loop_part in summaries and ran_on_loop:  # both engines measured here: the graph's beside the loop's
            engines += compare_engines(summaries[loop_part], store, [s.label for s in specs], MIN_REPETITIONS)
    print(table(figures, rankings))
    judged = [f for f in figures if f.within is not None] + [r for r in rankings if r["same"] is not None]
    passed = sum(1 for f in figures if f.within) + sum(1 for r in rankings if r["same"])
    print(f"{passed} of {len(judged)} judged figures agree ({len(figures) + len(rankings) - len(judged)} not judged)")
    if engines:
        print("the graph engine against the training loop, each backend (bench/crossval_engines.py):")
        for e in engines:
            print("  " + e.line())
        summaries["graph_vs_loop"] = [e.row() for e in engines]
    name = "crossval" if args.only == "allreduce,training,dlcp" else "crossval-" + args.only.replace(",", "-")
    if args.bw != DEFAULT_BW_MBPS:
        name += f"-{args.bw:g}mbps"
    if args.dlcp_bw != DLCP_BW_MBPS and {"dlcp", "dlcp-graph"} & set(parts):
        name += f"-dlcp{args.dlcp_bw:g}mbps"
    if args.tag:
        name += f"-{args.tag}"
    plot(figures, RESULTS / f"{name}.png")
    path = save(name, {"tolerance": TOLERANCE, "min_repetitions": MIN_REPETITIONS, "repeat": args.repeat,
                       "costs": costs, "costs_file": str(args.costs), "figures": [f.row() for f in figures],
                       "rankings": rankings, "agree": passed, "judged": len(judged),
                       "wall_s": time.monotonic() - started, "runs": summaries},
                engines=spec_engines(ran) + ([Engine.GRAPH] if {"collectives", *graph_pairs} & set(parts) else []))
    print(f"written {path} and {RESULTS / f'{name}.png'}; reports under {args.out}")


if __name__ == "__main__":
    from gradswitch.net.bmv2 import one_switch_user_at_a_time

    arguments = parse_args()
    with one_switch_user_at_a_time():
        main(arguments)
