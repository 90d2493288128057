"""A benchmark's JSON under bench/results/ as the tables read it: its `format` checked, the BMv2 build it was
measured on, and whether a run in it was limited by the machine rather than the links."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gradswitch.experiment.bottleneck import judge
from gradswitch.formats import check_format

# bench/results/NAME.json, as bench/common.py's save writes it (the benchmark's figures, when, the toolchain); a file
# written before it carried `format` reads as 1 (gradswitch/formats.py)
BENCHMARK_FORMAT = 1

Json = dict[str, Any]


def load(results: Path, name: str) -> Json:
    """results/NAME (FormatError, naming the file: of another format than BENCHMARK_FORMAT)."""
    path = results / name
    return check_format(json.loads(path.read_text()), path, "benchmark's results", BENCHMARK_FORMAT, missing_is=1)


def build(data: Json) -> str:
    """The BMv2 build a JSON was measured on: with logging macros compiled in or not."""
    tc = data.get("toolchain", {})
    bmv2 = tc.get("bmv2")
    if isinstance(bmv2, dict) and "logging_macros" in bmv2:
        return "logging macros" if bmv2["logging_macros"] else "no logging macros"
    text = f"{tc.get('bmv2_executable', '')} {tc.get('bmv2_build', '')}"  # before `bmv2` was recorded
    if "nolog" in text:
        return "no logging macros"
    return "logging macros" if "with logging macros" in text else "not recorded"


def machine_bound(run: Mapping[str, Any]) -> bool:
    """A run's `machine_bound` as the JSON marks it; for a JSON older than the field, bottleneck.judge's verdict
    from its busiest link's load (against its ideal's where it has one, else 1) and its idle CPU."""
    if "machine_bound" in run:
        return bool(run["machine_bound"])
    return bool(judge(run.get("cpu_idle"), run.get("busiest_link_load"), run.get("ideal_link_load")).machine_bound)
