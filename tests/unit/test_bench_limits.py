"""What limited a measurement (bench/common.py): the busiest link's load and the machine's idle CPU."""

from __future__ import annotations

import subprocess
import sys

from bench.common import Limits, MachineMeter
from gradswitch.experiment.cpu_load import CpuSample, process_cpu_seconds


def test_the_verdict_names_what_saturated():
    assert Limits(0.97, 0.30).verdict() == "link-bound"
    assert Limits(0.95, 0.03).verdict().startswith("machine-bound (CPU 3% idle during the jobs (under 10%))")
    assert Limits(0.40, 0.45).verdict().startswith(
        "machine-bound (busiest link 40% loaded, under 0.8 of the 100% a link-bound run keeps)")
    assert Limits(None, 0.45, "none", switch_cores=0.98).verdict().startswith("switch-bound")
    assert Limits(0.85, 0.45).verdict() == "neither the links nor the CPU saturated"
    assert Limits(0.97, 0.30).line() == "busiest link 97% loaded, CPU 30% idle: link-bound"
    assert Limits(None, 0.5, "unshaped veths").line().startswith("links: unshaped veths, CPU 50% idle")
    assert Limits.of_report({"headline_extra": {"busiest_link_load": 1.0, "cpu_idle": 0.2}}).verdict() == "link-bound"
    # a training run's links idle while the GPUs compute: 60 % is link-bound when its ideal keeps 65 %
    training = {"headline_extra": {"busiest_link_load": 0.6, "cpu_idle": 0.3}, "training": {"ideal_link_load": 0.65}}
    assert Limits.of_report(training).verdict() == "link-bound"
    assert Limits.of_report({**training, "training": {"ideal_link_load": 1.0}}).verdict().startswith("machine-bound")


def test_every_benchmark_figure_says_what_limited_it():
    figures = Limits(0.5, 0.05, ideal_link_load=0.9).figures()
    assert {"busiest_link_load", "cpu_idle", "machine_bound", "machine_bound_reason", "limited_by"} <= set(figures)
    assert figures["machine_bound"] is True and "CPU 5% idle" in figures["machine_bound_reason"]
    assert "busiest link 50% loaded, under 0.8 of the 90%" in figures["machine_bound_reason"]
    assert Limits(None, None).figures()["machine_bound"] is None  # nothing measured: not judged


LATENCY_BENCHMARKS = {"testbed_costs"}  # round trips of one packet: BMv2's and a Python host's own delay
# benchmarks that save a study of the package: the study's module keeps each run's Limits figures
PACKAGE_STUDIES = {"goodput": "gradswitch/experiment/goodput_study.py"}


def test_every_network_benchmark_records_the_build_and_the_bottleneck():
    """Each benchmark that writes bench/results/ goes through save() (the toolchain: the BMv2 build) and
    keeps Limits' figures (cpu_idle, busiest_link_load, machine_bound) or a compare summary's, which
    has them per run (gradswitch/experiment/compare.py)."""
    import ast

    from gradswitch.protocol.paths import REPO_ROOT

    benches = sorted(p for p in (REPO_ROOT / "bench").glob("*.py") if "save(" in p.read_text() and p.stem != "common")
    assert {p.stem for p in benches} >= {"allreduce", "netreduce", "netreduce_switch", "training", "dlcp",
                                         "transport", "forwarding", "instructions"}
    for path in benches:
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert "save" in names, path
        if path.stem in LATENCY_BENCHMARKS:  # one packet in flight: no link is loaded, the machine must be idle
            assert "cpu_idle" in path.read_text(), f"{path.name} records no idle CPU"
            continue
        if path.stem in PACKAGE_STUDIES:
            assert "Limits.simulated_figures" in (REPO_ROOT / PACKAGE_STUDIES[path.stem]).read_text(), path.name
            continue
        assert "Limits" in names or "run_compare" in names, f"{path.name} records no bottleneck"


def test_idle_share_between_samples():
    assert CpuSample(100, 1000).idle_share_until(CpuSample(150, 1100)) == 0.5
    assert CpuSample(100, 1000).idle_share_until(CpuSample(100, 1000)) is None


def test_a_spinning_process_uses_about_one_core():
    spin = ("import sys, time\nsys.stdin.readline()\nend = time.process_time() + 0.4\n"
            "while time.process_time() < end: pass\nprint('done', flush=True)\nsys.stdin.readline()\n")
    proc = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    with MachineMeter(proc.pid) as meter:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "done\n"
        meter.mark()  # while the process still exists (its CPU time is read from /proc)
    proc.communicate("end\n", timeout=60)
    assert meter.cpu_idle is not None and 0.0 <= meter.cpu_idle < 1.0
    # it spun for 0.4 s of CPU time; its share of the wall time depends on the machine's load
    assert meter.process_seconds is not None and 0.39 <= meter.process_seconds < 1.0
    assert meter.process_cores is not None and 0.0 < meter.process_cores <= 1.05
    assert process_cpu_seconds(proc.pid) is None  # gone
