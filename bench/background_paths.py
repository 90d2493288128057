"""Where ECMP put each bulk TCP flow of a run with background traffic, and what each flow carried.

A compare with `background_flows` (bench.crossval's DLCP pair, gradswitch/specs/dlcp-*.toml) runs iperf3 between two
hosts on different leaves beside a ring job. The switches hash each TCP flow's 5-tuple onto a spine, its data one
way and its ACKs the other, and the ring's RoCE flows, in a strict-priority class above TCP where the run says
so, hold one spine in each direction. The testbed's iperf3 takes ephemeral source ports, so its flows land on
new paths every run; the simulator's flows leave from fixed ports (gradswitch.protocol.background_tcp.CLIENT_PORT_BASE
+ f) and take the same paths every run. This reads, for every BMv2 repetition of a compare directory:

- the iperf3 client's streams (source port and the bytes written to each, from run/background.log),
- each stream's data path (sender to receiver) and ACK path (back) by the switches' hash
  (gradswitch/experiment/placed_load.five_tuple_path),
- which of those links the job's ring flows cross too (node k to node k + 1, job1.json),
- the run's goodput, its leaf uplinks' loads and what limited it (results.json),

and the same paths for the simulator's fixed ports. Writes bench/results/background-paths[-TAG].json.

    python -m bench.background_paths runs/bench-crossval/crossval-dlcp [--tag dlcp2.5mbps]
"""

from __future__ import annotations

import argparse
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import NO_ENGINE, Limits, save
from gradswitch.control.routing import Route, compute_routes
from gradswitch.experiment import results_file
from gradswitch.experiment.placed_load import five_tuple_path, flow_path
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.protocol.background_tcp import BACKGROUND_PORT, CLIENT_PORT_BASE
from gradswitch.topology.model import Topology
from gradswitch.workload.job import JobConfig

TCP = 6
CONNECTED = re.compile(r"^\[\s*(\d+)\] local (\S+) port (\d+) connected to (\S+) port (\d+)")
INTERVAL = re.compile(r"^\[\s*(\d+)\]\s+[\d.]+-[\d.]+\s+sec\s+([\d.]+) ([KMG]?)Bytes")
UNIT = {"": 1.0, "K": 1024.0, "M": 1024.0 ** 2, "G": 1024.0 ** 3}  # iperf3's units are powers of 1024


@dataclass(frozen=True)
class Stream:
    """One TCP flow: its source port, its paths, and the links of each it shares with the job's ring."""

    sport: int
    data_path: tuple[str, ...]
    ack_path: tuple[str, ...]
    data_shared: tuple[str, ...]  # links of the data path the ring's flows cross too
    ack_shared: tuple[str, ...]
    written_bytes: float | None  # what iperf3 wrote into it over the run (the testbed only)


@dataclass(frozen=True)
class RunPaths:
    run: str
    repetition: int | None  # None: the simulator's flows (the same every repetition)
    goodput_mbps: float | None
    uplink_loads: dict[str, float]
    streams: tuple[Stream, ...]
    limits: dict[str, Any] | None = None  # what limited the run (its results.json, bench.common.Limits)

    @property
    def clear_streams(self) -> int:
        """Flows whose data and ACK paths both avoid every link of the ring."""
        return sum(1 for s in self.streams if not s.data_shared and not s.ack_shared)


def iperf_streams(log: str) -> tuple[str, str, dict[int, float]]:
    """From an iperf3 client's output: its local and server addresses, and per source port the bytes written
    (the per-interval figures summed)."""
    ports: dict[str, int] = {}
    written: dict[int, float] = {}
    local = server = ""
    for line in log.splitlines():
        if m := CONNECTED.match(line):
            ports[m[1]] = int(m[3])
            local, server = m[2], m[4]
        elif (m := INTERVAL.match(line)) and m[1] in ports:
            written[ports[m[1]]] = written.get(ports[m[1]], 0.0) + float(m[2]) * UNIT[m[3]]
    if not ports:
        raise ValueError("no iperf3 stream connected in the log")
    return local, server, {p: written.get(p, 0.0) for p in ports.values()}


def host_of(topo: Topology, ip: str) -> str:
    return next(h.name for h in topo.hosts if h.ip == ip)


def ring_links(topo: Topology, routes: dict[str, list[Route]], job: JobConfig, seed: int) -> set[str]:
    """The link directions the ring's flows (worker k to worker k + 1) cross."""
    workers = job.workers
    return {link for k, w in enumerate(workers)
            for link in flow_path(topo, routes, w, workers[(k + 1) % len(workers)], job.job_id, seed)}


def streams_of(topo: Topology, routes: dict[str, list[Route]], sender: str, receiver: str,
               ports: dict[int, float | None], ring: set[str], seed: int) -> tuple[Stream, ...]:
    out = []
    for sport, written in sorted(ports.items()):
        data = five_tuple_path(topo, routes, sender, receiver, TCP, sport, BACKGROUND_PORT, seed)
        ack = five_tuple_path(topo, routes, receiver, sender, TCP, BACKGROUND_PORT, sport, seed)
        out.append(Stream(sport, data, ack, tuple(lk for lk in data if lk in ring),
                          tuple(lk for lk in ack if lk in ring), written))
    return tuple(out)


def uplinks(results: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in results.get("link_loads", {}).items()}


def analyse(compare_dir: Path) -> list[RunPaths]:
    """Every BMv2 repetition of every run with background flows under a compare's directory, then per run the
    simulator's flows."""
    out: list[RunPaths] = []
    for run_dir in sorted(p for p in compare_dir.iterdir() if p.is_dir()):
        reps = sorted(run_dir.glob("rep*/run/background.log"))
        if not reps:
            continue
        for log in reps:
            rep_dir = log.parent.parent
            results: dict[str, Any] = dict(results_file.read(rep_dir / "results.json"))
            spec = spec_from_dict(results["spec"])
            topo = spec.topology()
            job = JobConfig.load(rep_dir / "job1.json")
            routes = compute_routes(topo)
            ring = ring_links(topo, routes, job, spec.network.ecmp_seed)
            local, server, written = iperf_streams(log.read_text())
            sender, receiver = host_of(topo, local), host_of(topo, server)
            goodput = results.get("headline_extra", {}).get("background_goodput_mbps")
            out.append(RunPaths(run_dir.name, int(rep_dir.name.removeprefix("rep")), goodput, uplinks(results),
                                streams_of(topo, routes, sender, receiver, dict(written), ring, spec.network.ecmp_seed),
                                Limits.of_report(results).figures()))
            if log == reps[0]:  # the simulator's flows: the same paths in every repetition
                sim_ports: dict[int, float | None] = {CLIENT_PORT_BASE + f: None for f in range(len(written))}
                out.append(RunPaths(f"{run_dir.name} (ns-3's flows)", None, None, {},
                                    streams_of(topo, routes, sender, receiver, sim_ports, ring,
                                               spec.network.ecmp_seed)))
    return out


def line(r: RunPaths) -> str:
    def spine(path: tuple[str, ...]) -> str:
        return next((lk.split("->")[1] for lk in path if lk.split("->")[1].startswith("spine")), "-")

    streams = ", ".join(
        f"{s.sport}: data {spine(s.data_path)}{' (ring)' if s.data_shared else ''} / ack "
        f"{spine(s.ack_path)}{' (ring)' if s.ack_shared else ''}"
        + ("" if s.written_bytes is None else f" {s.written_bytes / 1e6:.2f} MB") for s in r.streams)
    goodput = "" if r.goodput_mbps is None else f" goodput {r.goodput_mbps:.2f} Mb/s,"
    rep = "" if r.repetition is None else f" rep {r.repetition}"
    limited = "" if r.limits is None else f" ({r.limits['limited_by']})"
    return f"{r.run}{rep}:{goodput} {r.clear_streams} clear of {len(r.streams)}; {streams}{limited}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.background_paths", description=__doc__.splitlines()[0])
    parser.add_argument("compare_dir", type=Path, help="a compare's directory, its runs' rep*/ under it")
    parser.add_argument("--tag", default="", help="ends the results' name (background-paths-TAG.json)")
    args = parser.parse_args(argv)
    if not args.compare_dir.is_dir():
        parser.error(f"{args.compare_dir}: not a directory; give a compare's directory (its runs' rep*/ under it)")
    runs = analyse(args.compare_dir)
    if not runs:
        parser.error(f"{args.compare_dir}: no repetition with background flows (rep*/run/background.log)")
    for r in runs:
        print(line(r))
    name = "background-paths" + (f"-{args.tag}" if args.tag else "")
    path = save(name, {"compare_dir": str(args.compare_dir),
                       "runs": [{**asdict(r), "clear_streams": r.clear_streams} for r in runs]},
                engines=NO_ENGINE)  # it reads a compare's runs; their results name their engine
    print(f"written {path}")


if __name__ == "__main__":
    main()
