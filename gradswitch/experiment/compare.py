"""`gradswitch compare SPEC`: a matrix of experiments on equal terms, repeated, one report.

A spec is a TOML file (see gradswitch/specs/):

    name = "baselines"
    repeat = 3                # every run 3 times (seed, seed + 1, seed + 2); default 1
    baselines = ["ring-n4"]   # runs the others are measured against (optional)
    figures = ["median_s"]    # summary keys to plot side by side; the first is the headline figure
    [defaults.measurement]    # every run starts from these (ExperimentSpec fields, in their sections:
    iterations = 5            # spec.SECTIONS; docs/specs.md)
    [defaults.network]
    bw_mbps = 20
    [matrix.algorithm]        # the cartesian product of these lists...
    algo = ["ring", "ps"]
    [matrix.network]
    workers = [2, 4]
    [[runs]]                  # ...plus runs given one by one (each may set `name`)
    name = "ring-sr"
    algorithm.algo = "ring"
    transport.transport = "sr"

A run's keys may also be given flat, without their sections (the form before sections, read as before).

It writes a directory per repetition of each run (DIR/<run>/ with repeat = 1, DIR/<run>/rep<k>/
otherwise: each experiment's own results and plots), DIR/summary.json, DIR/report.md and
DIR/*.png. Repetitions run round by round (every run once, then every run again), so that a
change in the machine's load meets every run alike.

summary.json maps each run to its headline figures: the median over its repetitions that were
not machine-bound (gradswitch/experiment/bottleneck.py), with `spread` (per figure min, median,
max and how many), `repetitions` (every repetition's own figures, the machine-bound ones too)
and, for a run that is not a baseline, `over_baseline`: its median headline figure (the spec's
first figure; samples_per_s_real for training specs) over the best baseline's median, with the
ratio's min and max (the run's smallest repetition over the baseline's largest, and its largest
over the baseline's smallest: the extremes any pairing of their repetitions gives).

Started again on the same DIR, a compare skips every repetition whose results.json is complete
(all its iterations done) for the same spec, and runs the rest.

A run may replay Chakra traces (`workload_et = "DIR/PREFIX"`, from the spec file's folder when relative):
every run of the spec then does (a spec mixing them with ordinary runs is refused), the traces are read
and checked as the spec loads, and each repetition runs the graph on its backend (compare_traces.py:
what is refused, results.json (its `graph`) and the key that keeps a repetition, the figures). Its headline
figure is the job's time, `job_s`, unless `figures` names another first.

Runs may differ in `backend` (bmv2: the testbed; ns3: the simulator): their rows sit in one table
with a backend column, a simulated run's speed (wall_s, events_per_s, packet_hops_per_s) beside.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from gradswitch.experiment import results_file, summary_file
from gradswitch.experiment.compare_traces import COLUMNS as TRACE_COLUMNS
from gradswitch.experiment.compare_traces import FIGURES as TRACE_FIGURES
from gradswitch.experiment.compare_traces import (
    HEADLINE_FIGURE,
    GraphRunner,
    completed_graph_report,
    failed_headline,
    graph_headline,
    load_trace_runs,
    run_graph_repetition,
)
from gradswitch.experiment.compare_traces import details_line as trace_details
from gradswitch.experiment.graph_experiment import format_graph_table, run_graph_spec
from gradswitch.experiment.graph_run import GraphRunReport
from gradswitch.experiment.plots import plot_compare, plot_figures, plot_learning, plot_link_loads
from gradswitch.experiment.report import format_table
from gradswitch.experiment.results_file import Outcome, Results
from gradswitch.experiment.runner import run_experiment
from gradswitch.experiment.shipped_specs import shipped_spec
from gradswitch.experiment.spec import (
    COMPARE_ONLY,
    RUN_KEYS,
    SECTION_OF,
    SECTIONS,
    ExperimentError,
    ExperimentSpec,
    SpecError,
    flat_spec,
    nearest_key,
    read_toml,
    same_spec,
    spec_from_dict,
)
from gradswitch.experiment.stats import spread
from gradswitch.experiment.summary_file import CompareExit, Summary
from gradswitch.sim import SimError
from gradswitch.workload.chakra import read_traces
from gradswitch.workload.graph import GraphError, JobGraph

TRAINING_FIGURE = "samples_per_s_real"
# Figures where less is better (besides times, `*_s`): what picks the best baseline.
LOWER_IS_BETTER = {"ratio_to_bound", "worst_ratio_to_bound", "retransmissions", "max_relative_error", "max_abs_error",
                   "dlcp_dropped", "zero_filled_packets", "uplink_imbalance"}
# Keys of a headline that are not figures to take medians of.
NOT_FIGURES = {"bmv2", "error", "machine_bound_reason", "check", "repetition", "seed", "backend"}


def lower_is_better(figure: str) -> bool:
    return (figure.endswith("_s") and not figure.endswith("_per_s")) or figure in LOWER_IS_BETTER


@dataclass
class CompareSpec:
    name: str
    runs: list[ExperimentSpec]
    notes: str = ""
    figures: list[str] = field(default_factory=list)  # summary keys to plot side by side
    repeat: int = 1  # repetitions of every run (seed + index)
    baselines: list[str] = field(default_factory=list)  # runs the others' headline figure is divided by
    repeat_varies: tuple[str, ...] = ("seed",)  # the fields repetition k adds k to (REPEAT_VARIES)
    # A run is measured only against the baselines equal to it in these ExperimentSpec fields (e.g. ring_order:
    # spraying on a random placement against ECMP on the same placement, not on another)
    baselines_within: tuple[str, ...] = ()
    graphs: dict[str, JobGraph] = field(default_factory=dict)  # trace runs: workload_et -> its traces, read

    @property
    def traces(self) -> bool:
        """Every run runs Chakra traces (workload_et): a compare of job times (compare_traces.py)."""
        return bool(self.runs) and all(r.workload.workload_et is not None for r in self.runs)

    @property
    def headline_figure(self) -> str:
        """What a run is measured by: training throughput for training specs, else the spec's first figure
        (by default the median iteration, for traces the job's time)."""
        if any(r.workload.emulate is not None for r in self.runs):
            return TRAINING_FIGURE
        return self.figures[0] if self.figures else HEADLINE_FIGURE if self.traces else "median_s"

    def graph_of(self, run: ExperimentSpec) -> JobGraph:
        """A trace run's graph: as the spec loaded it, else read now."""
        assert run.workload.workload_et is not None
        graph = self.graphs.get(run.workload.workload_et)
        return graph if graph is not None else read_traces(Path(run.workload.workload_et))


@dataclass(frozen=True)
class Repetition:
    """Repetition `index` (0-based) of one run of a compare."""

    run: ExperimentSpec
    index: int
    repeat: int
    varies: tuple[str, ...] = ("seed",)

    @property
    def label(self) -> str:
        return self.run.label

    @property
    def spec(self) -> ExperimentSpec:
        """The run with this repetition's seed (seed + index: other payloads, other placements when random) and,
        where the compare says so, its other varied fields (ecmp_seed + index: another hash of the flows)."""
        return self.run.but(**{f: self.run.get(f) + self.index for f in self.varies})

    def directory(self, out_dir: Path) -> Path:
        return out_dir / self.label if self.repeat == 1 else out_dir / self.label / f"rep{self.index + 1}"

    def __str__(self) -> str:
        return self.label if self.repeat == 1 else f"{self.label} (repetition {self.index + 1}/{self.repeat})"


def repetitions(spec: CompareSpec) -> list[Repetition]:
    """Every repetition of every run, round by round."""
    return [Repetition(run, i, spec.repeat, spec.repeat_varies) for i in range(spec.repeat) for run in spec.runs]


def _auto_name(spec: ExperimentSpec, varied: list[str]) -> str:
    parts = []
    for key in varied:
        value = spec.get(key)
        if key == "size_bytes":
            parts.append(f"{value / 2**20:g}MiB")
        elif key == "workers":
            parts.append(f"n{value}")
        elif key == "workload_et" and value is not None:
            parts.append(Path(value).name)  # the trace's prefix: a run name is a directory's
        else:
            parts.append(f"{value}")
    return "-".join(parts) or spec.algorithm.algo


SPEC_KEYS = ("name", *COMPARE_ONLY)
# What a repetition may draw anew: the seed (payload values, random placements) and the ECMP hash seed (which flows
# collide), so that repetitions sample a distribution rather than repeat one draw.
REPEAT_VARIES = ("seed", "ecmp_seed")


def _prefixed(prefix: str, e: SpecError) -> str:
    """Every line of an error, `prefix` before each (one line per problem)."""
    return "\n".join(prefix + line for line in str(e).splitlines())


def _top_level_problem(key: str) -> str:
    """The line for a key at the top level of a compare spec that is not one of its keys: where it belongs (a run's
    key, a section), or the nearest key."""
    if key in SECTION_OF:
        return (f"{key} belongs under [defaults.{SECTION_OF[key]}] (every run) or in a run, not at the top level of a "
                "compare spec")
    if key in SECTIONS:
        return f"[{key}] belongs under [defaults] ([defaults.{key}]: every run) or in a run, not at the top level"
    close = nearest_key(key, list(SPEC_KEYS))
    return f"{key}: no such key; " + (f"did you mean {close}?" if close else
                                      f"a compare spec has {', '.join(SPEC_KEYS)}")


def load_spec(path: Path) -> CompareSpec:
    """A compare spec, every run checked (SpecError: one line per problem, naming the run)."""
    if not path.exists() and path.with_suffix(".toml").exists():
        path = path.with_suffix(".toml")  # `gradswitch compare gradswitch/specs/tensorlights`
    if not path.exists() and (shipped := shipped_spec(path.name)) is not None:
        path = shipped  # a spec the package ships, named from outside a checkout: `gradswitch compare netreduce`
    raw = read_toml(path)
    try:
        unknown = [_top_level_problem(key) for key in raw if key not in SPEC_KEYS]
        if unknown:
            raise SpecError("\n".join(unknown))
        given_defaults = flat_spec(raw.get("defaults", {}), "defaults")
        defaults = spec_from_dict(given_defaults)
        runs: list[ExperimentSpec] = []
        given: list[set[str]] = []  # the keys each run's spec set (what a trace run may refuse)
        matrix = flat_spec(raw.get("matrix", {}), "matrix")
        if matrix:
            keys = list(matrix)
            for values in itertools.product(*(matrix[k] if isinstance(matrix[k], list) else [matrix[k]]
                                              for k in keys)):
                spec = spec_from_dict(dict(zip(keys, values, strict=True)), defaults)
                varied = [k for k in keys if isinstance(matrix[k], list) and len(matrix[k]) > 1]
                runs.append(spec_from_dict({"name": _auto_name(spec, varied)}, spec))
                given.append(set(given_defaults) | set(keys))
        for i, run in enumerate(raw.get("runs", []), start=1):
            try:
                run = flat_spec(run, "runs")
                runs.append(spec_from_dict(run, defaults))
                given.append(set(given_defaults) | set(run))
            except SpecError as e:
                raise SpecError(_prefixed(f"run {run.get('name', i)!r}: ", e)) from None
    except SpecError as e:
        raise SpecError(_prefixed(f"{path}: ", e)) from None
    traced = [r.label for r in runs if r.workload.workload_et is not None]
    if traced and len(traced) < len(runs):
        plain = [r.label for r in runs if r.workload.workload_et is None]
        raise SpecError(f"{path}: runs {', '.join(traced)} run traces (workload_et) and {', '.join(plain)} do not: a "
                        "compare's runs are all traces or none (a trace run's figures are its job's time against "
                        "its bounds, the others' their iterations'); put them in two specs")
    traces = load_trace_runs(runs, given, path.parent)  # read once each, workers = their ranks
    runs = traces.runs
    names = [r.label for r in runs]
    problems = [f"{path}: {line}" for line in traces.problems]
    problems += [f"{path}: run {name!r}: {line}" for r, name in zip(runs, names, strict=True) for line in r.problems()]
    if len(set(names)) != len(names):
        problems.append(f"{path}: run names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    if "format" in names:
        problems.append(f"{path}: a run named 'format': summary.json keeps its format under that name; name the run "
                        "otherwise")
    if not runs:
        problems.append(f"{path}: no runs (give a [matrix] or [[runs]])")
    repeat = raw.get("repeat", 1)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= 100:
        problems.append(f"{path}: repeat = {repeat!r}: a whole number of repetitions per run, 1 to 100 "
                        "(3 or more for a headline)")
        repeat = 1
    varies = raw.get("repeat_varies", ["seed"])
    if not isinstance(varies, list) or not varies or not all(v in REPEAT_VARIES for v in varies) \
            or len(set(varies)) != len(varies):
        problems.append(f"{path}: repeat_varies = {varies!r}: a list of what each repetition adds its index to, "
                        f"from {', '.join(REPEAT_VARIES)}, e.g. [\"seed\", \"ecmp_seed\"]")
        varies = ["seed"]
    baselines = raw.get("baselines", [])
    if not isinstance(baselines, list) or not all(isinstance(b, str) for b in baselines):
        example = names[0] if names else "baseline"
        problems.append(f"{path}: baselines = {baselines!r}: a list of run names, e.g. [\"{example}\"]")
        baselines = []
    for b in baselines:
        if b not in names:
            problems.append(f"{path}: baselines: no run named {b!r} (runs: {', '.join(names)})")
    if baselines and len(baselines) == len(names):
        problems.append(f"{path}: baselines name every run: leave at least one run to measure against them")
    within = raw.get("baselines_within", [])
    spec_fields = {*SECTION_OF, *RUN_KEYS}
    if not isinstance(within, list) or not all(isinstance(w, str) and w in spec_fields for w in within):
        problems.append(f"{path}: baselines_within = {within!r}: a list of experiment fields a run and its "
                        "baselines share, e.g. [\"ring_order\"]")
        within = []
    for run in runs:
        if baselines and run.label not in baselines and within and not any(
                all(b.get(w) == run.get(w) for w in within) for b in runs if b.label in baselines):
            problems.append(f"{path}: run {run.label!r}: no baseline shares its {', '.join(within)} "
                            "(baselines_within)")
    if problems:
        raise SpecError("\n".join(problems))
    return CompareSpec(raw.get("name", path.stem), runs, raw.get("notes", ""), raw.get("figures", []), repeat,
                       baselines, tuple(varies), tuple(within), traces.graphs)


def headline(report: Results) -> dict[str, Any]:
    """One experiment's headline figures (one repetition of a run)."""
    s = report["summary"]
    out: dict[str, Any] = {
           "backend": report.get("backend", "bmv2"), "median_s": s["median_s"], "p99_s": s["p99_s"], "ok": report["ok"],
           "outcome": report.get("outcome", str(Outcome.OK if report["ok"] else Outcome.FAILED)),
           "algbw_mbps": s["algbw_mbps"], "lower_bound_s": s["lower_bound_s"], "ratio_to_bound": s["ratio_to_bound"],
           "retransmissions": report["retransmissions"], "bytes_on_wire": report["bytes_on_wire"]}
    if "correct" in s:  # a check ran (report["check"])
        out["correct"] = s["correct"]
    out.update(report.get("headline_extra", {}))
    training: dict[str, Any] = dict(report.get("training") or {})
    # Every run has both: a training run its steady-state iteration and real-equivalent throughput,
    # an all-reduce run its median all-reduce iteration (and no samples).
    out["iteration_s"] = training.get("iteration_s", s["median_s"])
    out["samples_per_s_real"] = training.get("samples_per_s_real")
    for key in ("exposed_comm_s", "compute_s", "overlap", "dilation", "scaling_efficiency", "ideal_samples_per_s_real",
                "of_ideal", "ideal_link_load"):
        if key in training:
            out[key] = training[key]
    build = report.get("bmv2")
    if build:  # which BMv2 build ran: path, version, logging macros or not
        out["bmv2"] = {k: build.get(k) for k in ("path", "version", "logging_macros")}
    return out


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_failed(h: Mapping[str, Any]) -> bool:
    """A repetition (or a run: all of its repetitions) whose result was wrong or beyond its error bound: marked in
    every table, never in a median or a headline."""
    if h.get("check_failed_repetitions") is not None:  # a run's summary
        return bool(h["check_failed_repetitions"]) and not h.get("headline_repetitions")
    return h.get("outcome") == Outcome.CHECK_FAILED or (not h.get("error") and h.get("correct") is False)


def combine(heads: list[dict[str, Any] | None]) -> dict[str, Any]:
    """A run's summary from its repetitions' headlines (None: not run yet): every figure's median
    over the repetitions that were neither machine-bound nor failed nor broke their check (all completed
    ones when none was), its spread, and every repetition's own figures."""
    done = [h for h in heads if h is not None]
    completed = [h for h in done if not h.get("error")]
    valid = [h for h in completed if not h.get("machine_bound") and not check_failed(h)]
    basis = valid or completed
    out: dict[str, Any] = {}
    keys = list(dict.fromkeys(k for h in basis for k in h))
    spreads: dict[str, dict[str, float]] = {}
    for k in keys:
        values = [h[k] for h in basis if k in h]
        numbers = [float(v) for v in values if _number(v)]
        if k not in NOT_FIGURES and numbers and len(numbers) == len([v for v in values if v is not None]):
            spreads[k] = spread(numbers)
            out[k] = spreads[k]["median"]
        elif values:
            out[k] = values[0]
    checked = [h["correct"] for h in completed if "correct" in h]
    if checked:
        out["correct"] = all(checked)
    out["ok"] = bool(done) and all(h.get("ok") for h in done)
    out["outcome"] = summary_file.run_outcome(done)  # type: ignore[arg-type]
    out["check"] = next((h["check"] for h in completed if "check" in h), None)
    out["backend"] = next((h["backend"] for h in done if "backend" in h), "bmv2")
    for k in ("machine_bound_reason", "repetition", "seed"):  # a repetition's own, in `repetitions`
        out.pop(k, None)
    # every repetition was machine-bound (or broke its check): no headline
    out["machine_bound"] = bool(completed) and not valid and not all(check_failed(h) for h in completed)
    out["repetitions_done"] = len(done)
    out["headline_repetitions"] = len(valid)
    out["machine_bound_repetitions"] = [h["repetition"] for h in completed if h.get("machine_bound")]
    out["failed_repetitions"] = [h["repetition"] for h in done if h.get("error")]
    out["check_failed_repetitions"] = [h["repetition"] for h in completed if check_failed(h)]
    if any(h.get("error") for h in done) and not completed:
        out["error"] = next(h["error"] for h in done if h.get("error"))
    out["spread"] = spreads
    out["repetitions"] = done
    return out


def best_baseline(spec: CompareSpec, summary: Mapping[str, Mapping[str, Any]], figure: str, run: str | None = None
                  ) -> str | None:
    """The baseline with the best median of `figure` among those that have one and are not machine-bound (and,
    given a run, that share its `baselines_within` fields)."""
    specs = {r.label: r for r in spec.runs}

    def comparable(b: str) -> bool:
        if run is None or run not in specs or b not in specs:
            return True
        return all(specs[b].get(w) == specs[run].get(w) for w in spec.baselines_within)

    usable = [b for b in spec.baselines if _number(summary.get(b, {}).get(figure))
              and not summary[b].get("machine_bound") and not check_failed(summary[b]) and comparable(b)]
    if not usable:
        return None
    pick = min if lower_is_better(figure) else max
    return pick(usable, key=lambda b: float(summary[b][figure]))


def ratio_of(run: Mapping[str, Any], base: Mapping[str, Any], figure: str) -> dict[str, Any]:
    """Run summary `run`'s median `figure` over `base`'s, with the ratio's min (the run's smallest
    repetition over the base's largest) and max (largest over smallest); a headline only when
    neither is machine-bound. None where either has no such figure."""
    out: dict[str, Any] = {"figure": figure, "ratio": None, "min": None, "max": None, "headline": False}
    a, b = run.get("spread", {}).get(figure), base.get("spread", {}).get(figure)
    if a and b and b["median"] and b["min"] and b["max"]:
        out.update(ratio=a["median"] / b["median"], min=a["min"] / b["max"], max=a["max"] / b["min"],
                   headline=not run.get("machine_bound") and not base.get("machine_bound")
                   and not check_failed(run) and not check_failed(base))
    return out


def over_baseline(spec: CompareSpec, summary: dict[str, dict[str, Any]]) -> None:
    """Add `over_baseline` to every run that is not a baseline: its median headline figure over the
    best baseline's, and the ratio's min and max (ratio_of). A machine-bound run's ratio is given
    but is not a headline."""
    figure = spec.headline_figure
    for name, s in summary.items():
        s["is_baseline"] = name in spec.baselines
        if name in spec.baselines or not spec.baselines:
            continue
        best = best_baseline(spec, summary, figure, name)
        entry = ratio_of(s, summary[best], figure) if best is not None else ratio_of({}, {}, figure)
        s["over_baseline"] = {"baseline": best, **entry}


def summarize_runs(spec: CompareSpec, heads: dict[str, list[dict[str, Any] | None]]) -> dict[str, dict[str, Any]]:
    summary = {run.label: combine(heads[run.label]) for run in spec.runs
               if any(h is not None for h in heads[run.label])}
    over_baseline(spec, summary)
    return summary


def completed_report(directory: Path, spec: ExperimentSpec) -> Results | None:
    """The report a previous compare left in `directory` if it is complete (every iteration done)
    and for the same spec; None: run it (again)."""
    try:
        report = results_file.read(directory / "results.json")
    except results_file.ResultsFileError:
        return None
    if not same_spec(report.get("spec"), spec):
        return None
    if report.get("summary",
                  {}).get("iterations_done") != spec.measurement.iterations or "headline_extra" not in report:
        return None
    return report


Runner = Callable[[ExperimentSpec, Path], Results]


def _eta(durations: list[float], left: int) -> str:
    """How long the repetitions left take at the pace of those run so far."""
    if not durations or not left:
        return ""
    seconds = statistics.mean(durations) * left
    return f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"


def run_compare(spec: CompareSpec, out_dir: Path, runner: Runner | None = None,
                log: Callable[[str], None] = print,
                group: Callable[[ExperimentSpec], Any] | None = None,
                graph_runner: GraphRunner | None = None) -> Summary:
    """Run every repetition of every run that is not complete in out_dir yet, then summarize and
    report. `group`: runs with the same key run one after another (their repetitions too), groups
    in the order they first appear (bench.training keeps one network per topology). `runner` runs a
    repetition of an ordinary run, `graph_runner` one of a trace run (defaults: run_experiment,
    run_graph_spec; tests give stand-ins)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = repetitions(spec)
    if group is not None:
        keys = list(dict.fromkeys(group(r.run) for r in plan))
        plan.sort(key=lambda r: keys.index(group(r.run)))  # stable: rounds kept within a group
    heads: dict[str, list[dict[str, Any] | None]] = {r.label: [None] * spec.repeat for r in spec.runs}
    reports: dict[str, list[Results]] = {r.label: [] for r in spec.runs}
    graph_reports: dict[str, list[GraphRunReport]] = {r.label: [] for r in spec.runs}
    durations: list[float] = []
    for k, rep in enumerate(plan, start=1):
        where = rep.directory(out_dir)
        prefix = f"[{k}/{len(plan)}] {rep}"
        if rep.run.workload.workload_et is not None:
            head = _graph_repetition(spec, rep, where, graph_runner or run_graph_spec, graph_reports, durations,
                                     prefix, log, len(plan) - k + 1)
        else:
            head = _repetition(rep, where, runner or run_experiment, reports, durations, prefix, log,
                               len(plan) - k + 1)
        head.update(repetition=rep.index + 1, seed=rep.spec.measurement.seed)
        heads[rep.label][rep.index] = head
        # partial results survive a crash
        summary_file.write(out_dir / "summary.json", summarize_runs(spec, heads))
    summary = summarize_runs(spec, heads)
    write_markdown(spec, summary, reports, out_dir, graph_reports)
    return summary_file.write(out_dir / "summary.json", summary)


R = TypeVar("R")


def _kept_or_run(prefix: str, where: Path, previous: R | None, run_it: Callable[[], R],
                 errors: tuple[type[Exception], ...], table: Callable[[R], str], durations: list[float],
                 log: Callable[[str], None], left: int) -> R | str:
    """A repetition's report: the one a previous compare left complete in `where`, or run now (timed for the
    ETA, its table logged); the error's line where it could not run."""
    if previous is not None:
        log(f"{prefix}: complete in {where}, skipped")
        return previous
    log(f"{prefix} ...{_eta(durations, left)}")
    started = time.monotonic()
    try:
        report = run_it()
    except errors as e:
        log(f"  failed: {e}")
        return str(e)
    finally:
        durations.append(time.monotonic() - started)
    log(table(report))
    return report


def _repetition(rep: Repetition, where: Path, run: Runner, reports: dict[str, list[Results]], durations: list[float],
                prefix: str, log: Callable[[str], None], left: int) -> dict[str, Any]:
    """An ordinary run's repetition, kept from a previous compare (completed_report) or run: its headline."""
    report = _kept_or_run(prefix, where, completed_report(where, rep.spec), lambda: run(rep.spec, where),
                          (ExperimentError,), format_table, durations, log, left)
    if isinstance(report, str):
        return {"median_s": None, "p99_s": None, "ok": False, "iteration_s": None, "samples_per_s_real": None,
                "error": report, "outcome": str(Outcome.FAILED), "backend": str(rep.spec.network.backend)}
    reports[rep.label].append(report)
    return headline(report)


def _graph_repetition(spec: CompareSpec, rep: Repetition, where: Path, run: GraphRunner,
                      reports: dict[str, list[GraphRunReport]], durations: list[float], prefix: str,
                      log: Callable[[str], None], left: int) -> dict[str, Any]:
    """A trace run's repetition, kept from a previous compare (completed_graph_report) or run: its headline."""
    graph = spec.graph_of(rep.run)
    report = _kept_or_run(prefix, where, completed_graph_report(where, rep.spec, graph),
                          lambda: run_graph_repetition(rep.spec, graph, where, run),
                          (ExperimentError, GraphError, SimError),
                          lambda r: format_graph_table(r, str(rep.spec.network.backend)), durations, log, left)
    if isinstance(report, str):
        return cast(dict[str, Any], failed_headline(rep.spec, report))
    reports[rep.label].append(report)
    return cast(dict[str, Any], graph_headline(report, rep.spec, graph))


def exit_status(summary: Summary) -> CompareExit:
    """DID_NOT_RUN where any repetition could not run, else CHECK_FAILED where any broke its check, else OK."""
    outcomes = {h.get("outcome", str(Outcome.OK if h.get("ok") else Outcome.FAILED)) for h in summary.values()}
    if str(Outcome.FAILED) in outcomes or any(h.get("failed_repetitions") for h in summary.values()):
        return CompareExit.DID_NOT_RUN
    if str(Outcome.CHECK_FAILED) in outcomes or any(h.get("check_failed_repetitions") for h in summary.values()):
        return CompareExit.CHECK_FAILED
    return CompareExit.OK


# ---- report.md ----


def _cell(v: Any, digits: int = 3) -> str:
    """A figure as a table shows it: `digits` decimals (-1: 4 significant digits)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return f"{v:.4g}" if digits < 0 else f"{v:.{digits}f}"
    return str(v)


def _figure(h: dict[str, Any], key: str, digits: int | None = None) -> str:
    """A figure's median, with [min, max] when its repetitions differ; 3 decimals unless `digits` says (a trace's
    job time: 4 significant digits, for the milliseconds of a simulated job)."""
    digits = digits if digits is not None else -1 if key == HEADLINE_FIGURE else 3
    s = h.get("spread", {}).get(key)
    text = _cell(h.get(key), digits)
    if s and s["n"] > 1 and s["min"] != s["max"]:
        text += f" [{_cell(s['min'], digits)}, {_cell(s['max'], digits)}]"
    return text


def _bound(h: dict[str, Any]) -> str:
    n = len(h.get("machine_bound_repetitions", []))
    return "no" if not n else f"**{n} of {h.get('repetitions_done', n)}**"


def _ratio(h: dict[str, Any]) -> str:
    o = h.get("over_baseline")
    if h.get("is_baseline"):
        return "baseline"
    if not o or o.get("ratio") is None:
        return "-"
    text = f"{o['ratio']:.2f} [{o['min']:.2f}, {o['max']:.2f}]"
    return text if o["headline"] else f"{text} (machine-bound)"


TABLE_FIXED = ("backend", "median_s", "p99_s", "correct", "algbw_mbps", "lower_bound_s", "ratio_to_bound",
               "retransmissions",
               "bytes_on_wire", "error", "bmv2", "machine_bound", "machine_bound_reason", "check", "repetition", "seed",
               "spread", "repetitions", "over_baseline", "is_baseline", "repetitions_done", "headline_repetitions",
               "machine_bound_repetitions", "failed_repetitions", "check_failed_repetitions", "outcome")
# report.md's columns of an ordinary run: (column, summary key, digits)
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("median s", "median_s", 3), ("p99 s", "p99_s", 3), ("check", "check", 3), ("correct", "correct", 3),
    ("Mb/s", "algbw_mbps", 1), ("bound s", "lower_bound_s", 3), ("x bound", "ratio_to_bound", 2),
    ("retrans", "retransmissions", 0))
# ... and what a trace run's table leaves out of its further columns
TRACE_TABLE_FIXED = tuple(k for k in TABLE_FIXED if k not in {key for _, key, _ in COLUMNS}) + tuple(
    key for _, key, _ in TRACE_COLUMNS)


def check_mark(h: dict[str, Any]) -> str:
    """" (check failed: k of n)" for a run some of whose repetitions broke their check; "" otherwise."""
    bad = h.get("check_failed_repetitions") or []
    return f" (check failed: {len(bad)} of {h.get('repetitions_done', len(bad))})" if bad else ""


def write_markdown(spec: CompareSpec, summary: dict[str, dict[str, Any]], reports: dict[str, list[Results]],
                   out_dir: Path, graph_reports: Mapping[str, list[GraphRunReport]] | None = None) -> None:
    if spec.traces:
        plot_figures(summary, list(TRACE_FIGURES), out_dir / "compare.png")
    else:
        plot_compare(summary, out_dir / "compare.png")
    figure = spec.headline_figure
    columns = TRACE_COLUMNS if spec.traces else COLUMNS
    extra_keys = sorted({k for h in summary.values() for k in h} - set(TRACE_TABLE_FIXED if spec.traces
                                                                          else TABLE_FIXED))
    header = (["run", "backend", "repetitions in the medians", "machine-bound"]
              + (["/ best baseline"] if spec.baselines else []) + [c for c, _, _ in columns] + extra_keys)
    lines = [f"# {spec.name}", ""]
    if spec.notes:
        lines += [spec.notes.strip(), ""]
    lines += [f"Every run {spec.repeat} time(s) (seed, seed + 1, ...): each figure is the median over the repetitions "
              "that were not machine-bound, [min, max] beside it when they differ.", ""]
    if spec.traces:
        lines += ["Every run replays Chakra traces (workload_et): `job s` is the job's time (its last node's end), "
                  "`worst time / bound` its slowest collective's (or transfer's) time over its link-rate bound, "
                  "`exposed s` the most any rank waited on communication with nothing to compute, `exact` whether "
                  "every output held exactly what its collective defines.", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, h in summary.items():
        row = [name + check_mark(h), str(h.get("backend", "bmv2")),
               f"{h.get('headline_repetitions', 0)} of {h.get('repetitions_done', 0)}", _bound(h)]
        if spec.baselines:
            row.append(_ratio(h))
        row += [_figure(h, key, digits) for _, key, digits in columns] + [_figure(h, k) for k in extra_keys]
        lines.append("| " + " | ".join(row) + " |")
    builds = sorted({f"{b['path']} {b['version']}, " + ("with" if b["logging_macros"] else "without")
                     + " logging macros" for h in summary.values() for r in h.get("repetitions", [])
                     if (b := r.get("bmv2"))})
    lines += ["", f"BMv2: {'; '.join(builds) or 'not recorded'}. `cpu_idle`: the machine's idle CPU share during the "
              "jobs; `busiest_link_load`: what the busiest shaped link carried (its shaper's sent bytes) over its "
              "rate. A repetition is machine-bound when its CPU was under 10 % idle or its busiest link under 0.8 of "
              "the load its ideal keeps (1 for an all-reduce): it is left out of the medians.", ""]
    lines += _headline_section(spec, summary, figure)
    lines += _machine_bound_section(summary)
    if spec.traces:
        lines += ["![job time, worst time over bound, exposed communication and busiest link load per run (bars: min "
                  "to max over the repetitions)](compare.png)", ""]
    else:
        lines += ["![median and p99 iteration time per run (bars: min to max over the repetitions)](compare.png)", ""]
    drawn = TRACE_FIGURES if spec.traces else ("median_s", "p99_s")
    if plot_figures(summary, [k for k in spec.figures if k not in drawn], out_dir / "figures.png"):
        lines += ["![the spec's figures per run (bars: min to max over the repetitions)](figures.png)", ""]
    plotted = cast(dict[str, list[dict[str, Any]]], reports)
    if plot_learning(plotted, out_dir / "learning.png"):
        lines += ["![test accuracy against iterations and wall time (one line per repetition)](learning.png)", ""]
    if plot_link_loads(plotted, out_dir / "links.png"):
        lines += ["![load of every fabric link per run (bars: min to max over the repetitions)](links.png)", ""]
    for name, rs in reports.items():
        if not rs:
            continue
        spec_d, first = rs[0]["spec"], rs[0]
        links = _detail_links(spec, summary, name)
        lines.append(f"- **{name}**: {spec_d['algo']} x{spec_d['workers']} on {spec_d['topo']} "
                     f"({rs[0].get('backend', 'bmv2')}), "
                     f"{first['step_bytes'] / 2**20:.2f} MiB, bw {spec_d['bw_mbps']}, loss {spec_d['loss_pct']}%, "
                     f"{spec_d['transport']} ({links})")
    for name, graph_rs in (graph_reports or {}).items():
        if graph_rs:
            run = _spec_of(spec, name)
            lines.append(trace_details(name, run, spec.graph_of(run), _detail_links(spec, summary, name)))
    errors = [(n, h["repetition"], h["error"]) for n, s in summary.items() for h in s.get("repetitions", [])
              if h.get("error")]
    broke = [(n, h["repetition"], h.get("max_relative_error")) for n, s in summary.items()
             for h in s.get("repetitions", []) if check_failed(h)]
    if broke:
        lines += ["", "## Results that broke their check (never in a median or a headline; exit status 3)", ""]
        lines += [f"- {n} (repetition {k}): not correct" + (f", relative error up to {err:.3g}" if err else "")
                  for n, k, err in broke]
    if errors:
        lines += ["", "## Runs that could not run (exit status 4)", ""]
        lines += [f"- {n} (repetition {k}): {e.splitlines()[0]}" for n, k, e in errors]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")


def _detail_links(spec: CompareSpec, summary: dict[str, dict[str, Any]], name: str) -> str:
    """Links to the table.txt of each repetition of a run that ran."""
    dirs = [Repetition(_spec_of(spec, name), h["repetition"] - 1, spec.repeat).directory(Path("."))
            for h in summary.get(name, {}).get("repetitions", []) if not h.get("error")]
    return ", ".join(f"[{d.name if spec.repeat > 1 else 'details'}]({d.as_posix()}/table.txt)" for d in dirs)


def _spec_of(spec: CompareSpec, name: str) -> ExperimentSpec:
    return next(r for r in spec.runs if r.label == name)


def _headline_section(spec: CompareSpec, summary: dict[str, dict[str, Any]], figure: str) -> list[str]:
    if not spec.baselines:
        return []
    if spec.baselines_within:  # each run against the best baseline that shares its fields
        within = ", ".join(spec.baselines_within)
        lines = [f"## Against the best baseline of the same {within} ({figure}, "
                 f"{'lower' if lower_is_better(figure) else 'higher'} is better)", ""]
        return _ratio_lines(spec, summary, lines)
    best = best_baseline(spec, summary, figure)
    lines = [f"## Against the best baseline ({figure}, {'lower' if lower_is_better(figure) else 'higher'} is better)",
             ""]
    if best is None:
        return lines + [f"No baseline ({', '.join(spec.baselines)}) has a {figure} from a repetition that was not "
                        "machine-bound: no headline.", ""]
    others = ", ".join(f"{b} {_figure(summary[b], figure)}" for b in spec.baselines if b != best and b in summary)
    lines.append(f"Best baseline: **{best}**, median {_figure(summary[best], figure)}"
                 + (f" (also measured: {others})" if others else "") + ". Each ratio is a run's median over the best "
                 "baseline's median; [min, max]: the run's smallest repetition over the baseline's largest, its "
                 "largest over the baseline's smallest.")
    lines.append("")
    return _ratio_lines(spec, summary, lines)


def _ratio_lines(spec: CompareSpec, summary: dict[str, dict[str, Any]], lines: list[str]) -> list[str]:
    for name, h in summary.items():
        o = h.get("over_baseline")
        if not o or o.get("ratio") is None:
            continue
        note = "" if o["headline"] else " (every repetition machine-bound: not a headline)"
        if spec.baselines_within and o.get("baseline"):
            note = f" against {o['baseline']}{note}"
        lines.append(f"- {name}: {o['ratio']:.3f} [{o['min']:.3f}, {o['max']:.3f}] from "
                     f"{h['headline_repetitions'] or h['repetitions_done']} repetition(s){note}")
    return lines + [""]


def _machine_bound_section(summary: dict[str, dict[str, Any]]) -> list[str]:
    rows = [(n, r["repetition"], r.get("machine_bound_reason")) for n, h in summary.items()
            for r in h.get("repetitions", []) if r.get("machine_bound")]
    if not rows:
        return []
    return ["## Machine-bound repetitions (left out of the medians and the headline)", ""] + [
        f"- {n}, repetition {k}: {reason}" for n, k, reason in rows] + [""]
