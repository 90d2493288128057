"""What every benchmark shares: the build it ran on, what limited it, and writing its figures.

Limits and SIMULATED live in the package (gradswitch/experiment/limits.py: its studies record them too); every
benchmark imports them from here. Specs run in turn on one network: gradswitch/experiment/shared_network.py's
run_specs. What a benchmark writes into bench/results/ carries `format` (BENCHMARK_FORMAT, which the tables in
gradswitch/experiment/tables/ check).

Every benchmark prints `Limits.line()` for its measurement: the busiest link's load (near 1:
the links limited it) and the machine's idle CPU (near 0: the machine did), so that a figure
is read as a property of the links only when the links were the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gradswitch.cli.doctor import tool_version
from gradswitch.experiment.cpu_load import CpuSample, cpu_sample, process_cpu_seconds
from gradswitch.experiment.limits import SIMULATED as SIMULATED
from gradswitch.experiment.limits import Limits as Limits
from gradswitch.experiment.spec import Engine, ExperimentSpec
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, engines_field
from gradswitch.roce.qp import Mode

RESULTS = Path(__file__).parent / "results"
# the graph engine reproduces the loop's figures on ns-3 within 1 % (its runs are deterministic: one run per engine
# and point; bench.engines_sim, bench.scaling_graph, bench.scaling_graph_rest judge by it)
ENGINES_TOLERANCE = 0.01


def toolchain(bmv2_log_level: str = "info") -> dict[str, Any]:
    """The BMv2 build (path, version, logging macros or not), the -L its switches ran with, and the
    p4c a figure comes from."""
    from gradswitch.net.bmv2 import resolve_bmv2

    return {"machine": f"{platform.node()} {platform.machine()}, {platform.processor() or 'cpu'}, "
                       f"{os.cpu_count()} CPUs",
            "bmv2": resolve_bmv2().describe(), "bmv2_log_level": bmv2_log_level,
            "p4c-bm2-ss": tool_version("p4c-bm2-ss")}


def bmv2_option(parser: argparse.ArgumentParser) -> None:
    """--bmv2 PATH, as `gradswitch --bmv2`: the simple_switch_grpc every switch of the benchmark runs."""
    parser.add_argument("--bmv2", metavar="PATH", help="the simple_switch_grpc to run (or a directory holding it), "
                        "e.g. a build without logging macros; default: $GRADSWITCH_BMV2, else PATH's")


def use_bmv2(args: argparse.Namespace) -> Path:
    """Apply --bmv2 (a wrong path ends the benchmark with one line naming it); print the build that runs and
    return its simple_switch_grpc."""
    from gradswitch.net.bmv2 import resolve_bmv2, use_bmv2
    from gradswitch.net.bmv2_executable import Bmv2BuildError

    try:
        build = use_bmv2(args.bmv2) if args.bmv2 else resolve_bmv2()
    except Bmv2BuildError as e:
        raise SystemExit(f"error: {e}") from None
    print(f"BMv2: {build.summary()}", flush=True)
    return build.executable


class MachineMeter:
    """The machine's idle CPU, and optionally one process's CPU use, over a with-block."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self.cpu_idle: float | None = None
        self.process_cores: float | None = None  # CPU seconds the process used per second of the measurement
        self.process_seconds: float | None = None  # CPU seconds it used

    def __enter__(self) -> MachineMeter:
        self._start = self._now()
        self._end: tuple[float, CpuSample, float | None] | None = None
        return self

    def _now(self) -> tuple[float, CpuSample, float | None]:
        return time.monotonic(), cpu_sample(), process_cpu_seconds(self.pid) if self.pid else None

    def mark(self) -> None:
        """The measurement ends here unless marked again (e.g. the last time the output grew):
        what follows, such as waiting to be sure it stopped, is left out."""
        self._end = self._now()

    def __exit__(self, *exc: object) -> None:
        (t0, cpu0, proc0), (t1, cpu1, proc1) = self._start, self._end or self._now()
        self.cpu_idle = cpu0.idle_share_until(cpu1)
        if proc0 is not None and proc1 is not None and t1 > t0:
            self.process_seconds = proc1 - proc0
            self.process_cores = self.process_seconds / (t1 - t0)


def save(name: str, figures: dict[str, Any], *, engines: Iterable[Engine], bmv2_log_level: str = "info") -> Path:
    """bench/results/NAME.json: its `format` (BENCHMARK_FORMAT, unless the figures carry their own: a study's
    document), when, the toolchain, the engines that ran its jobs (`engines`: spec_engines of its specs; both where
    it compares them; none where it runs no job: gradswitch/experiment/tables/reading.py), the figures (the tables
    read it: gradswitch/experiment/tables/)."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    document = {"format": BENCHMARK_FORMAT, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                "toolchain": toolchain(bmv2_log_level), **engines_field(engines), **figures}
    path.write_text(json.dumps(document, indent=1) + "\n")
    return path


def spec_engines(specs: Iterable[ExperimentSpec]) -> list[Engine]:
    """The engines the specs' runs ran on (each spec's `engine`: the default, graph, unless it names the loop)."""
    return [s.algorithm.engine for s in specs]


# What a benchmark that runs no job through either engine records (a switch's, the transport's or the
# simulator's own figures)
NO_ENGINE: tuple[Engine, ...] = ()


def collective_args(doc: str, workers: str, bw: float, size: str, iterations: int) -> argparse.ArgumentParser:
    """The options every all-reduce benchmark takes, with its own defaults; add more, then parse."""
    from gradswitch.cli.main import parse_size

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--workers", default=workers, help="worker counts, comma-separated")
    parser.add_argument("--bw", type=float, default=bw, help="every link's rate, Mb/s")
    parser.add_argument("--size", type=parse_size, default=parse_size(size), help="bytes per all-reduce")
    parser.add_argument("--iterations", type=int, default=iterations)
    parser.add_argument("--transport", default=str(Mode.GBN), choices=Mode.names())
    return parser
