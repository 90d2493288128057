"""`gradswitch compare` of Chakra traces on the simulator, as a user types it: traces `gradswitch export-et` wrote,
a spec next to them naming them by relative paths, run from elsewhere; the larger all-reduce takes longer, its
ratio over the smaller is in the report, every output exact, exit status 0; started again on the same --out every
repetition is kept; a run whose job a fault cuts short could not run (exit status 4, named in the report)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gradswitch.protocol.paths import REPO_ROOT
from tests.results import read_summary

pytestmark = pytest.mark.ns3

GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]


def gradswitch(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADSWITCH, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)


def export(prefix: Path, size: str) -> None:
    made = gradswitch("export-et", "--collective", "all_reduce", "--workers", "4", "--size", size, "--out",
                      str(prefix))
    assert made.returncode == 0, made.stderr


def test_two_sizes_of_a_trace_compared_and_kept_when_started_again(tmp_path):
    export(tmp_path / "et" / "ar-1MiB", "1MiB")
    export(tmp_path / "et" / "ar-4MiB", "4MiB")
    spec = tmp_path / "sizes.toml"
    spec.write_text('name = "sizes"\nrepeat = 2\nbaselines = ["ar-1MiB"]\n[defaults]\nbackend = "ns3"\n'
                    'topo = "rack"\nbw_mbps = 1000\n[matrix]\nworkload_et = ["et/ar-1MiB", "et/ar-4MiB"]\n')
    out = tmp_path / "out"
    done = gradswitch("compare", str(spec), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("checks: every output exact") == 4, done.stdout
    summary = read_summary(out / "summary.json")
    small, large = summary["ar-1MiB"], summary["ar-4MiB"]
    for s in (small, large):
        assert s["outcome"] == "ok" and s["correct"] and s["headline_repetitions"] == 2
        assert s["spread"]["job_s"]["n"] == 2 and s["job_s"] == s["spread"]["job_s"]["median"]
        assert 1.0 <= s["worst_ratio_to_bound"] <= 1.2  # an all-reduce at the link rate, headers on top
        assert s["busiest_link_load"] > 0.8
    assert large["job_s"] > 3 * small["job_s"]  # four times the bytes
    assert large["over_baseline"]["baseline"] == "ar-1MiB" and large["over_baseline"]["headline"]
    assert 3.0 < large["over_baseline"]["ratio"] < 4.5
    report = (out / "report.md").read_text()
    assert "| job s | worst time / bound | exposed s | busiest link load | check | exact |" in report
    assert f"- ar-4MiB: {large['over_baseline']['ratio']:.3f}" in report
    assert f"trace `{tmp_path / 'et' / 'ar-4MiB'}` (ar-4MiB: 4 ranks" in report  # from the spec's folder
    rep = out / "ar-4MiB" / "rep2"
    assert {"results.json", "graph-run-key.json", "table.txt", "graph-timeline.png"} <= {
        p.name for p in rep.iterdir()}

    again = gradswitch("compare", str(spec), "--out", str(out))
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count(", skipped") == 4 and "checks:" not in again.stdout, again.stdout
    assert read_summary(out / "summary.json") == summary


def test_a_run_that_could_not_run_is_exit_status_4_and_named(tmp_path):
    export(tmp_path / "ar", "1MiB")
    spec = tmp_path / "broken.toml"
    spec.write_text('[defaults]\nbackend = "ns3"\nbw_mbps = 1000\nworkload_et = "ar"\n[[runs]]\nname = "fine"\n'
                    '[[runs]]\nname = "cut"\nfaults = ["switch-crash:s1@0.001"]\n')  # the rack's one switch, for good
    out = tmp_path / "out"
    done = gradswitch("compare", str(spec), "--out", str(out))
    assert done.returncode == 4, done.stdout + done.stderr
    assert "exit status 4: some repetition could not run" in done.stderr
    summary = read_summary(out / "summary.json")
    assert summary["fine"]["outcome"] == "ok" and summary["cut"]["outcome"] == "failed"
    assert summary["cut"]["failed_repetitions"] == [1] and "job_s" not in summary["cut"]
    report = (out / "report.md").read_text()
    assert "## Runs that could not run (exit status 4)\n\n- cut (repetition 1): fault switch-crash:s1@0.001: " \
           "interrupted" in report, report


def test_a_spec_with_a_broken_trace_is_refused_before_anything_starts(tmp_path):
    export(tmp_path / "ar", "1MiB")
    (tmp_path / "ar.1.et").write_bytes(b"not a trace")
    spec = tmp_path / "bad.toml"
    spec.write_text('[defaults]\nbackend = "ns3"\nbw_mbps = 1000\n[[runs]]\nname = "x"\nworkload_et = "ar"\n')
    done = gradswitch("compare", str(spec), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and not (tmp_path / "out").exists()
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {spec}: run 'x': workload_et: {tmp_path / 'ar.1.et'}"), line
