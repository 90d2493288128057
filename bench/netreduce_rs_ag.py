"""NetReduce reduce-scatter and all-gather on BMv2 against their link-rate bounds and the ring.

For each collective (all-gather twice: the other ranks' messages sent as zeros, whole, and as placeholders),
N workers on a rack (one switch) or a 2x2 leaf-spine run `--iterations` operations of
`--size` bytes per rank (reduce-scatter: the rank's buffer S; all-gather: its shard s) through the switches
(gradswitch/hosts/netreduce_rs_ag_check.py, every output checked), every link shaped to --bw. An operation's time is
from the first rank's start to the last rank's end; the median (and the operations' [min-max]) is printed next to
two link-rate bounds: the
ring's (gradswitch/workload/collective_bounds.py: (N-1)/N S/B for reduce-scatter, (N-1) s/B for all-gather) and the
in-network one (S/B: every rank's whole buffer, or for all-gather the whole output, reaches the switch; with
placeholders (N-1) s/B, each rank receiving every other shard), with the machine's idle CPU during the runs (near 0: the
run was machine-bound, its time says nothing about the network). The same collectives run by the hosts' ring
(gradswitch/hosts/collectives, through the graph engine: gradswitch.experiment.graph_run) on the same topology and links
give the ring's median next to it. Writes bench/results/netreduce-rs-ag.json. Needs root, BMv2 and Mininet.

    python -m bench.netreduce_rs_ag [--workers 4] [--topos rack] [--bw 4] [--size 128KiB] [--iterations 5]
                                    [--spines 2] [--tag NAME]
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Limits, MachineMeter, collective_args, save
from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.graph_run import graph_spec
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import Engine, Topo, spec_from_dict
from gradswitch.experiment.supervisor import Progress, run_nodes
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.version import code_version
from gradswitch.workload.collective_bounds import collective_bound_s
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, RankGraph, world_group
from gradswitch.workload.job import JobConfig
from gradswitch.workload.worker_result import WorkerResult

KINDS = {"reduce-scatter": CollectiveKind.REDUCE_SCATTER, "all-gather": CollectiveKind.ALL_GATHER,
         "all-gather-placeholders": CollectiveKind.ALL_GATHER}  # (gradswitch/hosts/netreduce_rs_ag_check.py's names)


def run_collective(work_dir: Path, topo_name: str, kind: str, loss_pct: float, workers: int = 4,
                   size_bytes: int = 64 << 10, iterations: int = 4, bw_mbps: float = 4.0, credits: int = 4,
                   spines: int = 2
                   ) -> tuple[JobConfig, dict[int, WorkerResult], dict[str, dict[str, int]], float | None]:
    """Job 1 of `workers` runs `iterations` of `kind` on a fresh network (placed as an experiment places a
    NetReduce job) with loss_pct on every worker link; the job, its nodes' results, its NetReduce events per
    switch, and the machine's idle CPU while the nodes ran."""
    spec = spec_from_dict({"algo": "netreduce", "workers": workers, "size_bytes": size_bytes,
                           "iterations": iterations, "bw_mbps": bw_mbps, "credits": credits, "topo": topo_name,
                           "loss_pct": loss_pct, "spines": spines})
    topo = topology_for(spec)
    cfg = plan_run(spec, topo).first
    hosts = [n.host for n in cfg.workers]
    config_dir, run_dir = work_dir / "config", work_dir / "run"
    config_dir.mkdir(parents=True)
    run_dir.mkdir()
    cfg.save(config_dir / "job1.json")
    (config_dir / "job1.collective").write_text(kind)
    with Testbed(topo, NetworkOptions(run_dir=work_dir / "net")) as net:
        if net.control is None:
            raise RuntimeError("the network has no controller")
        jobs = net.control.netreduce
        jobs.create(1, hosts, cfg.credits, scatter=kind == "reduce-scatter", gather=kind.startswith("all-gather"))
        for h in hosts:
            switch, port = topo.attachment(h)
            net.fabric.set_port_loss(switch, port, loss_pct / 100.0, "both", CONFIG.IP_PROTO_UDP,
                                     CONFIG.ROCE_V2_UDP_PORT)
        with MachineMeter() as meter:
            results = run_nodes(net, [cfg], config_dir, run_dir, Progress(cfg.iterations, kind, enabled=False),
                                module="gradswitch.hosts.netreduce_rs_ag_check")[1]
        events = {sw: a.events for sw, a in jobs.status(1).switches.items()}
        jobs.teardown(1)
    return cfg, results, events, meter.cpu_idle


def op_times(results: dict[int, WorkerResult]) -> list[float]:
    """Each operation's time: the first rank's start to the last rank's end."""
    count = min(len(r["iterations"]) for r in results.values())
    return [max(r["iterations"][i]["end"] for r in results.values())
            - min(r["iterations"][i]["start"] for r in results.values()) for i in range(count)]


def ring_times(work_dir: Path, topo_name: str, kind: CollectiveKind, workers: int, size_bytes: int,
               iterations: int, bw_mbps: float, spines: int = 2) -> tuple[list[float], float | None]:
    """`iterations` of `kind` (graph sizes: all-gather's is the shard) one after the other on every rank, run by
    the hosts' ring on a fresh network of the topology: each one's time, and the run's idle CPU."""
    group = world_group(workers)
    ranks = tuple(RankGraph(r, tuple(CollectiveNode(i, f"{kind.value}.{i}", kind, group.name, size_bytes,
                                                     (i - 1,) if i else ()) for i in range(iterations)))
                  for r in range(workers))
    graph = JobGraph(f"ring-{kind.value}-n{workers}", ranks, (group,))
    spec = graph_spec(graph, bw_mbps=bw_mbps).but(topo=Topo(topo_name), spines=spines)
    report = run_graph_spec(spec, graph, work_dir)
    if not report.checked:
        raise RuntimeError(f"the ring's {kind.value} on {topo_name} failed its check: {report.errors}")
    return [c.time_s for c in report.collectives], report.cpu_idle


def in_network_bound_s(name: str, ranks: int, nbytes: float, rate: float) -> float:
    """Reduce-scatter: every rank's whole buffer reaches the switch (S/B); all-gather: every rank sends the
    output S (the other ranks' messages as zeros, whole), or with placeholders (N-1) s/B, the ring's, which only
    a switch that could grow them would reach."""
    kind = KINDS[name]
    return collective_bound_s(kind, ranks, nbytes, rate, in_network=name != "all-gather-placeholders")


def main() -> None:
    parser = collective_args(__doc__, workers="4", bw=4.0, size="128KiB", iterations=5)
    parser.add_argument("--topos", default="rack")
    parser.add_argument("--spines", type=int, default=2,
                        help="leafspine: spines (1 with 4 hosts a leaf: every leaf's uplink 4:1 oversubscribed)")
    parser.add_argument("--tag", default="", help="name suffix of the results file")
    args = parser.parse_args()
    rate = args.bw * 1e6 / 8
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for topo in args.topos.split(","):
            for n in (int(x) for x in args.workers.split(",")):
                for name, kind in KINDS.items():
                    print(f"{topo}, N = {n}, {name}", flush=True)
                    _, results, events, idle = run_collective(Path(tmp) / f"{topo}-{n}-{name}", topo, name, 0.0,
                                                              n, args.size, args.iterations, args.bw,
                                                              spines=args.spines)
                    failed = {nid: r.get("error") for nid, r in results.items() if not r["ok"]}
                    if failed:
                        raise RuntimeError(f"{topo} N={n} {name} failed: {failed}")
                    times = op_times(results)
                    median = statistics.median(times)
                    ring = collective_bound_s(kind, n, args.size, rate)
                    innet = in_network_bound_s(name, n, args.size, rate)
                    ring_runs, ring_idle = ring_times(Path(tmp) / f"{topo}-{n}-{name}-ring", topo, kind, n, args.size,
                                                      args.iterations, args.bw, args.spines)
                    ring_median = statistics.median(ring_runs)
                    low, high, ring_low, ring_high = min(times), max(times), min(ring_runs), max(ring_runs)
                    # the links' load is not metered here (a collective's own times are): the CPU judges the run
                    links = f"shaped at {args.bw:g} Mb/s, load not metered"
                    limits, ring_limits = Limits(None, idle, links), Limits(None, ring_idle, links)
                    rows.append({"topo": topo, "spines": args.spines, "workers": n, "collective": name,
                                 "size_bytes": args.size,
                                 "bw_mbps": args.bw, "median_s": median, "spread_s": [low, high],
                                 "ring_bound_s": ring,
                                 "in_network_bound_s": innet, "over_ring_bound": median / ring,
                                 "over_in_network_bound": median / innet, "cpu_idle": idle, "events": events,
                                 "ring_median_s": ring_median, "ring_spread_s": [ring_low, ring_high],
                                 "ring_cpu_idle": ring_idle,
                                 "ring_over_netreduce": ring_median / median, **limits.figures(),
                                 "ring_limits": ring_limits.figures()})
                    print(f"  median {median:.3f} s [{low:.3f}-{high:.3f}], ring bound {ring:.3f} s "
                          f"({median / ring:.2f}x), in-network bound {innet:.3f} s ({median / innet:.2f}x), idle CPU "
                          f"{idle}; the ring's median {ring_median:.3f} s [{ring_low:.3f}-{ring_high:.3f}] "
                          f"(idle CPU {ring_idle}); {limits.line()}", flush=True)
    name = "netreduce-rs-ag" + (f"-{args.tag}" if args.tag else "")
    # the in-network collectives: the graph engine's operations in a host program of their own; the ring's: a graph
    path = save(name, {"code_version": code_version(), "rows": rows}, engines=[Engine.GRAPH])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
