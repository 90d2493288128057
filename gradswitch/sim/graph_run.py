"""Running a job's execution graphs (gradswitch/workload/graph.py) on the simulator: every rank's graph executed in C++
by the graph engine (docs/simulator.md "The graph engine"), node by node, with no Python per node or packet; the result
is what both backends report (gradswitch.workload.graph_timing.GraphRun) and the simulated run's own (speed, switch
ports, per rank the iteration check).

Given NetReduce jobs (`in_network`, a switch job per collective type, as gradswitch/experiment/graph_run.py
graph_job makes them for algo = netreduce; `netreduce_job`: the all-reduce's alone), the world group's
all-reduces, reduce-scatters and all-gathers run through the switches (gradswitch/workload/graph.py IN_NETWORK); the
other collectives, those of smaller groups among them, run on the hosts' algorithms as without them."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.roce.qp import Mode
from gradswitch.sim.faults import SimFaultError, schedule_json
from gradswitch.sim.ranks import MpiLaunch, MpiSync, PartitionError, partition
from gradswitch.sim.results import SimResult, parse
from gradswitch.sim.run import SimError, simulate
from gradswitch.sim.sim_config import base_config, graph_job_json
from gradswitch.sim.sim_settings import CheckMode, SimSettings
from gradswitch.topology.faults import FaultKind
from gradswitch.topology.model import Topology
from gradswitch.workload.graph import (
    IN_NETWORK,
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    JobGraph,
    Node,
    node_kind,
    validate,
)
from gradswitch.workload.graph_timing import GraphRun, NodeStart, NodeTiming
from gradswitch.workload.job import Algorithm, JobConfig, Role
from gradswitch.workload.job import Node as JobNode


@dataclass(frozen=True)
class GraphTransport:
    """The RC transport every rank's queue pairs use (gradswitch.workload.job.JobConfig's fields of the same names)."""

    mode: Mode = Mode.GBN
    mtu: int = 1024
    window: int = 64  # packets in flight per queue pair
    rto: float = 0.02
    retry_limit: int = 7


@dataclass(frozen=True)
class GraphSimResult:
    run: GraphRun  # every node's start, end and check
    sim: SimResult  # the simulated run: speed (wall time, packet hops), switch ports, each rank's check
    hosts: tuple[str, ...]  # rank r ran on hosts[r]
    check: CheckMode  # what the packets carried

    def ok(self) -> bool:
        """Every rank finished, and every checked node's output held what its operation defines."""
        return self.sim.ok() and all(n.checked is not False for n in self.run.nodes)


def placement(graph: JobGraph, topology: Topology, hosts: Sequence[str] | None = None) -> tuple[str, ...]:
    """The host of each rank: `hosts` as given, else the topology's hosts in order (rank r on host r)."""
    names = [h.name for h in topology.hosts]
    if hosts is None:
        if graph.world_size > len(names):
            raise SimError(f"graph {graph.name}: {graph.world_size} ranks but {topology.name} has {len(names)} hosts: "
                           f"give a topology with at least {graph.world_size} hosts")
        return tuple(names[:graph.world_size])
    if len(hosts) != graph.world_size:
        raise SimError(f"graph {graph.name}: {len(hosts)} hosts for {graph.world_size} ranks: give one host per rank")
    for h in hosts:
        if not topology.is_host(h):
            raise SimError(f"graph {graph.name}: {h!r} is not a host of {topology.name} (hosts: {', '.join(names)})")
    return tuple(hosts)


def job_config(graph: JobGraph, hosts: Sequence[str], topology: Topology, transport: GraphTransport,
               seed: int = 1) -> JobConfig:
    """The job whose workers run the ranks (its transport settings; the graph is the workload)."""
    ip = {h.name: h.ip for h in topology.hosts}
    nodes = tuple(JobNode(r, Role.WORKER, h, ip[h]) for r, h in enumerate(hosts))
    return JobConfig(Algorithm.RING, nodes, iterations=1, transport=transport.mode, mtu=transport.mtu,
                     window=transport.window, rto=transport.rto, retry_limit=transport.retry_limit, seed=seed)


def config(graph: JobGraph, topology: Topology, settings: SimSettings, hosts: Sequence[str] | None = None,
           transport: GraphTransport | None = None, job: JobConfig | None = None,
           netreduce_job: int | None = None, in_network: Mapping[CollectiveKind, int] | None = None
           ) -> tuple[dict[str, Any], JobConfig]:
    """gradswitch-sim's configuration of the run, and the job it describes (`in_network`: the NetReduce job each
    type of its world collectives runs on; `netreduce_job`: the all-reduce's, alone). GraphError on a graph that
    cannot run, SimError on a placement or a NetReduce job that cannot be, before anything starts."""
    cfg, jobs, placed = resolve(graph, topology, hosts, transport, job, netreduce_job, in_network)
    return document(topology, settings, [(graph, cfg, jobs)], placed), cfg


def resolve(graph: JobGraph, topology: Topology, hosts: Sequence[str] | None, transport: GraphTransport | None,
            job: JobConfig | None, netreduce_job: int | None, in_network: Mapping[CollectiveKind, int] | None
            ) -> tuple[JobConfig, dict[CollectiveKind, int], tuple[str, ...]]:
    """The job that runs the graph (its ranks' hosts and transport), its switch jobs and its ranks' hosts; the
    one-line refusals of config."""
    validate(graph)
    if job is not None:
        if hosts is not None or transport is not None:
            raise SimError(f"graph {graph.name}: give a job (its workers' hosts and its transport) or hosts and "
                           f"transport, not both")
        placed = placement(graph, topology, [n.host for n in job.workers])
        servers = tuple(job.servers) if job.algo == Algorithm.PS else ()  # they run the world's all-reduces
        cfg = replace(job, nodes=tuple(job.workers) + servers, iterations=1)
    else:
        placed = placement(graph, topology, hosts)
        cfg = job_config(graph, placed, topology, transport or GraphTransport())
    jobs = switch_jobs(graph, netreduce_job, in_network)
    if jobs:
        netreduce_problem(graph, cfg, placed, jobs)
    return cfg, jobs, placed


def document(topology: Topology, settings: SimSettings,
             parts: Sequence[tuple[JobGraph, JobConfig, Mapping[CollectiveKind, int]]], ranks: Sequence[str]
             ) -> dict[str, Any]:
    """gradswitch-sim's configuration of one or several graph jobs (graph, job, switch jobs) run at once; loss, if
    any, on the ranks' hosts."""
    out = base_config(topology, settings, max(time_limit_s(g, cfg, settings) for g, cfg, _ in parts))
    out["jobs"] = [graph_job_json(g, cfg, settings, jobs) for g, cfg, jobs in parts]
    if settings.faults:  # a worker's on its rank (a training graph's: sim_fault_problems refuses them on a trace's)
        try:
            out["fault_schedule"] = schedule_json(settings.faults, topology, [cfg for _, cfg, _ in parts],
                                                  settings.switch_detect_s, settings.link_detect_s)
        except SimFaultError as e:
            raise SimError(str(e)) from None
    if settings.loss_pct > 0:
        out["loss"] = {"fraction": settings.loss_pct / 100.0, "hosts": sorted(set(ranks))}
    return out


def time_limit_s(graph: JobGraph, cfg: JobConfig, settings: SimSettings) -> float:
    """The simulated time the run may take: the settings', else the job's timeout and its longest rank's
    computation (stretched by the largest slow-worker factor: a slowed rank's may take that long)."""
    compute = max((sum(n.duration_s for n in r.nodes if isinstance(n, ComputeNode)) for r in graph.ranks), default=0.0)
    slowest = max((f.factor for f in settings.faults if f.kind == FaultKind.SLOW_WORKER), default=1.0)
    return settings.time_limit_s if settings.time_limit_s is not None else cfg.iteration_timeout + compute * slowest


def switch_jobs(graph: JobGraph, netreduce_job: int | None, in_network: Mapping[CollectiveKind, int] | None
                ) -> dict[CollectiveKind, int]:
    """The switch job of each in-network collective type: `in_network`, with `netreduce_job` the all-reduce's."""
    jobs = dict(in_network or {})
    if netreduce_job is not None:
        if jobs.get(CollectiveKind.ALL_REDUCE, netreduce_job) != netreduce_job:
            raise SimError(f"graph {graph.name}: two all-reduce switch jobs, {netreduce_job} and "
                           f"{jobs[CollectiveKind.ALL_REDUCE]}: give one")
        jobs[CollectiveKind.ALL_REDUCE] = netreduce_job
    for kind in jobs:
        if kind not in IN_NETWORK:
            raise SimError(f"graph {graph.name}: the switches run {', '.join(str(k) for k in IN_NETWORK)}, not {kind}")
    return jobs


def netreduce_problem(graph: JobGraph, cfg: JobConfig, hosts: Sequence[str], jobs: Mapping[CollectiveKind, int]
                      ) -> None:
    """SimError, one line, when the job's world collectives cannot run through the switches as `jobs` says."""
    if graph.world_size < 2:
        raise SimError(f"graph {graph.name}: NetReduce needs at least 2 ranks, not {graph.world_size}")
    if cfg.mtu != NETREDUCE_MTU:
        raise SimError(f"graph {graph.name}: NetReduce packets are {NETREDUCE_MTU} bytes, but the transport's mtu is "
                       f"{cfg.mtu}: give mtu = {NETREDUCE_MTU}")
    if len(set(hosts)) != len(hosts):
        raise SimError(f"graph {graph.name}: NetReduce needs every rank on a host of its own")
    for netreduce_job in jobs.values():
        if netreduce_job == cfg.job_id:
            raise SimError(f"graph {graph.name}: the NetReduce job needs an id of its own, not the graph's job id "
                           f"{cfg.job_id}")
    if len(set(jobs.values())) != len(jobs):
        raise SimError(f"graph {graph.name}: each in-network collective type needs a switch job of its own, not "
                       f"{', '.join(f'{k}: {j}' for k, j in jobs.items())}")
    owners = [k for k in jobs if k != CollectiveKind.ALL_REDUCE]
    if owners and cfg.credits > CONFIG.AGG_MAX_CREDITS:
        raise SimError(f"graph {graph.name}: {cfg.credits} credits, but the switch job of a {owners[0]} takes at "
                       f"most {CONFIG.AGG_MAX_CREDITS} (a message's owner sits above its window in the RETH)")


def timings(graph: JobGraph, raw: dict[str, Any], index: int = 0) -> GraphRun:
    """The simulator's per-node records of its `index`-th job (each rank's `graph`: [id, start, end, checked,
    zero_filled, error2, norm2]) as a GraphRun; a node started and never ended (its rank stopped first) as its
    start."""
    job = raw["jobs"][index]
    out: list[NodeTiming] = []
    started: list[NodeStart] = []
    for result in job["nodes"]:
        rank = int(result["node_id"])
        if rank >= graph.world_size:
            continue  # a parameter server: no graph of its own
        by_id: dict[int, Node] = graph.ranks[rank].by_id()
        for node_id, start, end, checked, *loss in result.get("graph", []):
            # DLCP's loss per node: [zero_filled, error2, norm2] (a file written before it had none: no loss)
            zero_filled, error2, norm2 = loss if len(loss) == 3 else (0, 0.0, 0.0)
            n = by_id[int(node_id)]
            if start >= 0 > end:
                started.append(NodeStart(rank, n.id, float(start)))  # its rank stopped first (its error says why)
            if start < 0 or end < 0:
                continue  # never started or never finished (the run failed: the rank's error says why)
            collective = n.collective if isinstance(n, CollectiveNode) else None
            group = n.group if isinstance(n, CollectiveNode) else None
            nbytes = 0 if isinstance(n, ComputeNode) else n.nbytes
            out.append(NodeTiming(rank, n.id, node_kind(n), float(start), float(end), collective, group, nbytes,
                                  None if checked is None else bool(checked), int(zero_filled), float(error2),
                                  float(norm2)))
    return GraphRun(tuple(out), tuple(started))


def run_graph(graph: JobGraph, topology: Topology, settings: SimSettings | None = None, out_dir: Path | None = None,
              hosts: Sequence[str] | None = None, transport: GraphTransport | None = None,
              job: JobConfig | None = None, mpi_ranks: int = 1, hostfile: Path | None = None,
              sync: MpiSync = MpiSync.BARRIER, netreduce_job: int | None = None,
              in_network: Mapping[CollectiveKind, int] | None = None) -> GraphSimResult:
    """Simulate the job's graphs on the topology; writes out_dir's sim-config.json, sim-results.json and
    sim.log (a temporary folder when None). Rank r runs on hosts[r], else on the topology's r-th host, with
    `transport`'s queue pairs; or, given `job` (what the BMv2 run's placement made: gradswitch/experiment/
    graph_run.py graph_job), on its worker r's host with its transport, seed and timeout, so both backends
    run the same job. mpi_ranks > 1: the MPI build under mpirun, the topology cut as gradswitch.sim.run.run cuts it
    (hostfile, sync as there); the same results as one process. `in_network`: the world group's collectives of
    these types run through the switches, each type as its NetReduce job (ids of their own; the transport's mtu
    NetReduce's), all-reduces checked by their workers, reduce-scatters and all-gathers by their nodes;
    `netreduce_job`: the all-reduce's alone. GraphError (a graph that cannot run) or
    SimError (a placement or partition that cannot be, a simulator that fails) before or instead of a
    result; a run that finished reports its nodes' checks (ok())."""
    settings = settings or SimSettings()
    check_ranks(mpi_ranks)
    cfg_doc, cfg = config(graph, topology, settings, hosts, transport, job, netreduce_job, in_network)
    raw, sim = launch(cfg_doc, [cfg], topology, settings, out_dir, mpi_ranks, hostfile, sync)
    return GraphSimResult(timings(graph, raw), sim, tuple(n.host for n in cfg.nodes), sim.checks[cfg.job_id])


def check_ranks(mpi_ranks: int) -> None:
    if mpi_ranks < 1:
        raise SimError(f"mpi_ranks = {mpi_ranks}: give 1 (one process, the default) or more (MPI)")


def launch(cfg_doc: dict[str, Any], cfgs: list[JobConfig], topology: Topology, settings: SimSettings,
           out_dir: Path | None, mpi_ranks: int, hostfile: Path | None, sync: MpiSync
           ) -> tuple[dict[str, Any], SimResult]:
    """Run the configuration (on `mpi_ranks` MPI ranks, the topology cut as gradswitch.sim.run.run cuts it) in
    out_dir (a temporary folder when None); the simulator's document and its SimResult."""
    mpi = None
    if mpi_ranks > 1:
        try:
            cfg_doc["mpi"] = partition(topology, cfgs, mpi_ranks).config(sync)
        except PartitionError as e:
            raise SimError(str(e)) from None
        mpi = MpiLaunch(mpi_ranks, hostfile)
    if out_dir is None:
        with tempfile.TemporaryDirectory(prefix="gs-graph-") as tmp:
            raw = simulate(cfg_doc, Path(tmp), settings, launch=mpi)
    else:
        raw = simulate(cfg_doc, out_dir, settings, launch=mpi)
    return raw, parse(raw, cfgs)


@dataclass(frozen=True)
class PlacedGraph:
    """One job of a run of several graphs at once: its graph, the job its workers are (hosts, transport, id) and
    the NetReduce job of each of its in-network collective types (ids of their own, apart from every job's)."""

    graph: JobGraph
    job: JobConfig
    in_network: Mapping[CollectiveKind, int]


def run_graphs(jobs: Sequence[PlacedGraph], topology: Topology, settings: SimSettings, out_dir: Path,
               mpi_ranks: int = 1, hostfile: Path | None = None, sync: MpiSync = MpiSync.BARRIER
               ) -> list[GraphSimResult]:
    """Simulate several jobs' graphs at once on the topology (each on its job's hosts, as run_graph runs one given
    `job`), in one simulation: their packets share the fabric. One result per job, in their order, each with the
    run's SimResult. The same one-line errors as run_graph, and SimError for jobs that share a host or an id."""
    cfg_doc, cfgs = graphs_config(jobs, topology, settings)
    check_ranks(mpi_ranks)
    raw, sim = launch(cfg_doc, cfgs, topology, settings, out_dir, mpi_ranks, hostfile, sync)
    return [GraphSimResult(timings(p.graph, raw, k), sim, tuple(n.host for n in cfg.nodes), sim.checks[cfg.job_id])
            for k, (p, cfg) in enumerate(zip(jobs, cfgs, strict=True))]


def graphs_config(jobs: Sequence[PlacedGraph], topology: Topology, settings: SimSettings
                  ) -> tuple[dict[str, Any], list[JobConfig]]:
    """gradswitch-sim's configuration (one process) of several jobs' graphs run at once, and the jobs it describes,
    in their order: what run_graphs runs (and a profiler may run by hand); its one-line errors."""
    if not jobs:
        raise SimError("no graph to run: give at least one job")
    parts = []
    for p in jobs:
        cfg, switched, _placed = resolve(p.graph, topology, None, None, p.job, None, p.in_network)
        parts.append((p.graph, cfg, switched))
    cfgs = [cfg for _, cfg, _ in parts]
    ranks = [n.host for cfg in cfgs for n in cfg.workers]  # parameter servers may share a host (colocated)
    if len(set(ranks)) != len(ranks):
        raise SimError(f"graphs {', '.join(p.graph.name for p in jobs)}: their ranks share a host; give each its own")
    ids = [cfg.job_id for cfg in cfgs] + [j for p in jobs for j in p.in_network.values()]
    if len(set(ids)) != len(ids):
        raise SimError(f"graphs {', '.join(p.graph.name for p in jobs)}: job ids {sorted(ids)} meet; give each job "
                       "and each NetReduce job an id of its own")
    return document(topology, settings, parts, ranks), cfgs
