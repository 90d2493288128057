"""NetReduce reduce-scatter and all-gather against the hosts' ring, on the simulator (docs/netreduce.md
"Reduce-scatter and all-gather", "On the simulator").

One world collective per run on the graph engine (gradswitch.sim.graph_run.run_graph), every rank on a host of its own:
reduce-scatter of an S-byte buffer, all-gather of S/N-byte shards (output S), through the switches (the graph's
switch job with the job's 4 credits, and with 8, the P4 program's most) and on ring; all-gather through the
switches twice: as the hosts run it on BMv2 (every rank sends the other ranks' messages as zeros, whole), and the
what-if of placeholders on switches that could grow them into the owner's values (SimSettings
gather_placeholders and grow_placeholders: `grown`). On two fabrics:

- rack: N hosts on one switch;
- oversubscribed leaf-spine: two leaves of N/2 hosts and one spine, its links at half the hosts' rate (N:1 at a
  leaf), so the spine's links, not the hosts', bound every operation.

For N = 4 and 8, S = 256 KiB, 4 MiB and 64 MiB, hosts at 10 and 100 Gb/s: per run the slowest rank's time, its link-rate
bound (the in-network one for NetReduce: docs/netreduce.md's table, on the leaf-spine the spine link's bytes), the
bytes the spine's links carried, every output's check, the busiest link's load (Limits: a simulated figure is never
machine-bound), and per case NetReduce's time over the ring's.

    python -m bench.sim_netreduce_rs_ag [--ranks 4 8] [--sizes-kib 256 4096 65536] [--gbps 10 100]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import Limits, save
from gradswitch.experiment.report import busiest_link_load
from gradswitch.experiment.simulated import link_usage
from gradswitch.experiment.spec import Engine
from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.sim.graph_run import GraphSimResult, GraphTransport, job_config, placement, run_graph
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.generators import leafspine, rack
from gradswitch.topology.model import Topology
from gradswitch.version import code_version
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, RankGraph, world_group

K = CollectiveKind
KINDS = (K.REDUCE_SCATTER, K.ALL_GATHER)
FABRICS = ("rack", "oversubscribed")
SWITCH_JOB = {K.REDUCE_SCATTER: 3, K.ALL_GATHER: 4}  # graph_job's ids (the graph's job 1 + 2, + 3)
ALGOS = {"netreduce": 4, "netreduce-8": 8, "ring": None}  # credits of the switch job (ring: none)
GROWN = {"grown": 4, "grown-8": 8}  # all-gather's what-if runs: switches that can grow a placeholder


def topology(fabric: str, ranks: int, mbps: float) -> Topology:
    if fabric == "rack":
        return rack(ranks, mbps)
    return leafspine(2, 1, ranks // 2, mbps, mbps / 2)


def graph(kind: CollectiveKind, ranks: int, size: int) -> JobGraph:
    nbytes = size // ranks if kind == K.ALL_GATHER else size
    nodes = tuple(RankGraph(r, (CollectiveNode(0, str(kind), kind, "world", nbytes),)) for r in range(ranks))
    return JobGraph(f"{kind}", nodes, (world_group(ranks),))


def bound_s(kind: CollectiveKind, algo: str, fabric: str, ranks: int, size: int, mbps: float) -> float:
    """The operation's link-rate time: on the rack its hosts' links (ring: (N-1)/N S/B for both; NetReduce:
    reduce-scatter S/B, all-gather (N-1) s/B); on the leaf-spine the spine's links at B/2, which carry
    2 (N-1)/N S for the ring's two crossings and, each way, S for NetReduce (a leaf's partials up and results
    down stay whole)."""
    rate = mbps * 1e6 / 8
    if fabric == "oversubscribed":
        return (size if algo != "ring" else (ranks - 1) / ranks * size) / (rate / 2)
    if algo != "ring" and kind == K.REDUCE_SCATTER:
        return size / rate
    return (ranks - 1) / ranks * size / rate


def spine_bytes(result: GraphSimResult) -> int | None:
    """What the spine's links carried, both ways (None: no spine)."""
    spine = result.sim.raw["switches"].get("spine1")
    return None if spine is None else sum(p["rx_bytes"] + p["tx_bytes"] for p in spine["ports"].values())


def one_run(kind: CollectiveKind, algo: str, fabric: str, ranks: int, size: int, mbps: float, out: Path
            ) -> dict[str, Any]:
    topo = topology(fabric, ranks, mbps)
    g = graph(kind, ranks, size)
    transport = GraphTransport(mtu=NETREDUCE_MTU, window=64)
    job = job_config(g, placement(g, topo), topo, transport)
    credits = (ALGOS | GROWN)[algo]
    grown = algo in GROWN
    result = run_graph(g, topo, SimSettings(gather_placeholders=grown, grow_placeholders=grown), out_dir=out,
                       job=replace(job, credits=credits or job.credits),
                       in_network={kind: SWITCH_JOB[kind]} if credits else None)
    time_s = max(n.end_s - n.start_s for n in result.run.nodes)
    bound = bound_s(kind, algo, fabric, ranks, size, mbps)
    return {"collective": str(kind), "algo": algo, "fabric": fabric, "ranks": ranks, "size_bytes": size,
            "gbps": mbps / 1000, "credits": credits, "grow_placeholders": grown,
            "time_s": time_s, "bound_s": bound, "over_bound": time_s / bound,
            "exact": result.ok(), "check": str(result.check), "spine_bytes": spine_bytes(result),
            "busiest_link_load": busiest_link_load(link_usage(topo, result.sim))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--sizes-kib", type=int, nargs="+", default=[256, 4096, 65536])
    parser.add_argument("--gbps", type=float, nargs="+", default=[10, 100])
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gs-nr-rs-ag-") as tmp:
        for fabric, ranks, kib, gbps, kind in itertools.product(FABRICS, args.ranks, args.sizes_kib, args.gbps,
                                                                KINDS):
            algos = [*ALGOS, *(GROWN if kind == K.ALL_GATHER else ())]
            case = {algo: one_run(kind, algo, fabric, ranks, kib << 10, gbps * 1000,
                                  Path(tmp) / f"{fabric}-{ranks}-{kib}-{gbps:g}-{kind}-{algo}") for algo in algos}
            runs.extend(case.values())
            ring = case["ring"]["time_s"]
            row = {"collective": str(kind), "fabric": fabric, "ranks": ranks, "size_kib": kib, "gbps": gbps,
                   "netreduce_over_ring": case["netreduce"]["time_s"] / ring,
                   "netreduce_8_over_ring": case["netreduce-8"]["time_s"] / ring,
                   **({"grown_over_ring": case["grown"]["time_s"] / ring,
                       "grown_8_over_ring": case["grown-8"]["time_s"] / ring} if "grown" in case else {}),
                   "all_exact": all(r["exact"] for r in case.values())}
            ratios.append(row)
            print(f"{fabric:14s} N={ranks} {kib:5d} KiB {gbps:5g} Gb/s {kind!s:15s} NetReduce/ring "
                  f"{row['netreduce_over_ring']:.3f} (8 credits {row['netreduce_8_over_ring']:.3f}); over bound: "
                  + ", ".join(f"{a} {r['over_bound']:.3f}" for a, r in case.items())
                  + ("" if row["all_exact"] else "  NOT EXACT"))
    figures = Limits.simulated_figures(max(r["busiest_link_load"] for r in runs))
    path = save("sim-netreduce-rs-ag", {"code_version": code_version(), "ratios": ratios, "runs": runs,
                                        "all_exact": all(r["all_exact"] for r in ratios), **figures},
                engines=[Engine.GRAPH])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
