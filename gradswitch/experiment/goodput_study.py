"""The goodput study: a 1,024-worker training job over a long run (30 days) that meets failures drawn from
published rates, surviving them by checkpoint restart or by recovery in place; the effective throughput
(goodput: the share of the wall time that went into training kept at the end) of each. `gradswitch goodput`
runs it (bench/goodput.py too, writing bench/results/goodput.json); docs/faults.md describes it.

1. ns-3 (`measure_all`): the job's iteration (ResNet-50, 1,024 emulated V100s, a topology-aware ring on a k = 16
   fat tree at 100 Gb/s, as the scaling study runs it) with the fabric intact and with one element of each class
   gone (an edge-aggregation link, an aggregation-core link, an aggregation switch, a core switch): what recovery
   in place runs at until the element is repaired. A degraded fabric is the same topology without the element:
   the simulator computes its routes and ECMP groups from the topology it is given, i.e. the routes a controller
   pushes once it has rerouted around the failure. Only elements whose loss leaves every worker connected are
   measured (a host's link or its edge switch takes workers out: a spare replaces them). Every run is the job's
   spec on the simulator's graph engine through `gradswitch run`'s pipeline (simulated_graph.simulate_spec: the
   run's plan, the training as an execution graph), placed on the intact fabric. Each run is ONE
   iteration (both iterations of the scaling study's runs take the same time to a microsecond) and is kept under
   the output directory as <label>-n<workers>.json (resumable: a run found there is not simulated again).
2. Failures (gradswitch/workload/failure_schedule.py): drawn per seed from the Llama 3 paper's rates (per
   GPU-hour, and its network failures spread over this fat tree's switches and links), a switch or link repaired
   after `repair_h` hours.
3. Goodput (gradswitch/workload/goodput.py) of each seed's run with each strategy: mean and spread over the seeds;
   the checkpoint interval swept against Young/Daly's sqrt(2 x write x MTBF); the restart cost and the failure
   rate varied.

Defaults, every one an option (StudyOptions):
- checkpoint write 30 s: Huawei MindCluster's resumable-training guide ("Performance Description": a
  3B-parameter model's checkpoint is flushed in about 30 s); ResNet-50's state is ~100x smaller, so this is
  the cost of a larger model's job.
- restart 600 s: rescheduling, 1,024 ranks' communicators and the checkpoint loaded (an assumption; swept
  from 150 s, FlashRecovery's restoration of 4,800 devices, arXiv:2509.03047, to 1,800 s).
- rejoin 40 s: a spare replacing a failed worker in place (DeadPool, arXiv:2607.01646: hot-swap recovery
  under 40 s on up to 512 A100s).
- reroute 1 s: a failed switch or link noticed and routed around (an assumption: the controller notices it by
  its P4Runtime stream or port state and pushes the new routes, which the BMv2 testbed does in well under a
  second on a small fabric; the ring's RC transport resends what was lost).
- repair 4 h: a failed switch or cable replaced (an assumption).
- checkpoint interval: Young/Daly's optimum for the job's MTBF and the write cost.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from gradswitch.experiment.limits import Limits
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.report import busiest_link_load
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.simulated import link_usage
from gradswitch.experiment.simulated_graph import simulate_spec
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec, spec_from_dict
from gradswitch.formats import check_format
from gradswitch.topology.faults import Fault, FaultKind
from gradswitch.topology.model import Topology
from gradswitch.version import code_version
from gradswitch.workload.failure_schedule import (
    DEFAULT_REPAIR_S,
    HOUR_S,
    ElementKind,
    FailureRates,
    FailureSchedule,
    draw_schedule,
    element_class,
    without,
)
from gradswitch.workload.goodput import (
    CheckpointRestart,
    FabricCosts,
    Goodput,
    InPlace,
    Strategy,
    goodput,
    young_daly_interval_s,
)

MODEL = "resnet50"
ALGO = "ring"
BATCH = 32  # samples per GPU per iteration (the scaling study's emulated V100s)
RATE_MBPS = 100_000.0  # every link (the scaling study's)
WORKERS = 1024
DAYS = 30.0
SEEDS = 10
WRITE_S = 30.0
RESTART_S = 600.0
REJOIN_S = 40.0
REROUTE_S = 1.0
RESTART_SWEEP_S = (150.0, 600.0, 1800.0)
RATE_SCALES = (1.0, 4.0, 16.0)  # the Llama 3 rates times these: more failure-prone hardware, or a longer job
SWEEP_DAYS = 365.0  # the interval sweep's runs: a year, so that its mean is over ~180 failures per seed
INTERVAL_STEPS = [2 ** (i / 2) for i in range(-6, 7)]  # x Young/Daly's interval: 1/8 .. 8 in steps of sqrt(2)
# `format` of the files the study writes (gradswitch/formats.py); files from before they carried one read as 1
GOODPUT_FORMAT = 1  # goodput.json: the study's document
FABRIC_RUN_FORMAT = 1  # <label>-n<workers>.json: one ns-3 run kept under the output directory
ELEMENT_CLASSES = ("link:edge-agg", "link:agg-core", "switch:agg", "switch:core")


def say(line: str) -> None:
    """Progress to stdout, at once (a study of 1,024 workers simulates for minutes)."""
    print(line, flush=True)


class GoodputError(ValueError):
    """A bad option or a missing measurement: one line naming the value, what is allowed and what to do."""


@dataclass(frozen=True)
class StudyOptions:
    """The study's settings (the module docstring says where each default comes from)."""

    workers: int = WORKERS
    days: float = DAYS  # the run's length
    seeds: int = SEEDS  # failure schedules drawn (seeds 0..N-1)
    sweep_days: float = SWEEP_DAYS  # the length of the runs the checkpoint interval sweep averages
    write_s: float = WRITE_S  # a checkpoint's write cost
    restart_s: float = RESTART_S  # a restart's cost
    rejoin_s: float = REJOIN_S  # a spare's joining cost
    reroute_s: float = REROUTE_S  # a reroute's cost
    repair_h: float = DEFAULT_REPAIR_S / HOUR_S  # hours until a failed switch or link is back

    def validate(self) -> None:
        """GoodputError naming the first value out of range."""
        if self.workers < 2:
            raise GoodputError(f"--workers {self.workers}: at least 2 (a ring of workers on a fat tree)")
        if self.seeds < 2:
            raise GoodputError(f"--seeds {self.seeds}: at least 2 (the spread over seeds is reported)")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not (math.isfinite(value) and value > 0):
                raise GoodputError(f"--{f.name.replace('_', '-')} {value}: give a number above 0")


def job_spec(workers: int, name: str = "") -> ExperimentSpec:
    """The scaling study's ResNet-50 ring point (bench/scaling.py: one emulated V100 per worker, FP32, batch 32,
    DDP's 25 MB buckets, every link 100 Gb/s, a k-ary fat tree) for ONE iteration."""
    spec = spec_from_dict({"backend": "ns3", "bw_mbps": RATE_MBPS, "iterations": 1, "warmup": 0,
                           "sim": {"check": "digest"},
                           "emulate": {"device": "v100", "precision": "fp32", "batch": BATCH},
                           "workload": MODEL, "workers": workers, "algo": ALGO, "topo": "fattree",
                           "name": name or f"{MODEL}-{ALGO}-n{workers}"})
    return spec


@dataclass(frozen=True)
class FabricRun:
    """One iteration of the job on the fabric with `removed` gone (empty: intact)."""

    label: str
    removed: str  # the element taken out ("" for the intact fabric): a switch, or a link as A-B
    element: str  # its kind (ElementKind) or "intact"
    workers: int
    model: str
    algo: str
    ok: bool  # every node finished its iteration with a correct (digest-checked) sum
    iteration_s: float  # simulated seconds of the iteration (the slowest node)
    busiest_link_load: float | None
    wall_s: float  # wall seconds the simulation took on this machine
    limits: dict[str, Any]
    code_version: str = ""  # the code (and so the simulator's sources) the run was made with
    engine: Engine = Engine.LOOP  # what ran the job (a run kept before the field: the simulator's loop)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> FabricRun:
        fields = {k: v for k, v in raw.items() if k != "format"}
        if "engine" in fields:
            fields["engine"] = Engine(fields["engine"])
        return cls(**fields)

    @classmethod
    def read(cls, path: Path) -> FabricRun:
        """A kept run (FormatError: of another format than FABRIC_RUN_FORMAT)."""
        raw = check_format(json.loads(path.read_text()), path, "goodput study's ns-3 run", FABRIC_RUN_FORMAT,
                           missing_is=1)
        return cls.from_dict(raw)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FABRIC_RUN_FORMAT, **asdict(self)}


def degraded_cases(topo: Topology) -> list[tuple[str, ElementKind | None, str]]:
    """(label, kind, element) for the intact fabric and one element of each class whose loss leaves every
    worker connected: an edge-aggregation link, an aggregation-core link, an aggregation and a core switch
    (the first of each in declaration order: a fat tree is symmetric)."""
    def first_link(role_a: str, role_b: str) -> str:
        roles = {s.name: s.role for s in topo.switches}
        lk = next(lk for lk in topo.links if roles.get(lk.a) == role_a and roles.get(lk.b) == role_b)
        return f"{lk.a}-{lk.b}"

    def first_switch(role: str) -> str:
        return next(s.name for s in topo.switches if s.role == role)

    return [("intact", None, ""),
            ("edge-agg-link", ElementKind.LINK, first_link("edge", "agg")),
            ("agg-core-link", ElementKind.LINK, first_link("agg", "core")),
            ("agg-switch", ElementKind.SWITCH, first_switch("agg")),
            ("core-switch", ElementKind.SWITCH, first_switch("core"))]


def run_path(out: Path, label: str, workers: int) -> Path:
    return out / f"{label}-n{workers}.json"


def measure(workers: int, label: str, kind: ElementKind | None, element: str, out: Path, progress: bool = False
            ) -> FabricRun:
    """One iteration on the fabric without `element` (kept in out/<label>-n<workers>.json; found there: not run
    again): the job's spec run on the simulator's graph engine (simulated_graph.simulate_spec, `gradswitch run`'s
    pipeline), placed on the intact fabric and simulated on the fabric without the element."""
    path = run_path(out, label, workers)
    if path.exists():
        return FabricRun.read(path)
    spec = job_spec(workers, f"goodput-{label}-n{workers}")
    spec.validate()
    assert spec.workload.emulate is not None and spec.workload.emulate.batch == BATCH
    topo = without(topology_for(spec), kind, element)
    started = time.monotonic()
    try:
        simulated = simulate_spec(spec, out / f"sim-{label}-n{workers}", progress, network=topo)
    except ExperimentError as e:
        raise GoodputError(str(e)) from None
    wall = time.monotonic() - started
    result = simulated.result
    nodes = result.nodes[simulated.jobs[0].job_id].values()
    times = [it["time_s"] for node in nodes for it in node["iterations"]]
    correct = all(it["correct"] for node in nodes for it in node["iterations"])
    load = busiest_link_load(link_usage(topo, result))
    run = FabricRun(label, element, str(kind) if kind is not None else "intact", workers, MODEL, ALGO,
                    result.ok() and correct and bool(times), max(times) if times else float("nan"), load, wall,
                    Limits.simulated_figures(load), code_version(), Engine.GRAPH)
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run.to_dict(), indent=1) + "\n")
    return run


def measure_all(workers: int, out: Path, progress: bool = False, simulate_missing: bool = True,
                log: Callable[[str], None] = say) -> list[FabricRun]:
    """Every case's run; simulate_missing False: only those already kept under `out`."""
    runs = []
    for label, kind, element in degraded_cases(topology_for(job_spec(workers))):
        if not simulate_missing and not run_path(out, label, workers).exists():
            log(f"ns-3: {label} ({element or 'intact'}): not measured under {out}, left out")
            continue
        log(f"ns-3: {MODEL} {ALGO}, {workers} workers, {label} {element} ...")
        run = measure(workers, label, kind, element, out, progress)
        log(f"  iteration {run.iteration_s * 1e3:.3f} ms, {'exact' if run.ok else 'FAILED'}, wall {run.wall_s:.0f} s")
        runs.append(run)
    return runs


@dataclass(frozen=True)
class Spread:
    """A figure over the seeds: mean, standard deviation, lowest and highest."""

    mean: float
    stdev: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0,
                   min(values), max(values))


def fabric_costs(topo: Topology, runs: list[FabricRun]) -> tuple[FabricCosts, dict[str, str]]:
    """The iteration intact and per element class from the ns-3 runs; a class not measured (its run missing)
    takes the largest measured slowdown, and says so."""
    intact = next(r for r in runs if r.element == "intact")
    degraded: dict[str, float] = {}
    how: dict[str, str] = {}
    for r in runs:
        if r.element == "intact":
            continue
        kind = FaultKind.SWITCH_CRASH if r.element == "switch" else FaultKind.LINK_DOWN
        cls = element_class(topo, Fault(kind, r.removed, 0.0))
        degraded[cls] = r.iteration_s
        how[cls] = f"measured on ns-3 without {r.removed}"
    for cls in ELEMENT_CLASSES:
        if cls not in degraded:
            degraded[cls] = max(degraded.values(), default=intact.iteration_s)
            how[cls] = "not measured: the largest measured slowdown"
    return FabricCosts(intact.iteration_s, degraded), how


def runs_of(schedules: list[FailureSchedule], topo: Topology, hosts: list[str], costs: FabricCosts,
            strategy: Strategy) -> list[Goodput]:
    return [goodput(s, topo, hosts, costs, strategy) for s in schedules]


def summary(results: list[Goodput]) -> dict[str, Any]:
    return {"goodput": asdict(Spread.of([r.goodput for r in results])),
            "failures": asdict(Spread.of([float(r.failures) for r in results])),
            "lost_h": statistics.mean(r.lost_s for r in results) / HOUR_S,
            "down_h": statistics.mean(r.down_s for r in results) / HOUR_S,
            "checkpoint_h": statistics.mean(r.checkpoint_s for r in results) / HOUR_S,
            "degraded_h": statistics.mean(r.degraded_s for r in results) / HOUR_S}


def study(topo: Topology, hosts: list[str], costs: FabricCosts, rates: FailureRates, options: StudyOptions
          ) -> dict[str, Any]:
    """Both strategies over the seeds' failure schedules, and the sweeps: the checkpoint interval (over runs of
    sweep_days), the restart cost and the failure rates."""
    workers = len(hosts)
    hours = options.days * 24
    repair_s = options.repair_h * HOUR_S

    def schedules(r: FailureRates) -> list[FailureSchedule]:
        return [draw_schedule(r, topo, workers, hours, seed, repair_s) for seed in range(options.seeds)]

    base = schedules(rates)
    mtbf_s = HOUR_S / rates.job_per_hour(topo, workers)
    young = young_daly_interval_s(options.write_s, mtbf_s)
    in_place = InPlace(options.rejoin_s, options.reroute_s)
    checkpoint = CheckpointRestart(young, options.write_s, options.restart_s)
    ck, ip = runs_of(base, topo, hosts, costs, checkpoint), runs_of(base, topo, hosts, costs, in_place)
    ratios = [b.goodput / a.goodput for a, b in zip(ck, ip, strict=True)]

    def mean_goodput(strategy: Strategy, r: list[FailureSchedule]) -> float:
        return statistics.mean(g.goodput for g in runs_of(r, topo, hosts, costs, strategy))

    long = [draw_schedule(rates, topo, workers, options.sweep_days * 24, seed, repair_s)
            for seed in range(options.seeds)]
    sweep = [{"interval_s": young * step, "of_young": step,
              "goodput": mean_goodput(replace(checkpoint, interval_s=young * step), long)} for step in INTERVAL_STEPS]
    best = max(sweep, key=lambda p: p["goodput"])
    restart_rows = [{"restart_s": r, "checkpoint_restart": mean_goodput(replace(checkpoint, restart_s=r), base),
                     "in_place": mean_goodput(in_place, base)} for r in RESTART_SWEEP_S]
    rate_rows = []
    for scale in RATE_SCALES:
        scaled = FailureRates(rates.per_gpu_hour * scale, rates.per_switch_hour * scale, rates.per_link_hour * scale,
                              f"{rates.source}; x {scale:g}")
        mtbf = HOUR_S / scaled.job_per_hour(topo, workers)
        tau = young_daly_interval_s(options.write_s, mtbf)
        r = schedules(scaled)
        rate_rows.append({"rate_scale": scale, "job_mtbf_h": mtbf / HOUR_S, "young_interval_s": tau,
                          "checkpoint_restart": mean_goodput(replace(checkpoint, interval_s=tau), r),
                          "in_place": mean_goodput(in_place, r)})
    return {"hours": hours, "seeds": options.seeds, "job_mtbf_h": mtbf_s / HOUR_S,
            "expected_failures": hours * HOUR_S / mtbf_s,
            "young_daly_interval_s": young,
            "strategies": {"checkpoint_restart": {**asdict(checkpoint), **summary(ck)},
                           "in_place": {**asdict(in_place), **summary(ip)}},
            "in_place_over_checkpoint_restart": asdict(Spread.of(ratios)),
            "per_seed": [{"seed": s.seed, "counts": {str(k): v for k, v in s.counts().items()},
                          "checkpoint_restart": a.to_dict(), "in_place": b.to_dict()}
                         for s, a, b in zip(base, ck, ip, strict=True)],
            "sweep_hours": options.sweep_days * 24, "interval_sweep": sweep,
            "sweep_best_interval_s": best["interval_s"], "sweep_best_over_young": best["of_young"],
            "restart_sweep": restart_rows, "rate_sweep": rate_rows}


def run_study(options: StudyOptions, out: Path, simulate_missing: bool = True, progress: bool = False,
              log: Callable[[str], None] = say) -> dict[str, Any]:
    """The whole study: the ns-3 runs (kept under `out`; simulate_missing False: only those kept there), the
    fabric's costs from them, the failure schedules and both strategies' goodput. Its document (what
    goodput.json holds); GoodputError when an option is out of range or the ns-3 runs cannot give the costs."""
    options.validate()
    spec = job_spec(options.workers)
    spec.validate()
    plan = plan_run(spec)
    topo = plan.topology
    hosts = [n.host for n in plan.placement.jobs[0]]
    runs = measure_all(options.workers, out, progress, simulate_missing, log)
    if not any(r.element == "intact" for r in runs):
        raise GoodputError(f"no ns-3 run of the intact fabric under {out}: run it without --measured-only")
    bad = [r.label for r in runs if not r.ok]
    if bad:
        raise GoodputError(f"ns-3 runs without an exact iteration: {', '.join(bad)} (see {out})")
    costs, how = fabric_costs(topo, runs)
    rates = FailureRates.llama3(topo, options.workers)
    result = study(topo, hosts, costs, rates, options)
    samples_per_s = options.workers * BATCH / costs.iteration_s  # the intact fabric's training throughput
    for name in ("checkpoint_restart", "in_place"):
        s = result["strategies"][name]
        s["effective_samples_per_s"] = s["goodput"]["mean"] * samples_per_s
    return {"format": GOODPUT_FORMAT, "code_version": code_version(), "workers": options.workers, "model": MODEL,
            "algo": ALGO, "samples_per_s_intact": samples_per_s,
            "topology": {"name": topo.name, "k": topo.params.get("k"), "switches": len(topo.switches),
                         "links": len(topo.links)},
            "rates": rates.to_dict(), "repair_h": options.repair_h,
            "fabric": {"iteration_s": costs.iteration_s, "degraded_s": costs.degraded_s, "how": how,
                       "runs": [asdict(r) for r in runs]},
            "limits": {r.label: r.limits for r in runs}, "study": result}


def save_study(document: dict[str, Any], out: Path, name: str = "goodput") -> tuple[Path, Path]:
    """out/NAME.json (the document) and out/NAME.png (its plot)."""
    out.mkdir(parents=True, exist_ok=True)
    path, png = out / f"{name}.json", out / f"{name}.png"
    path.write_text(json.dumps(document, indent=1) + "\n")
    plot(document, png)
    return path, png


def study_engines(document: dict[str, Any]) -> list[Engine]:
    """The engines that ran the document's ns-3 runs (a run kept before runs named theirs: the simulator's loop)."""
    return sorted({Engine(r.get("engine", Engine.LOOP)) for r in document["fabric"]["runs"]})


def read_study(path: Path) -> dict[str, Any]:
    """A goodput.json (FormatError: of another format than GOODPUT_FORMAT; one without `format`, written before
    it had one, reads as 1)."""
    return check_format(json.loads(path.read_text()), path, "goodput study", GOODPUT_FORMAT, missing_is=1)


def report_lines(document: dict[str, Any]) -> list[str]:
    """What the study found, in lines to print: each ns-3 run, the rates, both strategies, the sweeps."""
    lines = []
    intact_s = document["fabric"]["iteration_s"]
    for r in document["fabric"]["runs"]:
        lines.append(f"ns-3 {r['label']:<14} {r['removed'] or '-':<16} iteration {r['iteration_s'] * 1e3:8.3f} ms "
                     f"({r['iteration_s'] / intact_s:.4f}x intact), "
                     f"{Limits.of_figures(r['limits']).line().split(':')[0]}: {r['limits']['limited_by']}")
    s, rates = document["study"], document["rates"]
    lines.append(f"rates: {rates['per_gpu_hour']:.3g}/GPU-h, {rates['per_switch_hour']:.3g}/switch-h, "
                 f"{rates['per_link_hour']:.3g}/link-h: job MTBF {s['job_mtbf_h']:.1f} h, "
                 f"{s['expected_failures']:.1f} failures expected in {s['hours'] / 24:g} days")
    samples_per_s = document["samples_per_s_intact"]
    for name in ("checkpoint_restart", "in_place"):
        g = s["strategies"][name]["goodput"]
        lines.append(f"{name:<19} goodput {g['mean']:.4f} (sd {g['stdev']:.4f}, {g['low']:.4f}-{g['high']:.4f} over "
                     f"{s['seeds']} seeds): {g['mean'] * samples_per_s:,.0f} of {samples_per_s:,.0f} samples/s")
    ratio = s["in_place_over_checkpoint_restart"]
    lines.append(f"in place / checkpoint restart: {ratio['mean']:.4f} ({ratio['low']:.4f}-{ratio['high']:.4f})")
    lines.append(f"checkpoint interval: Young/Daly {s['young_daly_interval_s'] / 60:.1f} min, the sweep's best "
                 f"{s['sweep_best_interval_s'] / 60:.1f} min ({s['sweep_best_over_young']:.3g}x)")
    for row in s["rate_sweep"]:
        lines.append(f"rates x{row['rate_scale']:<4g} MTBF {row['job_mtbf_h']:7.2f} h: checkpoint restart "
                     f"{row['checkpoint_restart']:.4f}, in place {row['in_place']:.4f}")
    return lines


def plot(document: dict[str, Any], path: Path) -> None:
    """goodput.png: the checkpoint interval sweep against Young/Daly's, and both strategies against the rates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = document["study"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [p["interval_s"] / 60 for p in s["interval_sweep"]]
    left.plot(xs, [p["goodput"] for p in s["interval_sweep"]], marker="o", color="tab:blue",
              label="checkpoint restart (mean of seeds)")
    left.axvline(s["young_daly_interval_s"] / 60, color="black", ls=":", label="Young/Daly sqrt(2 x write x MTBF)")
    left.axhline(s["strategies"]["in_place"]["goodput"]["mean"], color="tab:green", ls="--", label="recovery in place")
    left.set_xscale("log")
    left.set_xlabel("checkpoint interval, minutes")
    left.set_ylabel("goodput")
    left.set_title(f"{document['workers']} workers, runs of {s['sweep_hours'] / 24:g} days, {s['seeds']} seeds",
                   fontsize=9)
    left.legend(fontsize=7)
    scales = [r["rate_scale"] for r in s["rate_sweep"]]
    right.plot(scales, [r["checkpoint_restart"] for r in s["rate_sweep"]], marker="o", color="tab:blue",
               label="checkpoint restart (Young/Daly interval)")
    right.plot(scales, [r["in_place"] for r in s["rate_sweep"]], marker="o", color="tab:green",
               label="recovery in place")
    right.set_xscale("log")
    right.set_xlabel("failure rates x (1: Llama 3's)")
    right.set_ylabel("goodput")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
