"""Table entries the controller writes per second to one BMv2 switch over P4Runtime.

One simple_switch_grpc (no ports, `-L off`: the switch logs nothing) running gradswitch.p4 with
its pipeline pushed by a `SwitchSession`, the controller's own client. Each repetition inserts
N distinct /32 routes into the l3 `ipv4_routes` table through `SwitchSession.insert`, the path
every control of the controller takes (entry dataclass -> P4Info lookups -> protobuf -> gRPC
Write): once in batches of --batch updates per Write, once one update per Write, deleting them
in between (not timed). Reports the median and [min, max] over the repetitions of entries per
second, and the CPU this process (the client) and the switch process used per second of the
measurement, so that the figure says which side limited it, and, apart, the client CPU it takes to
encode an entry into its protobuf message (no switch, no gRPC). Works on either P4Runtime stack the
project has been built on; records protobuf's version and backend (upb, cpp or python).

Each run is kept under its --tag (`before`, `after`) in bench/results/p4runtime-writes.json;
when both are there, the ratio after/before is computed, stored and printed.

    python -m bench.p4runtime_writes --tag after [--entries 1000] [--batch 100] [--repetitions 5] [--bmv2 PATH]
                                     [--results FILE]

To measure the stack before a change, run this module from a checkout of the earlier commit
in a virtual environment holding the earlier dependencies, with --tag before --results FILE
pointing at this checkout's file, e.g. both in turn on the same machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from google.protobuf.internal import api_implementation

from bench.common import NO_ENGINE, RESULTS, MachineMeter, bmv2_option, toolchain, use_bmv2
from gradswitch.control.p4rt import P4Info, SwitchAddress, SwitchSession, TableEntry
from gradswitch.control.p4rt.entities import encode_entity
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, engines_field
from gradswitch.formats import check_format
from gradswitch.net.bmv2 import Bmv2Config, Bmv2Process
from gradswitch.net.local_ports import free_ports

NAME = "p4runtime-writes"
TABLE = "ipv4_routes"
TABLE_SIZE = 1024  # IPV4_ROUTES_SIZE (gradswitch/p4src/include/config.p4): N must fit
STACK_PACKAGES = ("protobuf", "grpcio", "p4runtime", "p4runtime-shell", "googleapis-common-protos")


@dataclass(frozen=True)
class Rate:
    """Entries per second over the repetitions, and the CPU each side used while writing."""

    entries_per_s_median: float
    entries_per_s_min: float
    entries_per_s_max: float
    client_cores: float  # CPU seconds this process used per second of writing (median over repetitions)
    switch_cores: float  # the same for the simple_switch_grpc process
    cpu_idle: float  # the machine's idle share during the writes (median)
    client_cpu_us_per_entry: float  # client CPU per entry written (median): what a busy machine changes least
    repetitions: int

    def line(self) -> str:
        return (f"{self.entries_per_s_median:,.0f} entries/s [{self.entries_per_s_min:,.0f}, "
                f"{self.entries_per_s_max:,.0f}], client {self.client_cores:.2f} cores, "
                f"switch {self.switch_cores:.2f} cores, client CPU {self.client_cpu_us_per_entry:.0f} us/entry, "
                f"machine {self.cpu_idle:.0%} idle")


def routes(count: int) -> list[TableEntry]:
    """`count` distinct /32 routes (10.200.x.y), each to its own next hop."""
    return [TableEntry(TABLE, {"dst_addr": f"10.200.{i >> 8}.{i & 0xFF}/32"}, "set_next_hop",
                       {"port": 1 + i % 8, "dst_mac": 0x020000000000 + i}) for i in range(count)]


def stack() -> dict[str, str]:
    """Versions of the P4Runtime stack installed here, and protobuf's backend."""
    found = {"protobuf_backend": api_implementation.Type()}
    for name in STACK_PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found


def measure(session: SwitchSession, switch_pid: int, entries: list[TableEntry], per_write: int,
            repetitions: int) -> Rate:
    """Insert `entries` `per_write` to a Write, `repetitions` times (deleting them between)."""
    rates: list[float] = []
    client: list[float] = []
    switch: list[float] = []
    idle: list[float] = []
    cpu_per_entry: list[float] = []
    batches = [entries[i:i + per_write] for i in range(0, len(entries), per_write)]
    for _ in range(repetitions):
        with MachineMeter(switch_pid) as meter, _ClientMeter() as own:
            start = time.perf_counter()
            for batch in batches:
                session.insert(batch)
            elapsed = time.perf_counter() - start
        rates.append(len(entries) / elapsed)
        client.append(own.cores)
        cpu_per_entry.append(own.seconds / len(entries) * 1e6)
        switch.append(meter.process_cores or 0.0)
        idle.append(meter.cpu_idle or 0.0)
        remaining = session.read_table(TABLE)
        if len(remaining) != len(entries):
            raise RuntimeError(f"{len(entries)} entries written but {len(remaining)} read back")
        for i in range(0, len(entries), 256):
            session.delete(entries[i:i + 256])
    return Rate(statistics.median(rates), min(rates), max(rates), statistics.median(client),
                statistics.median(switch), statistics.median(idle), statistics.median(cpu_per_entry), repetitions)


class _ClientMeter:
    """CPU seconds this process used per wall second over a with-block."""

    def __enter__(self) -> _ClientMeter:
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        self.cores = self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t0
        self.seconds = time.process_time() - self._c0
        self.cores = self.seconds / wall if wall > 0 else 0.0


def encode_cost(entries: list[TableEntry], repetitions: int) -> float:
    """CPU microseconds per entry to turn entries into P4Runtime Entity messages, no switch involved
    (median over repetitions): the client's own share, which other processes on the machine change least."""
    p4info = P4Info.from_file()
    costs = []
    for _ in range(repetitions):
        start = time.process_time()
        for entry in entries:
            encode_entity(p4info, entry)
        costs.append((time.process_time() - start) / len(entries) * 1e6)
    return statistics.median(costs)


def run(entries: int, batch: int, repetitions: int, executable: str) -> dict[str, Any]:
    """Start one switch, push the pipeline, measure batched and one-per-Write inserts; the figures."""
    grpc_port, thrift_port = free_ports(2)
    with tempfile.TemporaryDirectory(prefix="gradswitch-p4rt-bench-") as tmp:
        process = Bmv2Process(Bmv2Config(name="bench", device_id=0, grpc_port=grpc_port, thrift_port=thrift_port,
                                         ports={}, run_dir=Path(tmp), log_level="off", executable=executable))
        process.start()
        try:
            assert process.pid is not None
            with SwitchSession(SwitchAddress("bench", 0, grpc_port, thrift_port), P4Info.from_file()) as session:
                session.push_pipeline(force=True)
                todo = routes(entries)
                batched = measure(session, process.pid, todo, batch, repetitions)
                print(f"  {batch} per Write: {batched.line()}", flush=True)
                single = measure(session, process.pid, todo, 1, repetitions)
                print(f"  1 per Write:   {single.line()}", flush=True)
        finally:
            process.stop()
    encode = encode_cost(todo, repetitions)
    print(f"  encoding alone: {encode:.0f} us/entry of client CPU", flush=True)
    return {"stack": stack(), "entries": entries, "batch": batch, "encode_us_per_entry": encode,
            "batched": asdict(batched), "one_per_write": asdict(single)}


def bottleneck(rate: dict[str, Any], encode_us: float) -> str:
    """Which side limited a rate, from the CPU each used (one Python thread: at most ~1 core), and how much
    of the client's CPU per entry encoding the entry took."""
    client, switch, idle = rate["client_cores"], rate["switch_cores"], rate["cpu_idle"]
    share = encode_us / rate["client_cpu_us_per_entry"]
    side = (f"the client (Python: encoding the entries into protobuf messages took {share:.0%} of its CPU, "
            "gRPC and the rest the remainder)") if client >= switch else "the switch"
    shared = (f"; the machine was {idle:.0%} idle, so other processes took CPU from both: compare the client's "
              "CPU per entry rather than the rates") if idle < 0.1 else ""
    return f"{side}: client {client:.2f} cores, switch {switch:.2f} cores{shared}"


def ratios(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """after / before of each rate's median, and before / after of the client's CPU per entry (writing, and
    encoding alone)."""
    out = {}
    for kind in ("batched", "one_per_write"):
        out[kind] = after[kind]["entries_per_s_median"] / before[kind]["entries_per_s_median"]
        out[f"{kind}_client_cpu"] = before[kind]["client_cpu_us_per_entry"] / after[kind]["client_cpu_us_per_entry"]
    out["encode_cpu"] = before["encode_us_per_entry"] / after["encode_us_per_entry"]
    return out


def store(tag: str, figures: dict[str, Any], path: Path = RESULTS / f"{NAME}.json") -> dict[str, Any]:
    """Keep this run under its tag beside the others; the ratio once `before` and `after` are both there."""
    doc: dict[str, Any] = (check_format(json.loads(path.read_text()), path, "benchmark's results", BENCHMARK_FORMAT,
                                        missing_is=1) if path.exists() else {})
    runs = doc.get("runs", {})
    runs[tag] = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "toolchain": toolchain("off"), **figures,
                 "bottleneck": {kind: bottleneck(figures[kind], figures["encode_us_per_entry"])
                                for kind in ("batched", "one_per_write")}}
    doc = {"format": BENCHMARK_FORMAT, **engines_field(NO_ENGINE),
           "what": __doc__.splitlines()[0] if __doc__ else NAME, "runs": runs}
    if "before" in runs and "after" in runs:
        doc["ratio_after_before"] = ratios(runs["before"], runs["after"])
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def main(argv: Sequence[str] | None = None, report: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or NAME).splitlines()[0])
    parser.add_argument("--tag", default="after", help="the name this run is kept under (before, after)")
    parser.add_argument("--entries", type=int, default=1000, help=f"routes per repetition (at most {TABLE_SIZE})")
    parser.add_argument("--batch", type=int, default=100, help="updates per Write in the batched run")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--results", type=Path, default=RESULTS / f"{NAME}.json",
                        help="the JSON file runs are kept in (default: %(default)s)")
    bmv2_option(parser)
    args = parser.parse_args(argv)
    if not 1 <= args.entries <= TABLE_SIZE:
        parser.error(f"--entries {args.entries}: the table holds 1..{TABLE_SIZE} entries; give a number in that range")
    if args.batch < 1 or args.repetitions < 1:
        parser.error("--batch and --repetitions must be at least 1")
    executable = str(use_bmv2(args))
    report(f"P4Runtime stack: {stack()}")
    doc = store(args.tag, run(args.entries, args.batch, args.repetitions, executable), args.results)
    if "ratio_after_before" in doc:
        r = doc["ratio_after_before"]
        report(f"after/before: batched x{r['batched']:.2f}, one per Write x{r['one_per_write']:.2f} entries/s; "
               f"client CPU per entry / {r['batched_client_cpu']:.2f} (batched), "
               f"/ {r['one_per_write_client_cpu']:.2f} (one per Write); encoding alone / {r['encode_cpu']:.2f}")


if __name__ == "__main__":
    main()
