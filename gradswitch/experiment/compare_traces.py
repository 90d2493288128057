"""A compare's runs of Chakra execution traces (`workload_et`; docs/workloads.md, "Running traces").

When the spec loads (load_trace_runs), every trace path is taken from the spec file's folder, every trace is read
and checked once, and each trace run gets workers = its traces' ranks; what a trace's run refuses or has no use
for (graph_experiment.trace_problems: a size, iterations, workers other than the ranks, ...) and what its job
cannot be (graph_run.graph_job: NetReduce on the simulator, more ranks than hosts) is one line naming the run,
before anything starts. Each repetition runs the graph on its backend (graph_experiment.run_graph_spec, as
`gradswitch experiment --workload-et` does) into its own directory: results.json (with its `graph`), table.txt and the
timeline, then graph-run-key.json, the run's spec and its trace files' SHA-256. Started again on the same DIR,
a compare keeps a repetition whose key is the run's and whose report ran to its end (completed_graph_report),
as it keeps an ordinary run's complete results.json.

A repetition's headline figures (graph_headline): the job's time, the worst collective's time over its link-rate
bound, exposed communication (the most any rank waited), the busiest link's load, whether every output was exact,
and its outcome: `check_failed` where an output was wrong, `failed` where a rank did not finish its graph.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradswitch.experiment.graph_experiment import format_graph_table, trace_problems
from gradswitch.experiment.graph_run import RESULTS, GraphReportError, GraphRunReport, graph_job, read_graph_report
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.results_file import Outcome, Payload
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec, SpecError, resolve_path, same_spec, spec_json
from gradswitch.experiment.summary_file import Headline
from gradswitch.experiment.trace_results import graph_outcome
from gradswitch.topology.model import TopologyError
from gradswitch.workload.chakra import read_traces, trace_files
from gradswitch.workload.chakra.groups import groups_path
from gradswitch.workload.graph import GraphError, JobGraph

GRAPH_KEY = "graph-run-key.json"
KEY_FORMAT = 1
TABLE = "table.txt"
HEADLINE_FIGURE = "job_s"  # a trace compare's headline figure unless the spec names another first
# What report.md's table shows of a trace run, and compare.png draws: (column, summary key, digits; -1: 4 significant)
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("job s", "job_s", -1), ("worst time / bound", "worst_ratio_to_bound", 2), ("exposed s", "exposed_comm_s", -1),
    ("busiest link load", "busiest_link_load", 2), ("check", "check", 0), ("exact", "correct", 0),
    ("resent", "retransmissions", 0))
FIGURES = ("job_s", "worst_ratio_to_bound", "exposed_comm_s", "busiest_link_load")

GraphRunner = Callable[[ExperimentSpec, JobGraph, Path], GraphRunReport]


@dataclass(frozen=True)
class TraceRuns:
    """A spec's runs with their traces resolved (the others as they were), the traces read (path -> graph), and
    what the trace runs cannot run with (one line each, naming the run)."""

    runs: list[ExperimentSpec]
    graphs: dict[str, JobGraph]
    problems: list[str]


def _runs_named(names: list[str]) -> str:
    return f"run {names[0]!r}" if len(names) == 1 else "runs " + ", ".join(repr(n) for n in names)


def load_trace_runs(runs: Sequence[ExperimentSpec], given: Sequence[Collection[str]], folder: Path) -> TraceRuns:
    """Each run's workload_et (if any) from `folder` (the spec file's), its traces read once, workers = their
    ranks; `given[i]`: the keys run i's spec set ([defaults], its [matrix] values or its [[runs]] table)."""
    graphs: dict[str, JobGraph] = {}
    unreadable: dict[str, str] = {}
    users: dict[str, list[str]] = {}
    out: list[ExperimentSpec] = []
    problems: list[str] = []
    for run, keys in zip(runs, given, strict=True):
        if run.workload.workload_et is None:
            out.append(run)
            continue
        trace = resolve_path(run.workload.workload_et, folder)
        run = run.but(workload_et=trace)
        if trace not in graphs and trace not in unreadable:
            try:
                graphs[trace] = read_traces(Path(trace))
            except (GraphError, OSError) as e:
                unreadable[trace] = str(e)
        if trace in unreadable:
            users.setdefault(trace, []).append(run.label)
            out.append(run)
            continue
        graph = graphs[trace]
        lines = trace_problems(run, graph, keys)
        if "workers" not in keys:
            run = run.but(workers=graph.world_size)
        if not lines and not run.problems():
            try:  # what the job itself cannot be (NetReduce on the simulator, more ranks than hosts), before starting
                graph_job(topology_for(run), run, graph)
            except (ExperimentError, GraphError, SpecError, TopologyError) as e:
                lines.append(str(e))
        problems += [f"run {run.label!r}: {line}" for line in lines]
        out.append(run)
    problems += [f"{_runs_named(names)}: workload_et: {unreadable[trace]}" for trace, names in users.items()]
    return TraceRuns(out, graphs, problems)


# ---- a repetition's figures ----


def graph_headline(report: GraphRunReport, spec: ExperimentSpec, graph: JobGraph) -> Headline:
    """One repetition's headline figures (see the module's doc); a run that failed has `error`, its first error,
    and is left out of the medians."""
    outcome = graph_outcome(report, graph)
    outputs = [n.checked for n in report.run.nodes if n.kind not in ("compute", "send")]
    head: Headline = {
        "backend": str(spec.network.backend), "ok": outcome == Outcome.OK, "outcome": str(outcome),
                      "job_s": report.job_s,
        "worst_ratio_to_bound": max((k.worst_ratio for k in report.by_kind), default=None),
        "exposed_comm_s": max(report.exposed_s.values(), default=0.0), "busiest_link_load": report.busiest_link_load,
        "retransmissions": report.resent_packets, "cpu_idle": report.cpu_idle,
        "machine_bound": report.machine_bound, "machine_bound_reason": report.machine_bound_reason,
        "wall_s": report.wall_s}
    if any(c is not None for c in outputs):  # a check ran: every output exact, or not
        head["check"] = "exact"
        head["correct"] = all(c is True for c in outputs)
    else:
        head["check"] = "none"
    if outcome == Outcome.FAILED:
        head["error"] = next(iter(report.errors), "a rank did not run every node of its graph")
    return head


def failed_headline(spec: ExperimentSpec, error: str) -> Headline:
    """A repetition that could not run."""
    return {"job_s": None, "ok": False, "error": error, "outcome": str(Outcome.FAILED),
            "backend": str(spec.network.backend)}


# ---- a repetition's directory: run, and kept ----


def file_digest(path: Path) -> str:
    """The file's SHA-256, hex; read once while its size and modification time stay the same (a compare keys
    every repetition of every run by its traces: a thousand ranks' files are not read again each time)."""
    st = path.stat()
    return _digest(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class GraphRunKey:
    """What a repetition's directory ran (graph-run-key.json): the spec and its trace files' SHA-256 (file name ->
    hex digest): the same key, the same run."""

    spec: Payload
    traces: dict[str, str]

    @classmethod
    def of(cls, spec: ExperimentSpec) -> GraphRunKey:
        assert spec.workload.workload_et is not None
        prefix = Path(spec.workload.workload_et)
        files = [*trace_files(prefix), *([groups_path(prefix)] if groups_path(prefix).exists() else [])]
        return cls(spec_json(spec), {p.name: file_digest(p) for p in files})

    def to_dict(self) -> dict[str, Any]:
        return {"format": KEY_FORMAT, "spec": self.spec, "traces": self.traces}


def completed_graph_report(directory: Path, spec: ExperimentSpec, graph: JobGraph) -> GraphRunReport | None:
    """The report a previous compare left in `directory` if it ran this spec on the same trace files and ran to
    its end (its outcome ok or check_failed, as a results.json with every iteration done); None: run it (again)."""
    try:
        saved = json.loads((directory / GRAPH_KEY).read_text())
        report = read_graph_report(directory / RESULTS)
        key = GraphRunKey.of(spec)
    except (OSError, ValueError, GraphError, GraphReportError):
        return None
    if not isinstance(saved, dict) or saved.get("format") != KEY_FORMAT or saved.get("traces") != key.traces:
        return None
    if not same_spec(saved.get("spec"), spec) or graph_outcome(report, graph) == Outcome.FAILED:
        return None
    return report


def run_graph_repetition(spec: ExperimentSpec, graph: JobGraph, directory: Path, runner: GraphRunner
                         ) -> GraphRunReport:
    """Run the graph into `directory` (the runner writes results.json), then write table.txt and, last, the
    key that lets a compare started again keep it."""
    key = GraphRunKey.of(spec)
    (directory / GRAPH_KEY).unlink(missing_ok=True)  # a run cut short leaves no key: it runs again
    report = runner(spec, graph, directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / TABLE).write_text(format_graph_table(report, str(spec.network.backend)) + "\n")
    (directory / GRAPH_KEY).write_text(json.dumps(key.to_dict(), indent=1))
    return report


def details_line(name: str, spec: ExperimentSpec, graph: JobGraph, links: str) -> str:
    """report.md's line about a trace run."""
    nodes = sum(len(r.nodes) for r in graph.ranks)
    net = spec.network
    return (f"- **{name}**: trace `{spec.workload.workload_et}` ({graph.name}: {graph.world_size} ranks, {nodes} "
            f"nodes in all), algo {spec.algorithm.algo} on {net.topo} ({net.backend}), bw {net.bw_mbps}, "
            f"loss {spec.faults.loss_pct}%, {spec.transport.transport} ({links})")
