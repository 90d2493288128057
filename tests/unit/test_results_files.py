"""The files a run writes, each typed and written and read by one module: results.json (format and code
version, an unknown format refused), a node's result-<id>.json, a compare's summary.json; docs/results.md
generated from their types; a result that broke its check told from a run that could not run, in results.json,
table.txt, report.md, the bench tables and compare's exit status."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path

import pytest

from gradswitch.experiment import results_doc, results_file, summary_file
from gradswitch.experiment.results_file import Outcome, Results, ResultsFileError
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec, spec_dict
from gradswitch.version import code_version
from gradswitch.workload import worker_result
from gradswitch.workload.records import CheckKind, IterationRecord


def test_docs_results_md_is_what_the_types_give():
    assert results_doc.undocumented(results_doc.RESULTS + results_doc.SUMMARY + results_doc.WORKER) == []
    assert results_doc.DOC.read_text() == results_doc.render(), (
        "docs/results.md differs from the types: run `python -m gradswitch.experiment.results_doc --write`")


def test_every_field_summarize_writes_is_a_field_of_the_type():
    """The keys summarize (and the runners) put in results.json are Results' fields, and no more."""
    from gradswitch.experiment.placement import job_config, place, topology_for
    from gradswitch.experiment.report import summarize

    spec = ExperimentSpec.of(workers=2, iterations=2, bw_mbps=5.0)
    topo = topology_for(spec)
    cfg = job_config(spec, 1, place(spec, topo).jobs[0], topo)
    report = summarize(spec, [cfg], {1: nodes(cfg, correct=True)}, {}, 0.0)
    written = set(results_file.with_version(report))
    assert written <= set(results_file.Results.__annotations__)
    assert set(results_file.ResultsBody.__required_keys__) | results_file.WRITTEN <= written
    for it in report["iterations"]:
        assert set(it) <= set(results_file.Iteration.__annotations__)
    assert set(report["summary"]) <= set(results_file.Summary.__annotations__)


def nodes(cfg, correct: bool, crash: int | None = None, check_failed: int | None = None):
    out = {}
    for n in cfg.workers:
        records = [IterationRecord(i, float(i), i + 0.5, correct, 0 if correct else 3, 0.0,
                                   extra={"relative_error": 0.01 if correct else 0.3}, check=CheckKind.EXACT)
                   for i in range(1 if n.node_id in (crash, check_failed) else 2)]
        error = ("OSError: gone" if n.node_id == crash else
                 "h2: iteration 1: 3 wrong elements" if n.node_id == check_failed else None)
        out[n.node_id] = worker_result.worker_result(
            n.node_id, n.host, "worker", error is None, [worker_result.iteration_entry(r) for r in records],
            {"tx_packets": 1, "tx_bytes": 100}, error=error, check_failed=n.node_id == check_failed)
    return out


def test_a_broken_check_and_a_crash_are_different_outcomes(tmp_path):
    from gradswitch.experiment.placement import job_config, place, topology_for
    from gradswitch.experiment.report import format_table, summarize

    spec = ExperimentSpec.of(workers=2, iterations=2, bw_mbps=5.0)
    topo = topology_for(spec)
    cfg = job_config(spec, 1, place(spec, topo).jobs[0], topo)
    first = cfg.workers[0].node_id
    ok = summarize(spec, [cfg], {1: nodes(cfg, correct=True)}, {}, 0.0)
    wrong = summarize(spec, [cfg], {1: nodes(cfg, correct=False)}, {}, 0.0)
    stopped = summarize(spec, [cfg], {1: nodes(cfg, correct=True, check_failed=first)}, {}, 0.0)
    crashed = summarize(spec, [cfg], {1: nodes(cfg, correct=True, crash=first)}, {}, 0.0)
    assert [r["outcome"] for r in (ok, wrong, stopped, crashed)] == ["ok", "check_failed", "check_failed", "failed"]
    assert wrong["jobs"]["1"]["outcome"] == "check_failed" and not wrong["ok"]
    table = format_table(wrong)
    assert "CHECK FAILED" in table and "2 of 2 iterations wrong" in table and "not a headline" in table
    assert "CHECK FAILED" not in format_table(ok)


def test_results_json_has_its_format_and_code_version_and_an_unknown_format_is_refused(tmp_path):
    report = {"name": "r", "summary": {"median_s": 1.0}, "ok": True, "iterations": []}
    written = results_file.write(tmp_path / "results.json", report)  # type: ignore[arg-type]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["format"] == results_file.FORMAT and saved["code_version"] == code_version() == written["code_version"]
    assert list(saved)[:2] == ["format", "code_version"]
    assert results_file.read(tmp_path / "results.json") == saved
    (tmp_path / "results.json").write_text(json.dumps({**saved, "format": 99}))
    with pytest.raises(ResultsFileError) as e:
        results_file.read(tmp_path / "results.json")
    assert str(e.value).count("\n") == 0 and "format = 99" in str(e.value) and "formats 0, 1" in str(e.value)


def test_a_results_json_older_than_the_format_reads_as_format_0(tmp_path):
    old = {"name": "r", "summary": {"median_s": 1.0, "correct": False}, "ok": False, "iterations": []}
    (tmp_path / "results.json").write_text(json.dumps(old))
    read = results_file.read(tmp_path / "results.json")
    assert results_file.format_of(dict(read), "x") == 0 and read["outcome"] == Outcome.CHECK_FAILED


def test_a_nodes_result_file_round_trips_and_refuses_unknown_fields(tmp_path):
    record = IterationRecord(0, 1.0, 2.0, True, 0, 0.0, check=CheckKind.EXACT)
    result = worker_result.worker_result(3, "h3", "worker", True, [worker_result.iteration_entry(record)],
                                         {"tx_packets": 5}, {"model_digest": "ab"})
    worker_result.write(tmp_path, result)
    assert worker_result.read(tmp_path, 3) == result and result["iterations"][0]["time_s"] == 1.0
    with pytest.raises(ValueError, match="no field 'colour'"):
        worker_result.worker_result(3, "h3", "worker", True, [], extra={"colour": "red"})
    worker_result.path_of(tmp_path, 4).write_text(json.dumps({**result, "node_id": 4, "colour": "red"}))
    with pytest.raises(worker_result.WorkerResultError, match="unknown field 'colour'"):
        worker_result.read(tmp_path, 4)


# ---- compare: a run whose result broke its check, a run that could not run ----

SPEC = """
name = "outcomes"
repeat = 2
baselines = ["base"]
[defaults]
iterations = 2
seed = 10
[[runs]]
name = "base"
[[runs]]
name = "new"
"""


class Runner:
    """A stand-in for run_experiment that writes results.json through results_file: `wrong` runs' results are
    correct: false, `crash` runs raise as a node that died does."""

    def __init__(self, wrong: Collection[tuple[str, int]] = (), crash: Collection[tuple[str, int]] = ()) -> None:
        self.wrong, self.crash = wrong, crash

    def __call__(self, spec: ExperimentSpec, out: Path) -> Results:
        k = spec.measurement.seed - 10
        if (spec.label, k) in self.crash:
            raise ExperimentError(f"{spec.label}: h3 exited with status 3")
        correct = (spec.label, k) not in self.wrong
        t = 1.0 if spec.label == "base" else 0.5
        report = {"name": spec.label, "backend": "bmv2", "spec": spec_dict(spec),
                  "step_bytes": spec.workload.size_bytes,
                  "ok": correct, "outcome": "ok" if correct else "check_failed", "check": "exact",
                  "retransmissions": 0, "bytes_on_wire": 10, "packets_on_wire": 1, "iterations": [], "errors": {},
                  "summary": {"median_s": t, "p99_s": t, "correct": correct, "algbw_mbps": 1 / t, "lower_bound_s": 0.4,
                              "ratio_to_bound": t / 0.4, "iterations_done": spec.measurement.iterations},
                  "headline_extra": {"check": "exact", "cpu_idle": 0.5, "machine_bound": False,
                                     "max_relative_error": 0.01 if correct else 0.3}}
        out.mkdir(parents=True, exist_ok=True)
        return results_file.write(out / "results.json", report)  # type: ignore[arg-type]


def compare(tmp_path: Path, runner: Runner) -> tuple[summary_file.Summary, str, int]:
    from gradswitch.experiment.compare import exit_status, load_spec, run_compare

    (tmp_path / "spec.toml").write_text(SPEC)
    spec = load_spec(tmp_path / "spec.toml")
    summary = run_compare(spec, tmp_path / "out", runner, log=lambda _: None)
    assert summary_file.read(tmp_path / "out" / "summary.json") == summary
    return summary, (tmp_path / "out" / "report.md").read_text(), int(exit_status(summary))


def test_compare_all_ok_exits_0(tmp_path):
    summary, report, status = compare(tmp_path, Runner())
    assert status == 0 and summary["new"]["outcome"] == "ok" and "check failed" not in report


def test_compare_marks_a_broken_check_and_exits_3(tmp_path):
    summary, report, status = compare(tmp_path, Runner(wrong={("new", 0)}))
    assert status == 3
    new = summary["new"]
    assert new["check_failed_repetitions"] == [1] and new["headline_repetitions"] == 1
    assert new["spread"]["median_s"]["n"] == 1  # the broken repetition is out of the medians
    assert "| new (check failed: 1 of 2) |" in report
    assert "## Results that broke their check" in report and "- new (repetition 1): not correct" in report
    assert "could not run" not in report


def test_compare_never_makes_a_headline_of_a_run_whose_every_check_broke(tmp_path):
    summary, report, status = compare(tmp_path, Runner(wrong={("new", 0), ("new", 1)}))
    assert status == 3 and summary["new"]["over_baseline"]["headline"] is False
    assert "| new (check failed: 2 of 2) |" in report


def test_compare_tells_a_run_that_could_not_run_and_exits_4(tmp_path):
    summary, report, status = compare(tmp_path, Runner(wrong={("new", 0)}, crash={("new", 1)}))
    assert status == 4 and summary["new"]["failed_repetitions"] == [2] and summary["new"]["outcome"] == "failed"
    assert "## Runs that could not run (exit status 4)" in report and "h3 exited with status 3" in report


def test_the_performance_tables_mark_a_run_whose_check_failed():
    """training-dlcp.json's `drop` run is correct: false in all its repetitions: marked in the DLCP and claims
    tables, and its ratio is not a headline."""
    from gradswitch.experiment.tables import claims, training
    from gradswitch.experiment.tables.documents import PACKAGE_CHECKOUT

    results = PACKAGE_CHECKOUT.results
    contention = training.dlcp_contention_table(results)
    drop = next(line for line in contention.splitlines() if line.startswith("| drop"))
    assert drop.startswith("| drop (check failed: 5 of 5) |") and "not a headline" in drop
    claimed = claims.claims_table(results)
    assert re.search(r"drop [0-9.]+ \[[0-9.]+, [0-9.]+\] \(check failed: 5 of 5\), not a headline", claimed)
    clean = next(line for line in contention.splitlines() if line.startswith("| priority |"))
    assert "check failed" not in clean


@pytest.mark.parametrize(("wrong", "crash", "status"), [((), (), 0), ({("new", 0)}, (), 3),
                                                        ({("new", 0)}, {("base", 1)}, 4)])
def test_gradswitch_compare_exits_with_what_became_of_its_runs(tmp_path, monkeypatch, capsys, wrong, crash, status):
    """The command's exit status: 0 all held, 3 a result broke its check, 4 a run could not run (with a line
    saying which on stderr)."""
    from gradswitch.cli import main as cli
    from gradswitch.experiment import compare

    real = compare.run_compare
    monkeypatch.setattr(cli, "_ready_for", lambda runs: None)  # the stand-in runner needs no network
    monkeypatch.setattr(compare, "run_compare", lambda spec, out: real(spec, out, Runner(wrong, crash),
                                                                       log=lambda _: None))
    (tmp_path / "spec.toml").write_text(SPEC)
    assert cli.main(["compare", str(tmp_path / "spec.toml"), "--out", str(tmp_path / "out")]) == status
    err = capsys.readouterr().err
    assert (f"exit status {status}:" in err) == (status != 0)
