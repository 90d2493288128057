"""Where the ns-3 simulator's wall time goes: perf's samples by what each function does, and each event list.

`perf record` on bench.ns3_speed's scenarios, each function's own time grouped by what it
does, and the wall time of each of ns-3's event lists (schedulers).

Each run is the scenario's spec (bench.ns3_speed scenario_spec) on the simulator's graph engine: the configuration
simulate_spec would hand the simulator (gradswitch/experiment/simulated_graph.py spec_sim_config: the plan, the job
as an execution graph), run here by gradswitch-sim itself under perf; the graph built by the driver is not profiled.

For every run of the chosen scenarios (bench.ns3_speed's, default `speed` and `synthetic-256`) the simulator
runs once under `perf record -F FREQUENCY` (a timer-driven sample of the instruction pointer: this machine's
VM has no hardware counters) and `perf report` gives each function's samples. Functions are grouped by
`CATEGORIES` (first match wins; the rest is `other`). Then the `speed` scenario runs once per scheduler
(`scheduler` in the simulator's configuration, docs/simulator.md), without perf, for its wall time.

    python -m bench.ns3_profile [--only speed,synthetic-256] [--frequency 499] [--binary PATH] [--out FILE]

Needs `perf` (Debian's linux-perf) and the built simulator (`make sim`). Writes bench/results/ns3-profile.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.ns3_speed import RESULTS, SCENARIOS, scenario_names, scenario_spec
from gradswitch.experiment.simulated_graph import spec_sim_config
from gradswitch.experiment.spec import Engine, ExperimentError
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, engines_field
from gradswitch.sim.build import status
from gradswitch.sim.sim_settings import EventList

# (category, pattern on "dso<TAB>symbol"), in order: the first that matches a function names its category.
GS = r"ns3::gs::(?:\(anonymous namespace\)::)?"  # the models' namespace (some classes are file-local)
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("ns-3 event list", r"ns3::(\w*Scheduler|DefaultSimulatorImpl|Simulator|EventImpl|EventId|MakeEvent)\b|"
                        + GS + r"(CallEvent|Pooled)\b"),
    ("ns-3 packets and headers", r"ns3::(Packet|Buffer|PacketMetadata|ByteTagList|PacketTagList|Header|Chunk|Tag)"
                                 r"\w*\b|" + GS + r"GsHeader\b"),
    ("malloc and free", r"\b(malloc|_int_malloc|_int_free|free|cfree|tcache\w*|operator (new|delete)\w*|"
                        r"malloc_consolidate|unlink_chunk)\b"),
    ("memory copy", r"\b_*(memmove|memcpy|memset|memcmp)\w*"),
    ("ns-3 logging checks", r"ns3::LogComponent::"),
    ("switches: route, hash, NetReduce", GS + r"(GsSwitch|NrSwitchJob|ForwardingTable|AggregationTree)\b"),
    ("links and ports: queues, transmission", GS + r"(GsDevice|GsChannel|GsRemoteChannel|PacketEvent)\b"),
    ("hosts: NIC and RC transport", GS + r"(GsHost|RcQp|QpHost|QpUser|SendTimes|RingBuffer|HostEndpoint)\b"),
    ("algorithms and training", GS + r"(Ring|PsWorker|PsServer|KeyPlan|NetReduceWorker|Write|Collective|"
                                r"TrainingScheduler|JobNode|Generator|IterationCheck|MsgData|"
                                r"Graph\w*|RingPart|KeySums|Owned\w*|Piece)\b"),
    ("background TCP", r"ns3::gs::TcpBackground\b"),
    ("ns-3's other code", r"^libns3"),
)
SCHEDULERS = (EventList.PRIORITY_QUEUE, EventList.MAP, EventList.HEAP, EventList.CALENDAR)
TOP = 15  # functions listed one by one


def category(dso: str, symbol: str) -> str:
    """The category of one function of a perf report (`other` when no pattern matches)."""
    text = f"{dso}\t{symbol}"
    for name, pattern in CATEGORIES:
        if re.search(pattern, text):
            return name
    return "other"


@dataclass(frozen=True)
class Function:
    dso: str
    symbol: str
    samples: int
    share: float
    category: str


def parse_report(text: str) -> list[Function]:
    """`perf report --no-children -F sample,dso,sym -t TAB -q`'s lines, most samples first."""
    rows: list[tuple[str, str, int]] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("\t")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        samples, dso, symbol = int(parts[0]), parts[1], re.sub(r"^\[[.k]\]\s*", "", parts[2])
        rows.append((dso, symbol, samples))
    total = sum(s for _, _, s in rows)
    out = [Function(d, sym, s, s / total if total else 0.0, category(d, sym)) for d, sym, s in rows]
    return sorted(out, key=lambda f: -f.samples)


@dataclass(frozen=True)
class Profile:
    scenario: str
    algo: str
    workers: int
    wall_s: float  # under perf
    samples: int
    categories: dict[str, float]  # share of the samples, largest first
    top: list[Function]


def config_file(directory: Path, scenario: str, index: int, scheduler: EventList | None = None) -> Path:
    """The simulator's configuration of one run of a scenario on the graph engine (on `scheduler`'s event list),
    written in directory; SystemExit (one line) when the spec cannot run."""
    algo, n, workload, size, iterations = SCENARIOS[scenario][index]
    name = f"{scenario}-{index}-{scheduler or 'default'}"
    try:
        config = spec_sim_config(scenario_spec(scenario, algo, n, workload, size, iterations), directory / name,
                                 scheduler)
    except ExperimentError as e:
        raise SystemExit(f"error: {e}") from None
    path = directory / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


def timed(command: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def profile(binary: Path, scenario: str, index: int, frequency: int, directory: Path) -> Profile:
    algo, n, *_ = SCENARIOS[scenario][index]
    cfg = config_file(directory, scenario, index)
    data = directory / f"{scenario}-{index}.perf"
    wall = timed(["perf", "record", "-q", "-F", str(frequency), "-o", str(data), "--", str(binary), "--config",
                  str(cfg), "--out", str(directory / "out.json")])
    report = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "-F", "sample,dso,sym", "--stdio",
                             "-q", "-t", "\t"], check=True, capture_output=True, text=True).stdout
    functions = parse_report(report)
    shares: dict[str, float] = {}
    for f in functions:
        shares[f.category] = shares.get(f.category, 0.0) + f.share
    return Profile(scenario, str(algo), n, wall, sum(f.samples for f in functions),
                   dict(sorted(shares.items(), key=lambda kv: -kv[1])), functions[:TOP])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ns3_profile", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="speed,synthetic-256", help=f"scenarios: {', '.join(SCENARIOS)}")
    parser.add_argument("--frequency", type=int, default=499, help="perf samples per second (default 499)")
    parser.add_argument("--binary", type=Path, help="the gradswitch-sim to profile (default: `make sim`'s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "ns3-profile.json", help="where the JSON goes")
    args = parser.parse_args()
    names = scenario_names(args.only)
    if shutil.which("perf") is None:
        raise SystemExit("error: perf is not on PATH: install Debian's linux-perf (apt install linux-perf)")
    if args.binary is None:
        missing = status().missing()
        if missing:
            raise SystemExit(f"error: {missing}")
    binary = Path(args.binary or status().binary)
    if not binary.is_file():
        raise SystemExit(f"error: --binary {binary}: no such file; give a built gradswitch-sim")
    profiles: list[Profile] = []
    schedulers: dict[str, float] = {}  # by EventList's name
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for name in names:
            for index, (algo, n, *_) in enumerate(SCENARIOS[name]):
                print(f"{name}: {algo} on {n} workers under perf ...", flush=True)
                profiles.append(profile(binary, name, index, args.frequency, directory))
                p = profiles[-1]
                print(f"  {p.wall_s:.1f} s, {p.samples} samples: " +
                      ", ".join(f"{c} {s:.0%}" for c, s in list(p.categories.items())[:5]), flush=True)
        for scheduler in SCHEDULERS:
            cfg = config_file(directory, "speed", 0, scheduler)
            wall = timed([str(binary), "--config", str(cfg), "--out", str(directory / "out.json")])
            schedulers[str(scheduler)] = wall
            print(f"scheduler {scheduler!s:<15} speed scenario {wall:.2f} s wall", flush=True)
    perf_version = subprocess.run(["perf", "--version"], capture_output=True, text=True).stdout.strip()
    document: dict[str, Any] = {
        "format": BENCHMARK_FORMAT, **engines_field([Engine.GRAPH]),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "simulator": str(binary),
        "perf": perf_version,
        "frequency_hz": args.frequency, "categories": [name for name, _ in CATEGORIES] + ["other"],
        "profiles": [asdict(p) for p in profiles], "scheduler_wall_s": schedulers,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
