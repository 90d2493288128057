"""The scaling study: training throughput against N from 8 to 1024 workers on the ns-3
simulator, every link at 100 Gb/s, computation at real speed (dilation 1).

- Models: ResNet-50, VGG-16, BERT-base (one emulated V100 per worker, FP32, batch 32; DDP's FIFO buckets of
  25 MB, iteration sync); above 512 workers ResNet-50 alone.
- Algorithms: ring all-reduce (topology-aware rank order) on a k-ary fat tree; a sharded parameter server
  (one server per worker, each on a host of its own, keys of 64 KiB) on the fat tree; NetReduce
  hierarchical (`netreduce-hier`: the fat tree's edge, aggregation and core switches all aggregate); NetReduce
  flat (`netreduce-flat`: two levels as the P4 program has them, the leaves and one spine of a non-blocking
  two-tier leaf-spine of the same size: leaves of up to 32 hosts, as many spines as hosts per leaf).
- Beside them: the linear ideal (N x one GPU's throughput) and each algorithm's ideal (every reduction at
  its link-rate bound, gradswitch/hosts/ideal.py: ring 2(N-1)/N S/B, NetReduce S/B).
- Where in-network aggregation pays (`--only bandwidth`): at 100 Gb/s an emulated V100 computes longer than
  ring needs to reduce its gradients, so NetReduce's byte saving hides behind computation. The same three
  models at 64 workers with links of 10, 25 and 40 Gb/s (100 from the study itself), ring against
  hierarchical NetReduce: at what rate the papers' 1.7x (CNN) and 1.5x (transformer) appear.
- DLCP under contention (`--only dlcp`): two ResNet-50 ring jobs of 64 workers each placed at random on an
  oversubscribed leaf-spine (8 leaves of 17 hosts, 2 spines: 8.5:1) with 16 bulk TCP flows, queues of 1 MiB
  per priority: baseline-class (RoCE in one class above TCP) against DLCP priority, priority + drop and
  priority + drop + spray on top of it (drop: trimming over 256 KiB of virtual queue, a 10 % loss budget).

- Spurious timeouts (`--only rto`): VGG-16's PS at 512 workers is the study's one run whose retransmission
  timers fired, every resent packet already received (no queue dropped one): its RTT grew past the smallest
  RTO (a full queue's time, placement.min_rto) faster than the RTT estimate followed. The same run with a
  smallest RTO of six full queues (the data path's host NIC and five switch hops) says what they cost.

Every run is a directory of its own under --out with its results.json; started again with the same --out the
study skips complete runs (resumable), and `--shard K/N` runs every N-th run from the K-th so that two
processes can share the work. Long runs print the simulator's progress. Writes bench/results/scaling.json
and scaling-*.png from every complete run found under --out.

    python -m bench.scaling [--only scaling,dlcp,bandwidth,rto] [--models resnet50,vgg16,bert-base]
                            [--workers 8,...,1024] [--algos ring,ps,netreduce-hier,netreduce-flat]
                            [--out runs/bench-scaling]
                            [--shard K/N] [--report-only] [--resummarize]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import RESULTS, spec_engines
from gradswitch.experiment.compare import CompareSpec, completed_report, run_compare
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import Engine, ExperimentSpec, spec_from_dict
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, engines_field
from gradswitch.protocol.queues import buffer_bytes

RATE_MBPS = 100_000.0
MODELS = ("resnet50", "vgg16", "bert-base")
WORKERS = (8, 16, 32, 64, 128, 256, 512, 1024)
RESNET_ONLY_ABOVE = 512
ALGOS = ("ring", "ps", "netreduce-hier", "netreduce-flat")
PAPER_SPEEDUP = 1.7  # NetReduce over ring, CNNs (the NetReduce paper)
PAPER_SPEEDUP_TRANSFORMER = 1.5  # and transformers
BANDWIDTH_WORKERS = 64
BANDWIDTH_RATES_MBPS = (10_000.0, 25_000.0, 40_000.0)  # and RATE_MBPS, from the study's own runs
BANDWIDTH_ALGOS = ("ring", "netreduce-hier")
MODEL_COLORS = dict(zip(MODELS, ("tab:blue", "tab:red", "tab:purple"), strict=True))
HOSTS_PER_LEAF = 32  # netreduce-flat's leaf-spine: leaves of at most this many hosts


def base_spec(rate_mbps: float = RATE_MBPS) -> ExperimentSpec:
    """Every run's settings; the emulated cluster's links are the simulated ones (dilation 1)."""
    return spec_from_dict({"backend": "ns3", "bw_mbps": rate_mbps, "iterations": 2, "warmup": 1,
                           "sim": {"check": "digest"},
                           "emulate": {"device": "v100", "precision": "fp32", "batch": 32}})


def scaling_spec(model: str, n: int, algo: str, rate_mbps: float = RATE_MBPS) -> ExperimentSpec:
    """One point of the study (at another link rate: the bandwidth sweep's, named for its rate)."""
    name = f"{model}-{algo}-n{n}" + ("" if rate_mbps == RATE_MBPS else f"-{rate_mbps / 1000:g}g")
    base = base_spec(rate_mbps).but(workload=model, workers=n, name=name)
    if algo == "ring":
        return spec_from_dict({"algo": "ring", "topo": "fattree"}, base)
    if algo == "ps":
        return spec_from_dict({"algo": "ps", "topo": "fattree", "servers": n}, base)
    if algo == "netreduce-hier":
        return spec_from_dict({"algo": "netreduce", "topo": "fattree"}, base)
    if algo == "netreduce-flat":
        leaves = max(2, math.ceil(n / HOSTS_PER_LEAF))
        return spec_from_dict({"algo": "netreduce", "topo": "leafspine", "leaves": leaves,
                               "spines": math.ceil(n / leaves)}, base)
    raise ValueError(f"algorithm {algo!r}: one of {', '.join(ALGOS)}")


def bandwidth_spec(model: str, algo: str, rate_mbps: float) -> ExperimentSpec:
    """One point of the bandwidth sweep (the study's own run at RATE_MBPS)."""
    spec = scaling_spec(model, BANDWIDTH_WORKERS, algo, rate_mbps)
    assert spec.workload.emulate is not None and spec.workload.emulate.link_gbps * 1000 == rate_mbps  # dilation 1
    return spec


def bandwidth_runs(models: list[str]) -> list[ExperimentSpec]:
    return [bandwidth_spec(m, a, r) for m in models for r in BANDWIDTH_RATES_MBPS for a in BANDWIDTH_ALGOS]


def bandwidth_figures(models: list[str], out: Path) -> list[dict[str, Any]]:
    """Per model and link rate: ring's and NetReduce's samples/s, their ratio, ring's exposed communication."""
    rows = []
    for m in models:
        for rate in (*BANDWIDTH_RATES_MBPS, RATE_MBPS):
            specs = [bandwidth_spec(m, algo, rate) for algo in BANDWIDTH_ALGOS]
            got = collect(specs, out)
            ring, nr = (got.get(spec.label) for spec in specs)
            if ring and nr and ring["samples_per_s"] and nr["samples_per_s"]:
                rows.append({"model": m, "workers": BANDWIDTH_WORKERS, "rate_mbps": rate,
                             "ring_samples_per_s": ring["samples_per_s"],
                             "netreduce_samples_per_s": nr["samples_per_s"],
                             "ratio": nr["samples_per_s"] / ring["samples_per_s"],
                             "ring_exposed_comm_s": ring["exposed_comm_s"], "ring_iteration_s": ring["iteration_s"],
                             "ring_scaling_efficiency": ring["scaling_efficiency"],
                             "netreduce_scaling_efficiency": nr["scaling_efficiency"],
                             "correct": bool(ring["correct"] and nr["correct"])})
    return rows


def plot_bandwidth(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for m in MODELS:
        xs = sorted((r["rate_mbps"] / 1000, r["ratio"]) for r in rows if r["model"] == m)
        if xs:
            ax.plot(*zip(*xs, strict=True), marker="o", color=MODEL_COLORS[m], label=m)
    ax.axhline(PAPER_SPEEDUP, color="black", ls=":", label=f"the paper's {PAPER_SPEEDUP}x (CNN)")
    ax.axhline(PAPER_SPEEDUP_TRANSFORMER, color="grey", ls=":", label=f"{PAPER_SPEEDUP_TRANSFORMER}x (transformer)")
    ax.axhline(2 * (BANDWIDTH_WORKERS - 1) / BANDWIDTH_WORKERS, color="tab:green", ls="--", lw=0.8,
               label="2(N-1)/N: the byte ratio, a fully link-bound run")
    ax.set_xscale("log")
    ax.set_xlabel("link rate, Gb/s")
    ax.set_ylabel("NetReduce (hierarchical) / ring, samples/s")
    ax.set_title(f"where in-network aggregation pays: {BANDWIDTH_WORKERS} V100s on a fat tree (ns-3)", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def scaling_runs(models: list[str], workers: list[int], algos: list[str]) -> list[ExperimentSpec]:
    return [scaling_spec(m, n, a) for m in models for n in workers for a in algos
            if n <= RESNET_ONLY_ABOVE or m == "resnet50"]


DLCP_RUNS = {"baseline-class": {}, "priority": {"priority": True}, "priority+drop": {"priority": True, "drop": True},
             "priority+drop+spray": {"priority": True, "drop": True, "spray": True}}


def dlcp_runs() -> list[ExperimentSpec]:
    base = spec_from_dict({"algo": "ring", "workers": 64, "jobs": 2, "topo": "leafspine", "leaves": 8, "spines": 2,
                           "ring_order": "random", "background_flows": 16, "workload": "resnet50",
                           "transport": "sr", "roce_class": True, "sync": "layer", "scheduling": "priority",
                           "iterations": 3, "warmup": 1, "sim": {"check": "digest", "queue_bytes": 1 << 20}},
                          base_spec())
    out = []
    for name, features in DLCP_RUNS.items():
        # drop: trim over a quarter of the 1 MiB queue (the default, 10 ms at the link rate, is never reached)
        dlcp = {**features, "loss_budget": 0.1, "threshold_bytes": 256 << 10} if features.get("drop") else features
        out.append(spec_from_dict({"name": f"dlcp-{name}", "dlcp": dlcp}, base) if dlcp else
                   replace(base, name=f"dlcp-{name}"))
    return out


RTO_PROBE = ("vgg16", 512, "ps")  # the study's one run whose timers fired
RTO_PROBE_QUEUES = 6  # a full queue's time per queue on the data path: the host's NIC and five switch hops


def rto_runs() -> list[ExperimentSpec]:
    """The probe run again with a smallest RTO of RTO_PROBE_QUEUES full queues' time."""
    default = scaling_spec(*RTO_PROBE)
    assert default.network.bw_mbps is not None
    queue_ms = buffer_bytes(default.network.bw_mbps) / (default.network.bw_mbps * 1e6 / 8) * 1000
    ms = RTO_PROBE_QUEUES * queue_ms
    return [default.but(min_rto_ms=ms, name=f"{default.name}-rto{ms:g}ms")]


def rto_figures(out: Path) -> dict[str, Any] | None:
    """The probe run with its path's smallest RTO and with the larger one: throughput and why packets were resent."""
    default = scaling_spec(*RTO_PROBE)
    (probe,) = rto_runs()
    got = collect([default, probe], out)
    if len(got) < 2:
        return None
    topo = topology_for(default)
    path_rto_s = plan_run(default, topo).first.rto

    def row(spec: ExperimentSpec, min_rto_s: float) -> dict[str, Any]:
        p = got[spec.label]
        return {"run": spec.label, "min_rto_ms": min_rto_s * 1000, "samples_per_s": p["samples_per_s"],
                "retransmissions": p["retransmissions"], "timeouts": p["timeouts"], "duplicates": p["duplicates"],
                "exposed_comm_s": p["exposed_comm_s"], "correct": p["correct"]}

    assert probe.transport.min_rto_ms is not None
    runs = [row(default, path_rto_s), row(probe, probe.transport.min_rto_ms / 1000)]
    return {"model": default.workload.workload, "workers": default.network.workers, "algo": RTO_PROBE[2], "runs": runs,
            "samples_ratio": runs[1]["samples_per_s"] / runs[0]["samples_per_s"]}


# ---- running ----


def run(runs: list[ExperimentSpec], out: Path, shard: tuple[int, int]) -> None:
    k, n = shard
    mine = [r for i, r in enumerate(runs) if i % n == k]
    spec = CompareSpec(f"scaling-shard{k}of{n}", mine)

    def runner(s: ExperimentSpec, where: Path) -> Results:
        from gradswitch.experiment.runner import run_experiment

        return run_experiment(s, where, progress=True)

    run_compare(spec, out / "runs", runner, log=lambda line: print(line, flush=True))


# ---- the study's figures, from every complete run ----


def point(report: Mapping[str, Any], spec: ExperimentSpec) -> dict[str, Any]:
    t = report.get("training") or {}
    sim = report.get("simulator") or {}
    emulate = spec.workload.emulate
    return {"model": spec.workload.workload, "workers": spec.network.workers, "ok": report["ok"],
            "check": report.get("check"),
            "correct": report.get("summary", {}).get("correct"),
            "samples_per_s": t.get("samples_per_s_real"), "iteration_s": t.get("iteration_s_real"),
            "ideal_samples_per_s": t.get("ideal_samples_per_s_real"),
            "linear_samples_per_s": (spec.network.workers * emulate.batch / t["single_gpu_iteration_s_real"]
                                     if emulate and t.get("single_gpu_iteration_s_real") else None),
            "scaling_efficiency": t.get("scaling_efficiency"), "exposed_comm_s": t.get("exposed_comm_s"),
            "of_ideal": t.get("of_ideal"), "retransmissions": report.get("retransmissions"),
            "timeouts": report.get("timeouts"), "duplicates": report.get("duplicates"),
            "topology": report["spec"]["topo"], "k": report["spec"].get("k"),
            "wall_s": sim.get("wall_s"), "events_per_s": sim.get("events_per_s"),
            "packet_hops_per_s": sim.get("packet_hops_per_s"), "peak_rss_mb": sim.get("peak_rss_mb"),
            "sim_s": sim.get("sim_s")}


def collect(runs: list[ExperimentSpec], out: Path) -> dict[str, dict[str, Any]]:
    """Every complete run's point, by run name."""
    found = {}
    for spec in runs:
        report = completed_report(out / "runs" / spec.label, spec)
        if report is not None:
            found[spec.label] = point(report, spec)
    return found


def speedups(points: dict[str, dict[str, Any]], models: list[str], workers: list[int]) -> list[dict[str, Any]]:
    """NetReduce (hierarchical and flat) over ring in samples/s, per model and N."""
    rows = []
    for m in models:
        for n in workers:
            ring = points.get(f"{m}-ring-n{n}", {}).get("samples_per_s")
            for algo in ("netreduce-hier", "netreduce-flat", "ps"):
                other = points.get(f"{m}-{algo}-n{n}", {}).get("samples_per_s")
                if ring and other:
                    rows.append({"model": m, "workers": n, "what": f"{algo} / ring", "ratio": other / ring})
    return rows


def first_reaching(rows: list[dict[str, Any]], what: str, threshold: float) -> dict[str, int | None]:
    """Per model, the smallest N whose `what` ratio reaches the threshold (None: none does)."""
    out: dict[str, int | None] = {}
    for r in sorted(rows, key=lambda r: r["workers"]):
        if r["what"] == what:
            out.setdefault(r["model"], None)
            if r["ratio"] >= threshold and out[r["model"]] is None:
                out[r["model"]] = r["workers"]
    return out


def dlcp_figures(points: dict[str, dict[str, Any]], reports: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    base = points.get("dlcp-baseline-class", {}).get("samples_per_s")
    out = {}
    for name in DLCP_RUNS:
        p = points.get(f"dlcp-{name}")
        r = reports.get(f"dlcp-{name}")
        if p is None or r is None:
            continue
        extra = r.get("headline_extra", {})
        out[name] = {**p, "over_baseline": p["samples_per_s"] / base if base and p["samples_per_s"] else None,
                     "p99_s": r["summary"].get("p99_s"), "dlcp_dropped": extra.get("dlcp_dropped"),
                     "zero_filled_packets": extra.get("zero_filled_packets"),
                     "max_relative_error": extra.get("max_relative_error"),
                     "background_goodput_mbps": extra.get("background_goodput_mbps"),
                     "busiest_link_load": extra.get("busiest_link_load"),
                     "job2_jct_s": (r.get("jobs", {}).get("2") or {}).get("jct_s")}
    return out


def plot_scaling(points: dict[str, dict[str, Any]], models: list[str], workers: list[int], algos: list[str],
                 path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ring": "tab:blue", "ps": "tab:orange", "netreduce-hier": "tab:green", "netreduce-flat": "tab:olive"}
    fig, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models), 4.2), squeeze=False)
    for ax, m in zip(axes[0], models, strict=True):
        linear = [(n, p["linear_samples_per_s"]) for n in workers if (p := points.get(f"{m}-ring-n{n}"))
                  and p.get("linear_samples_per_s")]
        if linear:
            ax.plot(*zip(*linear, strict=True), color="black", ls=":", label="N x one GPU")
        for algo in algos:
            xs = [(n, p) for n in workers if (p := points.get(f"{m}-{algo}-n{n}")) and p.get("samples_per_s")]
            if not xs:
                continue
            ax.plot([n for n, _ in xs], [p["samples_per_s"] for _, p in xs], marker="o", color=colors[algo],
                    label=algo)
            ideal = [(n, p["ideal_samples_per_s"]) for n, p in xs if p.get("ideal_samples_per_s")]
            if ideal and algo in ("ring", "netreduce-hier"):
                bound = "2(N-1)/N S/B" if algo == "ring" else "S/B"
                ax.plot(*zip(*ideal, strict=True), color=colors[algo], ls="--", lw=0.9,
                        label=f"{algo} ideal ({bound})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("workers N")
        ax.set_ylabel("samples/s")
        ax.set_title(f"{m}, 100 Gb/s fat tree", fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle("training throughput on ns-3 (V100 FP32 batch 32, DDP buckets); dashed: every reduction at its "
                 "link-rate bound", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_speedup(rows: list[dict[str, Any]], models: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    styles = {"netreduce-hier / ring": "-", "netreduce-flat / ring": "--"}
    for m in models:
        for what, ls in styles.items():
            xs = sorted((r["workers"], r["ratio"]) for r in rows if r["model"] == m and r["what"] == what)
            if xs:
                ax.plot(*zip(*xs, strict=True), marker="o", ls=ls, color=MODEL_COLORS.get(m), label=f"{m}: {what}")
    ax.axhline(PAPER_SPEEDUP, color="black", ls=":", label=f"the paper's {PAPER_SPEEDUP}x")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("workers N")
    ax.set_ylabel("NetReduce / ring, samples/s")
    ax.set_title("in-network aggregation's training speed-up over ring, 100 Gb/s (ns-3)", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(models: list[str], workers: list[int], algos: list[str], out: Path) -> Path:
    runs = scaling_runs(models, workers, algos)
    points = collect(runs, out)
    dlcp = dlcp_runs()
    dlcp_points = collect(dlcp, out)
    dlcp_reports = {s.label: r for s in dlcp if (r := completed_report(out / "runs" / s.label, s)) is not None}
    rows = speedups(points, models, workers)
    bandwidth = bandwidth_figures(models, out)
    plot_scaling(points, models, workers, algos, RESULTS / "scaling-throughput.png")
    plot_speedup(rows, models, RESULTS / "scaling-speedup.png")
    if bandwidth:
        plot_bandwidth(bandwidth, RESULTS / "scaling-bandwidth.png")
    figures = {"format": BENCHMARK_FORMAT, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
               **engines_field(spec_engines([*runs, *dlcp])), "rate_mbps": RATE_MBPS,
               "models": models,
               "workers": workers, "algos": algos, "runs_expected": len(runs), "runs_found": len(points),
               "points": points, "speedups": rows, "paper_speedup": PAPER_SPEEDUP,
               "netreduce_hier_reaches_paper": first_reaching(rows, "netreduce-hier / ring", PAPER_SPEEDUP),
               "netreduce_flat_reaches_paper": first_reaching(rows, "netreduce-flat / ring", PAPER_SPEEDUP),
               "bandwidth": bandwidth, "dlcp": dlcp_figures(dlcp_points, dlcp_reports), "rto": rto_figures(out)}
    path = RESULTS / "scaling.json"
    path.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{'run':<30}{'samples/s':>12}{'ideal':>12}{'linear':>12}{'wall s':>9}{'M ev/s':>8}{'MB':>7}  check")
    for name, p in {**points, **dlcp_points}.items():
        print(f"{name:<30}{_f(p['samples_per_s'])}{_f(p['ideal_samples_per_s'])}{_f(p['linear_samples_per_s'])}"
              f"{_f(p['wall_s'], 9)}{_f((p['events_per_s'] or 0) / 1e6, 8, 2)}{_f(p['peak_rss_mb'], 7)}  "
              f"{p['check']} {'correct' if p['correct'] else 'NOT CORRECT'}")
    for row in rows:
        print(f"{row['model']} N={row['workers']}: {row['what']} {row['ratio']:.2f}")
    for row in bandwidth:
        print(f"{row['model']} N={row['workers']} at {row['rate_mbps'] / 1000:g} Gb/s: "
              f"netreduce-hier / ring {row['ratio']:.2f}")
    return path


def resummarize_all(out: Path) -> None:
    """Every finished run of the study on the simulator's loops (engine = loop: the runs measured before the graph
    engine became the default): its results.json written again from what the simulator left."""
    from gradswitch.experiment.simulated import resummarize

    study = [s.but(engine=Engine.LOOP) for s in scaling_runs(list(MODELS), list(WORKERS), list(ALGOS)) + dlcp_runs()
             + bandwidth_runs(list(MODELS)) + rto_runs()]
    runs = [s for s in study if completed_report(out / "runs" / s.label, s) is not None]
    for i, spec in enumerate(runs, 1):
        print(f"[{i}/{len(runs)}] {spec.label}: results.json from its simulator output", flush=True)
        resummarize(spec, out / "runs" / spec.label)


def _f(v: float | None, width: int = 12, digits: int = 0) -> str:
    return f"{v:>{width}.{digits}f}" if isinstance(v, int | float) else f"{'-':>{width}}"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="scaling,dlcp,bandwidth,rto",
                        help="scaling, dlcp, bandwidth, rto (comma-separated)")
    parser.add_argument("--models", default=",".join(MODELS), help="the models to run (the report has every one)")
    parser.add_argument("--workers", default=",".join(map(str, WORKERS)), help="the worker counts to run")
    parser.add_argument("--algos", default=",".join(ALGOS), help="the algorithms to run")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-scaling"))
    parser.add_argument("--shard", default="0/1", help="K/N: run every N-th run from the K-th (default 0/1: all)")
    parser.add_argument("--report-only", action="store_true", help="run nothing: the figures of the runs found")
    parser.add_argument("--resummarize", action="store_true",
                        help="first write every finished run's results.json again from its simulator output (after "
                             "the report code gained a figure; nothing is simulated again)")
    args = parser.parse_args()
    models, algos = args.models.split(","), args.algos.split(",")
    workers = [int(n) for n in args.workers.split(",")]
    k, n = (int(x) for x in args.shard.split("/"))
    if not 0 <= k < n:
        parser.error(f"--shard {args.shard}: K/N with 0 <= K < N")
    unknown = sorted(set(algos) - set(ALGOS)) + sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"unknown {', '.join(unknown)}: algorithms {', '.join(ALGOS)}; models {', '.join(MODELS)}")
    if not args.report_only:
        parts = args.only.split(",")
        unknown_parts = sorted(set(parts) - {"scaling", "dlcp", "bandwidth", "rto"})
        if unknown_parts:
            parser.error(f"--only {args.only}: parts are scaling, dlcp, bandwidth and rto")
        runs = ((dlcp_runs() if "dlcp" in parts else []) + (bandwidth_runs(models) if "bandwidth" in parts else [])
                + (scaling_runs(models, workers, algos) if "scaling" in parts else [])
                + (rto_runs() if "rto" in parts else []))
        run(runs, args.out, (k, n))
    if args.resummarize:
        resummarize_all(args.out)
    # The selection says what to run; the report is always the whole study's, from every run found under
    # --out (a run of a few points must not leave scaling.json with only those).
    print(f"written {report(list(MODELS), list(WORKERS), list(ALGOS), args.out)}")


if __name__ == "__main__":
    main()
