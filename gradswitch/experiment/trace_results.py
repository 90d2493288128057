"""A trace run's results.json (workload_et, either backend): the one results.json every run writes
(gradswitch/experiment/results_file.py), its loop figures made of the graphs' run (one iteration: the job, from the
go to its last node's end), and what the run reports beyond them as its `graph` section (graph_run.GraphRunReport,
results_file.GraphFigures); read back as the report by graph_run.read_graph_report."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gradswitch.experiment import results_file
from gradswitch.experiment.report import Usage, busiest_link_load, fabric_link_loads, wire_totals, with_faults
from gradswitch.experiment.results_file import Iteration, Outcome, Results, Summary
from gradswitch.experiment.spec import ExperimentSpec, spec_dict
from gradswitch.workload.graph import JobGraph
from gradswitch.workload.worker_result import WorkerResult

if TYPE_CHECKING:
    from gradswitch.experiment.graph_run import GraphRunReport

RUN = "run"  # the errors' key of a line that names no node


def graph_outcome(report: GraphRunReport, graph: JobGraph) -> Outcome:
    """failed where a rank did not run every node of its graph (or the run reported an error and no wrong output);
    check_failed where an output was not exact; ok otherwise."""
    finished = len(report.run.nodes) >= sum(len(r.nodes) for r in graph.ranks)
    if not finished:
        return Outcome.FAILED
    if any(n.checked is False for n in report.run.nodes):
        return Outcome.CHECK_FAILED
    return Outcome.FAILED if report.errors else Outcome.OK


def error_map(errors: Iterable[str]) -> dict[str, str]:
    """The report's error lines (`who: what`) as results.json's errors (who -> what; a line naming no one under
    RUN); GraphRunReport.from_results joins them back."""
    out: dict[str, str] = {}
    for line in errors:
        who, sep, what = line.partition(": ")
        who, what = (who, what) if sep else (RUN, line)
        key, n = who, 2
        while key in out:  # two lines of one node: both kept
            key, n = f"{who} ({n})", n + 1
        out[key] = what
    return out


def trace_results(spec: ExperimentSpec, graph: JobGraph, report: GraphRunReport, started: float,
                  nodes: Iterable[WorkerResult], links: Usage | None = None, switches: dict[str, Any] | None = None,
                  job_id: int = 1) -> Results:
    """results.json of a run of `graph` (the spec's traces) that `report` describes: `nodes` the ranks' (and
    servers') results (their transports' counters), `links` what every shaped link carried, `switches` their
    counters (where read), `started` when the run started (epoch seconds). Its format and code_version are added on
    writing (results_file.write)."""
    links = links or {}
    outcome = graph_outcome(report, graph)
    outputs = [n.checked for n in report.run.nodes if n.kind not in ("compute", "send")]
    check = "exact" if any(c is not None for c in outputs) else "none"
    done = outcome != Outcome.FAILED
    job_s = report.job_s
    carried = sum(n.nbytes for n in report.run.nodes if n.rank == 0 and n.kind not in ("compute", "recv"))
    iterations: list[Iteration] = []
    if done:
        it: Iteration = {"index": 0, "time_s": job_s, "check": check, "start": 0.0, "end": job_s}
        if check != "none":
            it["correct"] = all(c is True for c in outputs)
        iterations.append(it)
    summary: Summary = {"median_s": job_s if done else None, "p99_s": job_s if done else None,
                        "mean_s": job_s if done else None,
                        "algbw_mbps": carried * 8 / job_s / 1e6 if done and job_s > 0 else None,
                        "lower_bound_s": None, "ratio_to_bound": None, "iterations_done": len(iterations)}
    if check != "none":
        summary["correct"] = done and all(c is True for c in outputs)
    ok = outcome == Outcome.OK
    jct = job_s if done else None
    body = {
        "name": spec.label, "backend": str(spec.network.backend), "spec": spec_dict(spec),
        "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(), "step_bytes": carried,
        "ok": ok, "outcome": str(outcome), "errors": error_map(e for e in report.errors if not e.startswith("fault ")),
        "check": check, "iterations": iterations, **wire_totals(nodes), "jct_s": jct, "summary": summary, "extra": {},
        "goodput_mbps": summary["algbw_mbps"],
        "jobs": {str(job_id): {"ok": ok, "outcome": str(outcome), "check": check, "jct_s": jct, **summary}},
        "headline_extra": {"avg_jct_s": jct, "check": check,
                           "busiest_link_load": busiest_link_load(links) if links else report.busiest_link_load,
                           "cpu_idle": report.cpu_idle, "machine_bound": report.machine_bound,
                           "machine_bound_reason": report.machine_bound_reason, "wall_s": report.wall_s},
        "training": None, "link_loads": fabric_link_loads(links), "links": links, "switches": switches or {},
        "bmv2": None, "graph": report.section(),
    }
    results = cast(Results, body)
    # the faults first among the errors (with_faults names an interrupting one), each iteration they cut marked
    return with_faults(results, list(report.faults), 0.0)


def write_trace_results(path: Path, spec: ExperimentSpec, graph: JobGraph, report: GraphRunReport, started: float,
                        nodes: Iterable[WorkerResult], links: Usage | None = None,
                        switches: dict[str, Any] | None = None, job_id: int = 1) -> Results:
    """trace_results written as path (format and code_version set); returns what was written."""
    return results_file.write(path, trace_results(spec, graph, report, started, nodes, links, switches, job_id))
