"""The goodput study in the package (gradswitch/experiment/goodput_study.py) and `gradswitch goodput`, from ns-3
runs kept under --out (made up here: tests/ns3/test_goodput.py simulates them)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from bench.scaling import scaling_spec
from gradswitch.cli.main import main
from gradswitch.experiment.goodput_study import (
    ALGO,
    MODEL,
    FabricRun,
    GoodputError,
    StudyOptions,
    degraded_cases,
    job_spec,
    report_lines,
    run_path,
    run_study,
)
from gradswitch.experiment.limits import Limits
from gradswitch.experiment.placement import topology_for

WORKERS = 16
SMALL = ["--workers", str(WORKERS), "--seeds", "2", "--days", "5", "--sweep-days", "10"]


def keep_runs(out: Path, slower: float = 1.05) -> None:
    """The five ns-3 runs as measure() keeps them: the intact fabric 90 ms, each element gone `slower` times it."""
    for label, kind, element in degraded_cases(topology_for(job_spec(WORKERS))):
        iteration = 0.09 if kind is None else 0.09 * slower
        run = FabricRun(label, element, str(kind) if kind is not None else "intact", WORKERS, MODEL, ALGO, True,
                        iteration, 0.9, 1.0, Limits.simulated_figures(0.9), "test")
        out.mkdir(parents=True, exist_ok=True)
        run_path(out, label, WORKERS).write_text(json.dumps(asdict(run)))


def test_the_job_is_the_scaling_studys_point_for_one_iteration():
    for n in (16, 1024):
        assert job_spec(n) == scaling_spec(MODEL, n, ALGO).but(iterations=1, warmup=0)


def test_the_study_from_kept_runs(tmp_path):
    keep_runs(tmp_path)
    document = run_study(StudyOptions(workers=WORKERS, days=5, seeds=2, sweep_days=10), tmp_path,
                         simulate_missing=False, log=lambda line: None)
    s = document["study"]
    assert document["fabric"]["iteration_s"] == pytest.approx(0.09) and s["seeds"] == 2 and s["hours"] == 120
    assert set(document["fabric"]["how"]) == {"link:edge-agg", "link:agg-core", "switch:agg", "switch:core"}
    for name in ("checkpoint_restart", "in_place"):
        g = s["strategies"][name]["goodput"]
        assert 0 < g["low"] <= g["mean"] <= g["high"] <= 1
        assert s["strategies"][name]["effective_samples_per_s"] == pytest.approx(
            g["mean"] * document["samples_per_s_intact"])
    lines = report_lines(document)
    assert lines[0].startswith("ns-3 intact") and "1.0000x intact" in lines[0]
    assert any(line.startswith("in place / checkpoint restart:") for line in lines)


def test_gradswitch_goodput_writes_the_document_and_its_plot(tmp_path, capsys):
    keep_runs(tmp_path)
    assert main(["goodput", *SMALL, "--measured-only", "--out", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "goodput.json").read_text())
    assert document["workers"] == WORKERS and (tmp_path / "goodput.png").stat().st_size > 0
    assert f"wrote {tmp_path / 'goodput.json'}" in capsys.readouterr().out


def test_a_value_out_of_range_is_one_error_line(tmp_path, capsys):
    assert main(["goodput", "--measured-only", "--out", str(tmp_path), "--seeds", "1"]) == 2
    assert capsys.readouterr().err == "error: --seeds 1: at least 2 (the spread over seeds is reported)\n"


@pytest.mark.parametrize(("argv", "message"), [
    (["--restart-s", "0"], "argument --restart-s: 0: give a number above 0"),
    (["--days", "many"], "argument --days: 'many' is not a number"),
])
def test_a_bad_number_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["goodput", *argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and len(err.splitlines()) == 1


def test_without_the_intact_run_it_says_how_to_get_it(tmp_path):
    with pytest.raises(GoodputError, match=r"no ns-3 run of the intact fabric under .*without --measured-only"):
        run_study(StudyOptions(workers=WORKERS, seeds=2), tmp_path, simulate_missing=False, log=lambda line: None)
