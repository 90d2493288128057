"""A benchmark's JSON under bench/results/ as the tables read it: its `format` checked, the BMv2 build it was
measured on, and whether a run in it was limited by the machine rather than the links."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gradswitch.experiment.bottleneck import judge
from gradswitch.experiment.spec import Engine
from gradswitch.formats import FormatError, check_format

# bench/results/NAME.json, as bench/common.py's save writes it (the benchmark's figures, when, the toolchain); a file
# written before it carried `format` reads as 1 (gradswitch/formats.py)
BENCHMARK_FORMAT = 1

# `engines`: the engines that ran a benchmark's jobs (Engine's names, sorted): one (each run's spec's engine: the
# default, graph, unless the benchmark names one), both where the benchmark compares them (its rows name each run's),
# none where it runs no job (a switch's, the transport's or the simulator's own figures). A file written before the
# field was recorded reads as ["loop"] (ENGINES_BEFORE): the loop was the default then, and a benchmark that ran the
# graph engine said so in its name (-graph) or its rows.
ENGINES_KEY = "engines"
ENGINES_BEFORE: tuple[Engine, ...] = (Engine.LOOP,)

Json = dict[str, Any]


def load(results: Path, name: str) -> Json:
    """results/NAME (FormatError, naming the file: of another format than BENCHMARK_FORMAT, or with `engines`
    other than a list of engines)."""
    path = results / name
    data = check_format(json.loads(path.read_text()), path, "benchmark's results", BENCHMARK_FORMAT, missing_is=1)
    engines_of(data, path)
    return data


def engines_field(engines: Iterable[Engine]) -> dict[str, list[str]]:
    """The `engines` a benchmark's JSON records: each engine once, sorted."""
    return {ENGINES_KEY: sorted({str(e) for e in engines})}


def engines_of(data: Mapping[str, Any], path: Path | str) -> tuple[Engine, ...]:
    """The engines that ran a benchmark's JSON's jobs (`engines`; ENGINES_BEFORE for a file written before the field);
    FormatError naming the file when it is not a list of Engine's names."""
    if ENGINES_KEY not in data:
        return ENGINES_BEFORE
    raw = data[ENGINES_KEY]
    if not isinstance(raw, list) or not all(isinstance(e, str) and e in Engine.names() for e in raw):
        raise FormatError(f"{path}: `{ENGINES_KEY}` is {raw!r}: a list of engines ({', '.join(Engine.names())}) "
                          "expected; write it again with bench/common.py's save")
    return tuple(Engine(e) for e in raw)


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
