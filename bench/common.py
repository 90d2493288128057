"""What every benchmark shares: the build it ran on, and writing its figures."""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

from controller.doctor import tool_version

RESULTS = Path(__file__).parent / "results"


def toolchain() -> dict[str, str]:
    """Versions of the BMv2 / p4c builds a figure comes from."""
    info: dict[str, str] = {"machine": f"{platform.node()} {platform.machine()}, {platform.processor() or 'cpu'}"}
    for tool in ("simple_switch_grpc", "p4c-bm2-ss"):
        info[tool] = tool_version(tool)
    info["bmv2_build"] = ("BMv2 built from source with logging macros enabled (not --disable-logging-macros),"
                          " -O2; switches run with -L info")
    return info


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
