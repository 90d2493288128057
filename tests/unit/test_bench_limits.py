"""What limited a measurement (bench/common.py): the busiest link's load and the machine's idle CPU."""

from __future__ import annotations

import subprocess
import sys

from bench.common import Limits, MachineMeter
from controller.experiment.machine import CpuSample, process_cpu_seconds


def test_the_verdict_names_what_saturated():
    assert Limits(0.97, 0.30).verdict() == "link-bound"
    assert Limits(0.40, 0.03).verdict().startswith("machine-bound (no CPU left")
    assert Limits(None, 0.45, "none", switch_cores=0.98).verdict().startswith("switch-bound")
    assert Limits(0.40, 0.45).verdict() == "neither the links nor the CPU saturated"
    assert Limits(0.97, 0.30).line() == "busiest link 97% loaded, CPU 30% idle: link-bound"
    assert Limits(None, 0.5, "unshaped veths").line().startswith("links: unshaped veths, CPU 50% idle")
    assert Limits.of_report({"headline_extra": {"busiest_link_load": 1.0, "cpu_idle": 0.2}}).verdict() == "link-bound"


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
