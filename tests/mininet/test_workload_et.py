"""`gradswitch experiment --workload-et DIR/PREFIX` on BMv2, as a user types it: a trace `gradswitch export-et`
wrote and a small PyTorch model traced on the CPU by `gradswitch trace-model`, each run by the hosts' graph
engine through BMv2 switches at 4 ranks, every output exact (the simulator's side: tests/ns3/test_workload_et.py;
the two compared: bench.crossval's collectives part)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment import results_file
from gradswitch.protocol.paths import REPO_ROOT
from tests.graphs import trace_figures
from tests.small_model import trace_small_model

pytestmark = pytest.mark.mininet

GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]


def gradswitch(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADSWITCH, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)


def run_bmv2(prefix: Path, out: Path) -> dict[str, Any]:
    done = gradswitch("experiment", "--workload-et", str(prefix), "--topo", "rack", "--bw", "8", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checks: every output exact" in done.stdout, done.stdout
    report: dict[str, Any] = trace_figures(out / "results.json")
    return report


def test_an_exported_all_to_all_runs_exact_on_bmv2(tmp_path):
    prefix = tmp_path / "et" / "a2a"
    made = gradswitch("export-et", "--collective", "all_to_all", "--workers", "4", "--size", "512KiB", "--repeat",
                      "2", "--out", str(prefix))
    assert made.returncode == 0, made.stderr
    report = run_bmv2(prefix, tmp_path / "run")
    assert [c["collective"] for c in report["collectives"]] == ["all_to_all"] * 2
    assert all(c["checked"] for c in report["collectives"])
    assert len(report["hosts"]) == 4
    # the timeline: each rank's two all-to-alls on the world group's row, at the times the report holds
    trace = json.loads((tmp_path / "run" / "graph-timeline.json").read_text())["traceEvents"]
    spans = sorted((e["pid"], e["ts"]) for e in trace if e["ph"] == "X" and e["cat"] == "all_to_all")
    assert spans == sorted((n["rank"], round(n["start_s"] * 1e6, 3)) for n in report["run"]["nodes"])
    assert (tmp_path / "run" / "graph-timeline.png").exists()
    # the one results.json type, as a spec's training writes it on BMv2 (runner.run_on): the run's one iteration, the
    # switches' counters and build, the graphs' figures as its `graph`
    results = results_file.read(tmp_path / "run" / "results.json")
    assert results["backend"] == "bmv2" and results["outcome"] == "ok" and results["check"] == "exact"
    assert [it["time_s"] for it in results["iterations"]] == [report["job_s"]] == [results["summary"]["median_s"]]
    assert results["bmv2"] is not None and set(results["switches"]) >= {"s1"} and results["links"]
    assert results["packets_on_wire"] > 0


def test_a_pytorch_model_traced_on_the_cpu_replays_on_bmv2(tmp_path):
    prefix = tmp_path / "et" / "small"
    trace_small_model(prefix)
    report = run_bmv2(prefix, tmp_path / "run")
    assert {c["collective"] for c in report["collectives"]} == {"all_reduce"}
    assert all(c["checked"] for c in report["collectives"])
    nodes = report["run"]["nodes"]
    compute = sum(n["end_s"] - n["start_s"] for n in nodes if n["rank"] == 0 and n["kind"] == "compute")
    assert 0 < compute <= report["job_s"]


def test_a_spine_crash_under_a_trace_is_routed_around_recorded_and_exact(tmp_path):
    """A trace runs with a switch fault on BMv2 as a spec's own workload does: spine1 killed 1.5 s after the go
    (testbed seconds) and restarted 1 s later; the controller reroutes, the ring's retransmissions ride through,
    every output is exact, and results.json holds the fault's record (detected, recovered)."""
    prefix = tmp_path / "et" / "ar"
    made = gradswitch("export-et", "--collective", "all_reduce", "--workers", "4", "--size", "256KiB", "--repeat",
                      "8", "--out", str(prefix))
    assert made.returncode == 0, made.stderr
    out = tmp_path / "run"
    done = gradswitch("experiment", "--workload-et", str(prefix), "--topo", "leafspine", "--bw", "8", "--fault",
                      "switch-crash:spine1@1.5,restart=1", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    said = re.search(r"  fault switch-crash:spine1@1\.5,restart=1: recovered: injected at (\d+\.\d+) s, detected "
                     r"after", done.stdout)
    assert said is not None, done.stdout
    assert float(said[1]) == pytest.approx(1.5, abs=0.1)  # the timer's own lateness on a busy machine (1.52 s seen)
    assert "checks: every output exact" in done.stdout, done.stdout
    report = trace_figures(out / "results.json")
    (crash,) = report["faults"]
    assert crash["outcome"] == "recovered" and crash["injected_s"] == pytest.approx(1.5, abs=0.1)
    assert 0 < crash["time_to_detect_s"] < 1.0 and crash["time_to_recover_s"] is not None
    assert report["job_s"] * report["dilation"] > crash["injected_s"]  # the crash came while the trace ran
