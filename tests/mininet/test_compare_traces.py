"""`gradswitch compare` of a Chakra trace on BMv2, as a user types it: one trace `gradswitch export-et` wrote (4 ranks,
256 KiB all-reduce) run by the hosts (ring) and by the switches (NetReduce), a matrix over `algo` that the
simulator's graph engine cannot run; both exact, each with its job's time, NetReduce measured against the ring
(the simulator's side: tests/ns3/test_compare_traces.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gradswitch.protocol.paths import REPO_ROOT
from tests.graphs import trace_figures
from tests.results import read_summary

pytestmark = pytest.mark.mininet

GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]


def gradswitch(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADSWITCH, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)


def test_ring_against_netreduce_on_one_trace(tmp_path):
    made = gradswitch("export-et", "--collective", "all_reduce", "--workers", "4", "--size", "256KiB", "--out",
                      str(tmp_path / "et" / "ar"))
    assert made.returncode == 0, made.stderr
    spec = tmp_path / "algos.toml"
    spec.write_text('name = "algos"\nbaselines = ["ring"]\n[defaults]\nworkload_et = "et/ar"\ntopo = "rack"\n'
                    'bw_mbps = 8\n[matrix]\nalgo = ["ring", "netreduce"]\n')
    out = tmp_path / "out"
    done = gradswitch("compare", str(spec), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = read_summary(out / "summary.json")
    assert set(summary) == {"ring", "netreduce"}
    for s in summary.values():
        assert s["backend"] == "bmv2" and s["outcome"] == "ok" and s["correct"] and s["check"] == "exact"
        assert s["job_s"] > 0 and s["worst_ratio_to_bound"] >= 1.0 and s["cpu_idle"] is not None
    graph = trace_figures(out / "netreduce" / "results.json")
    assert {c["algorithm"] for c in graph["collectives"]} == {"netreduce"}
    report = (out / "report.md").read_text()
    assert "| netreduce | bmv2 | " in report and "- **netreduce**: trace `" in report
    # NetReduce's job time over the ring's, unless the machine (not the links) set the ring's pace: a loaded
    # machine's BMv2 run is no baseline (compare's rule for every run)
    over = summary["netreduce"]["over_baseline"]
    if summary["ring"]["machine_bound"]:
        assert over["baseline"] is None and over["ratio"] is None
        assert "No baseline (ring) has a job_s from a repetition that was not machine-bound: no headline." in report
    else:
        assert over["baseline"] == "ring" and over["ratio"] > 0
        assert f"- netreduce: {over['ratio']:.3f}" in report
