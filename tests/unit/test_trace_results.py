"""A trace run's results.json (gradswitch/experiment/trace_results.py): the one results.json type, its loop figures
made of the graphs' run and its `graph` section, read back as the report that wrote it."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from gradswitch.experiment import results_file
from gradswitch.experiment.graph_run import RESULTS, graph_job, graph_spec, read_graph_report, summarize
from gradswitch.experiment.results_doc import undocumented
from gradswitch.experiment.trace_results import error_map, write_trace_results
from gradswitch.topology.faults import parse_fault
from gradswitch.topology.generators import build_topology
from gradswitch.workload.fault_record import FaultOutcome, FaultRecord
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.worker_result import WorkerResult
from tests.graphs import one_collective

AR = CollectiveKind.ALL_REDUCE


def two_ranks(end1: float = 1.3, checked: bool | None = True) -> GraphRun:
    def n(rank: int, nid: int, kind: str, a: float, b: float) -> NodeTiming:
        coll = kind == "collective"
        return NodeTiming(rank, nid, kind, a, b, AR if coll else None, "world" if coll else None, 1_000_000,
                          checked if coll else None)

    return GraphRun((n(0, 1, "compute", 0, 1), n(1, 1, "compute", 0, 1), n(0, 2, "collective", 1.0, 1.25),
                     n(1, 2, "collective", 1.0, end1)))


def test_a_trace_runs_results_json_is_the_one_type_and_reads_back(tmp_path) -> None:
    g = one_collective(AR, 2, 1_000_000, compute_s=1.0)
    spec = graph_spec(g, bw_mbps=8.0)
    job, _ = graph_job(build_topology("rack", hosts=2, bw_mbps=8.0), spec, g, dilation=2.0)
    carried = {"h1->s1": {"kind": "host", "sent_bytes": 900, "load": 0.5},
               "s1->h2": {"kind": "host", "sent_bytes": 1200, "load": 0.7}}
    report = summarize(job, two_ranks(), ["h1", "h2"], 8.0, carried, 0.5, (), 3.0, 2)
    nodes: list[WorkerResult] = [{"node_id": r, "role": "worker", "host": f"h{r + 1}", "ok": True, "iterations": [],
              "stats": {"tx_bytes": 1000, "tx_packets": 10, "requester": {"retransmitted": 1}}} for r in (0, 1)]
    written = write_trace_results(tmp_path / RESULTS, spec, g, report, 0.0, nodes, carried)
    raw = json.loads((tmp_path / RESULTS).read_text())
    # the loop's figures: one iteration, the job; the format and the code's version, as every results.json
    assert raw["format"] == results_file.FORMAT == 2 and raw["code_version"] == written["code_version"] != ""
    assert raw["outcome"] == "ok" and raw["ok"] and raw["check"] == "exact"
    assert raw["iterations"] == [{"index": 0, "time_s": pytest.approx(1.3), "check": "exact", "start": 0.0,
                                  "end": pytest.approx(1.3), "correct": True}]
    assert raw["summary"]["median_s"] == pytest.approx(1.3) and raw["jct_s"] == pytest.approx(1.3)
    assert raw["step_bytes"] == 1_000_000 and raw["retransmissions"] == 2 and raw["packets_on_wire"] == 20
    assert raw["headline_extra"]["busiest_link_load"] == 0.7 and raw["headline_extra"]["cpu_idle"] == 0.5
    # the graph's own figures, as documented
    assert set(raw["graph"]) == set(results_file.GraphFigures.__annotations__)
    assert raw["graph"]["by_kind"][0]["worst_ratio"] == pytest.approx(0.6) and raw["graph"]["job_s"] == 1.3
    assert undocumented(results_file.DOCUMENTED) == []
    assert read_graph_report(tmp_path / RESULTS) == report


def test_errors_and_faults_go_to_the_results_own_fields_and_come_back(tmp_path) -> None:
    """A failed trace run: its errors are results.json's (who -> what), an interrupting fault first and in `faults`;
    its outcome the run's; read back, the report's errors and faults are what they were."""
    g = one_collective(AR, 2, 1_000_000, compute_s=1.0)
    spec = graph_spec(g, bw_mbps=8.0)
    job, _ = graph_job(build_topology("rack", hosts=2, bw_mbps=8.0), spec, g, dilation=1.0)
    fault = FaultRecord(parse_fault("link-down:h1-s1@0.5"), 0.5, FaultOutcome.INTERRUPTED,
                        detail="the link stayed down")
    from gradswitch.experiment.report import interrupting

    errors = (*[f"{who}: {line}" for who, line in interrupting([fault]).items()],
              "rank 1 on h2: timed out", "a rank did not finish its graph")
    run = GraphRun(two_ranks().nodes[:-1])  # rank 1 never finished its all-reduce
    report = replace(summarize(job, run, ["h1", "h2"], 8.0, {}, 0.5, errors, 3.0), faults=(fault,))
    write_trace_results(tmp_path / RESULTS, spec, g, report, 0.0, [])
    raw = results_file.read(tmp_path / RESULTS)
    assert raw["outcome"] == "failed" and not raw["ok"] and raw["iterations"] == []
    assert list(raw["errors"]) == ["fault link-down:h1-s1@0.5", "rank 1 on h2", "run"]
    assert raw["fault_outcome"] == "interrupted" and raw["faults"][0]["outcome"] == "interrupted"
    back = read_graph_report(tmp_path / RESULTS)
    assert back.faults == (fault,) and back.errors[1:] == ("rank 1 on h2: timed out",
                                                            "run: a rank did not finish its graph")
    assert back.errors[0].startswith("fault link-down:h1-s1@0.5: interrupted")


def test_error_map_keeps_two_lines_of_one_node() -> None:
    assert error_map(["rank 0: a", "rank 0: b", "plain"]) == {"rank 0": "a", "rank 0 (2)": "b", "run": "plain"}


def test_a_format_1_results_json_still_reads_and_is_no_trace_runs(tmp_path) -> None:
    """results.json format 1 (before `graph`) is read as it was; asked for a trace run's report, it names what is
    missing; a format this code does not know is refused in one line."""
    from gradswitch.experiment.graph_run import GraphReportError

    path = tmp_path / RESULTS
    old = {"format": 1, "code_version": "0.1.0", "name": "ring-n4", "summary": {"median_s": 0.5}, "ok": True,
           "outcome": "ok", "iterations": []}
    path.write_text(json.dumps(old))
    assert results_file.read(path)["summary"]["median_s"] == 0.5
    with pytest.raises(GraphReportError, match="no `graph` in it"):
        read_graph_report(path)
    path.write_text(json.dumps({**old, "format": 3}))
    with pytest.raises(results_file.ResultsFileError,
                       match=re.escape("format = 3: this gradswitch reads results.json formats 0, 1, 2")):
        results_file.read(path)
