"""train-digits' graph on the simulator (docs/training.md, "train-digits on the graph engine"): the graph alone, as
a user types it (`gradswitch export-et --workload train-digits`, then `--workload-et` on ns-3), runs for timing with
synthetic data, every all-reduce exact (ring on the hosts, NetReduce in the switches); the real gradients
(`--engine graph`) are refused on ns-3 in one line, before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.workload.generators.digits import digits_reductions
from tests.graphs import trace_figures

pytestmark = pytest.mark.ns3

GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]


def gradswitch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADSWITCH, *args], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)


@pytest.mark.parametrize("algo", ["ring", "netreduce"])
def test_the_digits_graph_runs_on_the_simulator_for_timing(tmp_path: Path, algo: str) -> None:
    prefix = tmp_path / "traces" / "digits"
    done = gradswitch("export-et", "--workload", "train-digits", "--workers", "4", "--iterations", "3",
                      "--out", str(prefix))
    assert done.returncode == 0, done.stderr
    done = gradswitch("experiment", "--backend", "ns3", "--workload-et", str(prefix), "--topo", "rack", "--bw",
                      "100000", "--algo", algo, "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stdout + done.stderr
    report = trace_figures(tmp_path / "run" / "results.json")
    assert report["checked"] and "training" not in report  # no model: the graph alone, for timing
    assert [(c["collective"], c["nbytes"], c["checked"]) for c in report["collectives"]] == \
        [("all_reduce", 4 * r.elements, True) for r in digits_reductions()] * 3  # the loop's: one per tensor
    assert {c["algorithm"] for c in report["collectives"]} == {algo}
    assert report["job_s"] > 0


def test_its_real_gradients_are_refused_on_the_simulator_in_one_line(tmp_path: Path) -> None:
    done = gradswitch("experiment", "--backend", "ns3", "--workload", "train-digits", "--dtype", "float32",
                      "--engine", "graph", "--bw", "100000", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: workload = 'train-digits' computes its gradients in Python: it runs on BMv2 only")
    assert "its graph runs for timing only" in line and not (tmp_path / "run").exists()
