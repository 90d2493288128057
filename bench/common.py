"""What every benchmark shares: the build it ran on, and writing its figures."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from controller.doctor import tool_version

RESULTS = Path(__file__).parent / "results"


def toolchain() -> dict[str, str]:
    """Versions of the BMv2 / p4c builds a figure comes from."""
    from mininet_topos.bmv2 import BMV2_ENV, SIMPLE_SWITCH_GRPC, default_executable

    info: dict[str, str] = {"machine": f"{platform.node()} {platform.machine()}, {platform.processor() or 'cpu'}"}
    for tool in ("simple_switch_grpc", "p4c-bm2-ss"):
        info[tool] = tool_version(tool)
    executable = default_executable()
    info["bmv2_executable"] = shutil.which(executable) or executable
    if executable == SIMPLE_SWITCH_GRPC:
        info["bmv2_build"] = ("BMv2 built from source with logging macros enabled (not --disable-logging-macros),"
                              " -O2; switches run with -L info")
    else:
        info["bmv2_build"] = f"the simple_switch_grpc ${BMV2_ENV} names: {executable}"
    return info


def cpu_jiffies() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine so far (/proc/stat's cpu line; idle includes iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])


class CpuTrace:
    """The machine's idle CPU over time: /proc/stat sampled by a thread, so that the idle share of any
    interval (the iterations of a run, say) can be read afterwards."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.samples: list[tuple[float, int, int]] = []  # (CLOCK_MONOTONIC, idle, total)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        idle, total = cpu_jiffies()
        self.samples.append((time.monotonic(), idle, total))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> CpuTrace:
        self._sample()
        self._thread = threading.Thread(target=self._run, name="cpu-trace", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> float | None:
        """Stop sampling; the idle share over the whole trace."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return self.idle_between(self.samples[0][0], self.samples[-1][0])

    def idle_between(self, start: float, end: float) -> float | None:
        """Idle share of the machine's CPU between two CLOCK_MONOTONIC times (the samples just
        around them), None when fewer than two samples cover the interval."""
        inside = [s for s in self.samples if start - self.interval <= s[0] <= end + self.interval]
        if len(inside) < 2 or inside[-1][2] == inside[0][2]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][2] - inside[0][2])


def select_bmv2(path: str | None) -> None:
    """--bmv2 PATH: every switch of this process (and of the Mininet nodes it starts) runs that build."""
    from mininet_topos.bmv2 import BMV2_ENV, default_executable

    if path:
        os.environ[BMV2_ENV] = path
        if shutil.which(default_executable()) is None:
            raise SystemExit(f"--bmv2 {path}: no simple_switch_grpc there")


def save(name: str, figures: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "toolchain": toolchain(), **figures},
                               indent=1) + "\n")
    return path


def run_specs(specs: list[Any], out_dir: Path) -> dict[str, dict[str, Any]]:
    """Run experiment specs that fit one topology on one network, in turn; their reports by name.

    One network for all of them: the same switches, links and hosts, so ratios between the
    runs compare the algorithms, not two bring-ups.
    """
    from controller.experiment.placement import topology_for
    from controller.experiment.runner import run_on
    from controller.testbed import Testbed
    from mininet_topos.network import NetworkOptions

    biggest = max(specs, key=lambda s: s.hosts_needed())
    reports: dict[str, dict[str, Any]] = {}
    with Testbed(topology_for(biggest), NetworkOptions(run_dir=out_dir / "net")) as net:
        for i, spec in enumerate(specs, start=1):
            print(f"  [{i}/{len(specs)}] {spec.label} ...", flush=True)
            report = run_on(net, spec, out_dir / spec.label, progress=False)
            if not report["ok"]:
                raise RuntimeError(f"{spec.label} failed: {report['errors']}")
            reports[spec.label] = report
    return reports


def collective_args(doc: str, workers: str, bw: float, size: str, iterations: int) -> argparse.ArgumentParser:
    """The options every all-reduce benchmark takes, with its own defaults; add more, then parse."""
    from controller.cli import parse_size

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--workers", default=workers, help="worker counts, comma-separated")
    parser.add_argument("--bw", type=float, default=bw, help="every link's rate, Mb/s")
    parser.add_argument("--size", type=parse_size, default=parse_size(size), help="bytes per all-reduce")
    parser.add_argument("--iterations", type=int, default=iterations)
    parser.add_argument("--transport", default="gbn", choices=("gbn", "sr"))
    return parser
