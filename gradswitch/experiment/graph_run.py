"""A job's execution graphs (gradswitch/workload/graph.py) as a run's job, and their report. graph_job makes what the
ranks run and where: rank r a process (`python -m gradswitch.hosts.graph_main`, or the simulator's graph engine) on the
host today's placement gives worker r (topology-aware: ring neighbours share a leaf), with the transport's window and
timeout sized for the links as an experiment's are. A run goes the one way every spec's does (runner.run_on on
BMv2, gradswitch/experiment/simulated_graph.py on ns-3; a workload of graphs given as GraphWorkload); back, every
node's timing (gradswitch.workload.graph_timing.GraphRun) and a report (GraphRunReport, results.json's `graph`:
gradswitch/experiment/trace_results.py writes it, read_graph_report reads it): per collective its time
against its link-rate bound (gradswitch/workload/collective_bounds.py), per collective type, exposed communication
per rank and per process group, every output's check, the busiest link, and whether the machine (not
the links) set the times (bottleneck.judge).

With algo = netreduce the switches run the world group's all-reduce, reduce-scatter and all-gather, one
NetReduce switch job per collective type (gradswitch/hosts/collectives/in_network.py), created for the run and removed
after it, the all-reduce job aggregating on the spine of the graph's own job id (the loop's NetReduce job's:
aggregation_spine_of); the report names the algorithm of each collective. The simulator's switches run the same three
(gradswitch/workload/graph.py IN_NETWORK), as the same NetReduce jobs (graph_job: GraphJob.in_network).

A job's communication carries synthetic data here (any graph); graph_job also makes the job of payload train-digits
(the digits MLP's real gradients, the hosts only), which runs as the loop's training does (graph_as_loop.py,
runner.run_on) and reports as the loop's.

Times are seconds of the emulated cluster: the testbed's divided by the run's dilation D (testbed
seconds per emulated second; computation waits D x its duration). Bounds are at the emulated rate, the
testbed's link rate x D, so a time over its bound reads the same on either clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, cast

from gradswitch.control.controls.netreduce import aggregation_spine
from gradswitch.experiment import results_file
from gradswitch.experiment.bottleneck import judge
from gradswitch.experiment.netreduce_watch import NetReduceWatch
from gradswitch.experiment.placed_load import ideal_link_load
from gradswitch.experiment.placement import Placement, rto_of
from gradswitch.experiment.report import interrupting
from gradswitch.experiment.results_file import GraphFigures, Results
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec, RingOrder
from gradswitch.experiment.testbed import Testbed
from gradswitch.hosts.collectives.in_network import NETREDUCE, algorithm, in_network_jobs
from gradswitch.hosts.collectives.ops import all_ops, ops_of
from gradswitch.hosts.collectives.ps import PS, key_count, layout, runs_on_servers, servers_run
from gradswitch.hosts.graph_digits import digits_problem
from gradswitch.hosts.graph_gradients import gradients_problem
from gradswitch.hosts.graph_job import GraphJob, read_timing, timing_path
from gradswitch.protocol.netreduce import JobLayout
from gradswitch.roce.qp import Mode
from gradswitch.topology.model import Topology
from gradswitch.version import code_version
from gradswitch.workload.collective_bounds import collective_bound_s, point_to_point_bound_s
from gradswitch.workload.fault_record import FaultRecord
from gradswitch.workload.graph import IN_NETWORK, CollectiveKind, ComputeNode, JobGraph, RecvNode, SendNode, validate
from gradswitch.workload.graph_payload import PayloadKind
from gradswitch.workload.graph_timing import GraphRun
from gradswitch.workload.job import Algorithm, JobConfig
from gradswitch.workload.plan import allreduce_bound_s
from gradswitch.workload.worker_result import WorkerResult

RESULTS = "results.json"  # what a run writes (gradswitch/experiment/results_file.py), a trace run's too
SEND_RECV = "send_recv"  # the per-type summary's name for point-to-point transfers
# the simulator's graph engine numbers a key in 24 bits of its writes' immediate data (gs-graph-spec.cc CollectiveImm)
SIM_PS_KEYS = 1 << 24
START_MARGIN_S = 60.0  # a graph's deadline: this plus TIMEOUT_FACTOR x its serial estimate
TIMEOUT_FACTOR = 10.0


@dataclass(frozen=True)
class CollectiveResult:
    """The k-th collective of a group: from its first member's start to its last member's end."""

    group: str
    index: int
    collective: str
    members: int
    nbytes: int
    start_s: float
    end_s: float
    bound_s: float  # the link-rate bound of the algorithm's kind (NetReduce all-reduce: S/B)
    checked: bool | None
    algorithm: str = ""  # what ran it: netreduce (the switches), or the hosts' ring, pairwise or chain

    @property
    def time_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class TransferResult:
    """A send and its receive: from the send's start to the later of the two ends."""

    src: int
    dst: int
    tag: int
    nbytes: int
    start_s: float
    end_s: float
    bound_s: float
    checked: bool | None

    @property
    def time_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class KindSummary:
    """Every collective of one type (or every transfer, SEND_RECV): how many, their times and bounds added up,
    and the worst time over bound."""

    kind: str
    count: int
    time_s: float
    bound_s: float
    worst_ratio: float


@dataclass(frozen=True)
class GraphRunReport:
    graph: str
    hosts: tuple[str, ...]  # rank r ran on hosts[r]
    bw_mbps: float
    dilation: float
    run: GraphRun
    collectives: tuple[CollectiveResult, ...]
    transfers: tuple[TransferResult, ...]
    by_kind: tuple[KindSummary, ...]
    exposed_s: dict[int, float]  # per rank: waiting on the network with no computation running
    exposed_by_group_s: dict[str, float]  # per process group: the most any member waited on that group's collectives
    checked: bool  # every collective's and receive's output exact on every rank (a send has none: checked None)
    errors: tuple[str, ...]  # what went wrong on a rank (a wrong output, a failure)
    busiest_link: str | None  # the shaped link direction that carried the most bytes
    busiest_link_bytes: int | None
    busiest_link_load: float | None
    cpu_idle: float | None
    machine_bound: bool | None
    machine_bound_reason: str | None
    wall_s: float
    resent_packets: int = 0  # packets the ranks' transports sent again (loss, timeouts)
    faults: tuple[FaultRecord, ...] = ()  # what each fault of the run did (its iterations: the graph's one run)
    code_version: str = field(default_factory=code_version)
    # the busiest link's load in a run its links pace, where the flows' paths make it under 1.0
    # (gradswitch/experiment/placed_load.py; None: 1.0, a graph with computation, judged by its CPU only, or a
    # simulated run, never machine-bound)
    ideal_link_load: float | None = None
    link_drops: int | None = None  # packets every shaped link's queue dropped (None: no link measured)

    @property
    def job_s(self) -> float:
        return self.run.job_s

    def section(self) -> GraphFigures:
        """results.json's `graph`: what the report holds beyond the loop's figures (its errors, faults, CPU, machine
        judgement and wall time are results.json's own: trace_results.trace_results puts them there)."""
        d = asdict(replace(self, run=GraphRun(()), faults=()))
        for out in [*d["collectives"], *d["transfers"]]:
            out["time_s"] = out["end_s"] - out["start_s"]
        section = {k: d[k] for k in GRAPH_SECTION if k not in ("run", "job_s", "exposed_s", "hosts")}
        section.update(run=self.run.to_dict(), job_s=self.job_s, hosts=list(self.hosts),
                       exposed_s={str(k): v for k, v in self.exposed_s.items()})
        return cast(GraphFigures, section)

    @classmethod
    def from_results(cls, results: Results) -> GraphRunReport:
        """The report a trace run's results.json holds (its `graph`, with the run's errors, faults, CPU and wall
        time); ValueError, KeyError or TypeError for one this code cannot read (read_graph_report makes them one
        line)."""
        d = results["graph"]
        extra = results["headline_extra"]

        def own(kind: type[Any], raw: Any) -> Any:  # the dataclass's fields, not what section() adds
            return kind(**{f.name: raw[f.name] for f in fields(kind) if f.name in raw})

        errors = tuple(f"{who}: {line}" for who, line in results["errors"].items())
        return cls(str(d["graph"]), tuple(d["hosts"]), float(d["bw_mbps"]), float(d["dilation"]),
                   GraphRun.from_dict(d["run"]), tuple(own(CollectiveResult, c) for c in d["collectives"]),
                   tuple(own(TransferResult, t) for t in d["transfers"]),
                   tuple(own(KindSummary, k) for k in d["by_kind"]),
                   {int(r): float(v) for r, v in d["exposed_s"].items()},
                   {str(g): float(v) for g, v in d["exposed_by_group_s"].items()}, bool(d["checked"]), errors,
                   d["busiest_link"], d["busiest_link_bytes"], d["busiest_link_load"], extra.get("cpu_idle"),
                   extra.get("machine_bound"), extra.get("machine_bound_reason"), float(extra.get("wall_s", 0.0)),
                   int(d["resent_packets"]), tuple(FaultRecord.from_dict(f) for f in results.get("faults", [])),
                   str(results.get("code_version", "")), d["ideal_link_load"], d["link_drops"])


# results.json's `graph` (results_file.GraphFigures): the report's own figures
GRAPH_SECTION = tuple(GraphFigures.__annotations__)


class GraphReportError(ValueError):
    """A results.json this code cannot read as a trace run's (one line naming it)."""


def read_graph_report(path: Path) -> GraphRunReport:
    """The report of a trace run (its results.json's `graph`, errors, faults and machine figures); GraphReportError,
    one line, when the file is missing, of a format this code does not read, or no trace run's."""
    try:
        results = results_file.read(path)
    except results_file.ResultsFileError as e:
        raise GraphReportError(str(e)) from None
    if "graph" not in results:
        raise GraphReportError(f"{path}: no `graph` in it: not a trace run's results (workload_et); run the traces "
                               "with `gradswitch experiment --workload-et`")
    try:
        return GraphRunReport.from_results(results)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise GraphReportError(f"{path}: not a trace run's results this gradswitch reads ({type(e).__name__}: "
                               f"{e}); run it again") from None


def rate_bytes_per_s(bw_mbps: float, dilation: float) -> float:
    """The emulated cluster's link rate: the testbed's x D."""
    return bw_mbps * 1e6 / 8 * dilation


def graph_spec(graph: JobGraph, *, bw_mbps: float, seed: int = 1, ring_order: RingOrder = RingOrder.LEAVES,
               transport: Mode = Mode.GBN, loss_pct: float = 0.0, algo: Algorithm = Algorithm.RING, servers: int = 1,
               ps_key_bytes: int = ExperimentSpec().algorithm.ps_key_bytes) -> ExperimentSpec:
    """An experiment's settings for running `graph` on a rack of its ranks (and, with algo = ps, `servers`
    parameter servers, keys of `ps_key_bytes`: what run_graph uses)."""
    return ExperimentSpec.of(workers=graph.world_size, bw_mbps=bw_mbps, ring_order=ring_order, seed=seed,
                             transport=transport, loss_pct=loss_pct, iterations=1, algo=algo, servers=servers,
                             ps_key_bytes=ps_key_bytes)


def graph_job(topo: Topology, spec: ExperimentSpec, graph: JobGraph, *, dilation: float | None = None,
              timeout_s: float | None = None, payload: PayloadKind = PayloadKind.SYNTHETIC, job_index: int = 0
              ) -> tuple[GraphJob, Placement]:
    """What the ranks run and where: the graph, with the spec's transport settings for its `workers` (the
    graph's ranks) on this network (placement.place and job_config: hosts as an experiment's ring, window
    within the shaped queue, RTO from the path), the window shared among the process groups a rank may
    receive from at once, carrying `payload`. `dilation`: None, the spec's (1 without emulation). One-line
    errors (GraphError, ExperimentError) before anything starts. `job_index`: which of the spec's `jobs` (each on
    hosts of its own; its in-network collectives' NetReduce jobs numbered after every job's id)."""
    validate(graph)
    spec.validate()
    if payload != PayloadKind.SYNTHETIC and spec.network.simulated:
        raise ExperimentError(f"{graph.name}: payload {payload} computes its gradients on the hosts; the simulator "
                              "carries synthetic data only (checked by digest): run it on BMv2 (backend = bmv2), or "
                              "give the graph alone for timing")
    if spec.network.workers != graph.world_size:
        raise ExperimentError(f"{graph.name}: {graph.world_size} ranks, but workers = {spec.network.workers}; "
                              f"set workers = {graph.world_size}")
    if not spec.network.bw_mbps and timeout_s is None:
        raise ExperimentError(f"{graph.name}: bw_mbps is not set; a graph run needs shaped links (its bounds "
                              f"are at the link rate): give bw_mbps, e.g. 8")
    hosts, needed = len(topo.hosts), graph.world_size + spec.algorithm.servers_per_job
    if needed > hosts:
        per_job = spec.algorithm.servers_per_job
        with_servers = f" and {per_job} parameter server(s)" if per_job else ""
        raise ExperimentError(f"{graph.name}: {graph.world_size} ranks{with_servers}, but the network has {hosts} "
                              f"hosts; run it on a topology with at least {needed}")
    plan = plan_run(spec, topo)
    placement, cfg = plan.placement, plan.jobs[job_index]
    servers = tuple(s.node_id for s in cfg.servers)
    if servers:
        # a pull waits behind the server's windows, its acknowledgement behind every rank's pushes: two queues
        cfg = replace(cfg, rto=rto_of(spec, cfg.window, cfg.mtu, 0, queues=2))
        # every all-reduce the servers run must number its keys (one line naming the first that cannot); they are
        # the world's, so rank 0 holds every one
        first = graph.ranks[0]
        nodes = first.by_id()
        for nid, op in ops_of(graph, first.rank).items():
            if runs_on_servers(graph, nodes[nid], servers):
                keys = key_count(op, cfg.ps_key_bytes)
                if spec.network.simulated and keys > SIM_PS_KEYS:
                    raise ExperimentError(f"{first.where()} node {nid} ({nodes[nid].name}): {op.key}: {keys} keys of "
                                          f"ps_key_bytes = {cfg.ps_key_bytes}; the simulator numbers at most "
                                          f"{SIM_PS_KEYS} an operation: raise ps_key_bytes to at least "
                                          f"{-(-op.elements // SIM_PS_KEYS) * 4}")
                try:
                    layout(op, servers, cfg.ps_key_bytes)
                except ValueError as e:
                    raise ExperimentError(f"{first.where()} node {nid} ({nodes[nid].name}): {e}") from None
    d = dilation if dilation is not None else (spec.dilation or 1.0)
    senders = {g.name: senders_per_group(graph, g.name) for g in graph.groups}  # each group's, once
    fan_in = max(1, max(sum(senders[g.name] for g in graph.groups if r in g.ranks) for r in range(graph.world_size)))
    timeout = timeout_s
    if timeout is None:
        assert spec.network.bw_mbps, "refused above: a graph without a deadline of its own needs shaped links"
        timeout = START_MARGIN_S + TIMEOUT_FACTOR * serial_estimate_s(graph, spec.network.bw_mbps, d, len(servers))
    # one job: its own id + 1 on (as ever); several: after every job's id, len(IN_NETWORK) a job
    first_id = None if len(plan.jobs) == 1 else len(plan.jobs) + 1 + job_index * len(IN_NETWORK)
    in_network = in_network_jobs(graph, cfg.job_id, first_id) if spec.algorithm.algo == Algorithm.NETREDUCE else {}
    if not spec.network.simulated:  # the P4 switches' limits (the simulator's run every IN_NETWORK type, any number of
        # members; gradswitch.sim.graph_run refuses what they cannot)
        check_switch_jobs(graph, cfg, in_network)
    if payload == PayloadKind.DIGITS and (problem := digits_problem(cfg)) is not None:
        raise ExperimentError(f"{graph.name}: {problem}")
    if payload == PayloadKind.GRADIENTS and (problem := gradients_problem(cfg)) is not None:
        raise ExperimentError(f"{graph.name}: {problem}")
    job = GraphJob(replace(cfg, window=max(1, cfg.window // fan_in), iteration_timeout=timeout), graph, d, in_network,
                   payload)
    return job, placement


def check_switch_jobs(graph: JobGraph, cfg: JobConfig, in_network: dict[CollectiveKind, int]) -> None:
    """ExperimentError (one line) when the P4 switches cannot run the graph's in-network jobs with the job's
    settings (its credits, its workers, its k of N)."""
    for kind, job_id in in_network.items():
        quorum, deadline_us = k_of_n(cfg, kind)
        if kind != CollectiveKind.ALL_REDUCE and (cfg.netreduce_k is not None or cfg.netreduce_deadline_us):
            raise ExperimentError(f"{graph.name}: k of N (netreduce_k, netreduce_deadline_ms) is for the switches' "
                                  f"all-reduces; the graph has a {kind} in the switches too: run it without k of N, "
                                  "or with algo = ring")
        try:
            JobLayout(job_id, graph.world_size, cfg.credits, kind == CollectiveKind.REDUCE_SCATTER,
                      kind == CollectiveKind.ALL_GATHER, quorum, deadline_us)
        except ValueError as e:
            raise ExperimentError(f"{graph.name}: the switches cannot run its {kind}: {e}; run it with "
                                  f"algo = ring") from e


def k_of_n(cfg: JobConfig, kind: CollectiveKind) -> tuple[int | None, int]:
    """The switch job's k of N and deadline (us) for the graph's in-network collectives of this type: the job's
    (netreduce_k, netreduce_deadline_us, as the loop's NetReduce job is installed) for all-reduce, none for the
    others (the switches run k of N for all-reduce jobs only)."""
    if kind != CollectiveKind.ALL_REDUCE:
        return None, 0
    return cfg.netreduce_k, cfg.netreduce_deadline_us


def aggregation_spine_of(topo: Topology, job: GraphJob, kind: CollectiveKind) -> str | None:
    """Where the graph's switch job of this collective type aggregates when its ranks sit on several leaves: the
    all-reduces on the spine of the graph's own job id, the one the loop's NetReduce job of that id aggregates on
    (so a fault aimed at the loop's aggregation spine hits the graph's too, and the same links carry them); a
    reduce-scatter or all-gather job, which the loop has not, on its own id's (None: plan_job's default)."""
    if kind != CollectiveKind.ALL_REDUCE:
        return None
    return aggregation_spine(topo, job.job.job_id, tuple(n.host for n in job.job.workers))


@contextmanager
def switch_jobs(net: Testbed, job: GraphJob, credits: int, ranks_dir: Path | None = None) -> Iterator[list[int]]:
    """The NetReduce switch jobs of the graph's in-network collectives (GraphJob.in_network), for the run:
    each on the job's hosts, reduce-scatter's and all-gather's set up for them, all-reduce's with the job's k of N
    and deadline; removed after, whatever happens. With `ranks_dir` (the run directory its ranks share: job_dir of
    the graph's job), the jobs are watched as a loop's NetReduce jobs are (gradswitch/experiment/netreduce_watch.py):
    the all-reduce job's ranks fall back to ring when its aggregation switch is lost and return when it is back; a
    reduce-scatter or all-gather job, which has no fallback, is stopped then, saying so."""
    control = net.control
    assert control is not None, "the network is not running"
    hosts = [n.host for n in job.job.workers]
    made: list[int] = []
    watch: NetReduceWatch | None = None
    unsubscribe: Callable[[], None] | None = None
    try:
        for kind, job_id in sorted(job.in_network.items(), key=lambda kv: kv[1]):
            quorum, deadline_us = k_of_n(job.job, kind)
            control.netreduce.create(job_id, hosts, credits, spine=aggregation_spine_of(net.topo, job, kind),
                                     scatter=kind == CollectiveKind.REDUCE_SCATTER,
                                     gather=kind == CollectiveKind.ALL_GATHER, quorum=quorum, deadline_us=deadline_us)
            made.append(job_id)
        if ranks_dir is not None and made:
            watch = NetReduceWatch(control)
            for kind, job_id in job.in_network.items():
                watch.add_job(job_id, len(hosts), ranks_dir, job.job.iteration_timeout,
                              kind == CollectiveKind.ALL_REDUCE)
            watch.start()
            unsubscribe = control.subscribe(watch.on_health)
        yield made
    finally:
        if unsubscribe is not None:
            unsubscribe()
        if watch is not None:
            watch.stop()
        for job_id in made:
            control.netreduce.teardown(job_id)


def senders_per_group(graph: JobGraph, group: str) -> int:
    """How many members of a group may write into one member at once: one for a ring or a chain, two for a
    pairwise all-to-all (a member one step ahead of the others; gradswitch/hosts/collectives/pairwise.py)."""
    kinds = {n.collective for _, n in graph.collectives() if n.group == group}
    return 2 if CollectiveKind.ALL_TO_ALL in kinds else 1


def serial_estimate_s(graph: JobGraph, bw_mbps: float, dilation: float, servers: int = 0) -> float:
    """Testbed seconds if every rank ran its nodes one after another at their bounds: the longest rank's (the
    world's all-reduces through `servers` parameter servers, if any)."""
    rate = bw_mbps * 1e6 / 8
    worst = 0.0
    for r in graph.ranks:
        total = 0.0
        for n in r.nodes:
            if isinstance(n, ComputeNode):
                total += n.duration_s * dilation
            elif isinstance(n, (SendNode, RecvNode)):
                total += point_to_point_bound_s(n.nbytes, rate)
            elif servers_run(graph, n.group, n.collective, range(servers)):
                total += allreduce_bound_s(Algorithm.PS, graph.world_size, servers, n.nbytes, rate)
            else:
                total += collective_bound_s(n.collective, len(graph.group(n.group).ranks), n.nbytes, rate)
        worst = max(worst, total)
    return worst


@dataclass(frozen=True)
class GraphWorkload:
    """A run's workload given as execution graphs rather than by the spec's fields: a trace's (workload_et, read by
    gradswitch.workload.chakra.read_traces) or any graph code makes. `dilation`: None, the spec's (1 without
    emulation); on ns-3 the computation is stretched by it on the simulated clock and the times reported divided by
    it, as a BMv2 run dilated by it does (the twin of such a run). `timeout_s`: None, sized from the graph
    (graph_job)."""

    graph: JobGraph
    dilation: float | None = None
    timeout_s: float | None = None


def trace_report(spec: ExperimentSpec, job: GraphJob, ranks_job_dir: Path, results: dict[int, WorkerResult],
                 hosts: list[str], carried: dict[str, dict[str, Any]], cpu_idle: float | None, wall_s: float,
                 topo: Topology, faults: Callable[[list[tuple[int, float, float]]], tuple[FaultRecord, ...]]
                 ) -> GraphRunReport:
    """The report of a graph's run on BMv2 (gradswitch/experiment/runner.py run_on): every rank's node timings
    (ranks_job_dir/graph-<rank>.json), the ranks' results, what the links carried; `faults` gives the run's fault
    records from the iterations kept (the graph's one run, testbed seconds). ExperimentError naming the rank when a
    rank left no timings."""
    graph = job.graph
    bw_mbps = spec.network.bw_mbps
    assert bw_mbps is not None  # graph_job refused a spec without
    missing = [r for r in range(graph.world_size) if not timing_path(ranks_job_dir, r).exists()]
    errors = tuple(f"rank {r} on {res['host']}: {res.get('error', 'failed')}" for r, res in sorted(results.items())
                   if not res["ok"])
    if missing:
        raise ExperimentError(f"{graph.name}: rank {missing[0]} did not run its graph: "
                              f"{results[missing[0]].get('error', 'no result')}")
    run = GraphRun(tuple(n for r in range(graph.world_size) for n in read_timing(ranks_job_dir, r).nodes))
    records = faults([(0, 0.0, run.job_s * job.dilation)] if not errors else [])
    if records:
        errors = tuple(f"{who}: {line}" for who, line in interrupting(records).items()) + errors  # the fault first
    ideal = ideal_link_load(job, topo, spec.network.load_balance, spec.network.ecmp_seed)
    lossless = not spec.faults.loss_pct and not spec.faults.faults
    report = summarize(job, run, hosts, bw_mbps, carried, cpu_idle, errors, wall_s, resent_packets(results.values()),
                       ideal, lossless)
    return replace(report, faults=records)


def resent_packets(results: Iterable[WorkerResult]) -> int:
    """Packets the ranks' requesters sent again, every queue pair of theirs (a NetReduce job's too)."""
    return sum(int(r.get("stats", {}).get("requester", {}).get("retransmitted", 0)) for r in results)


def summarize(job: GraphJob, run: GraphRun, hosts: list[str], bw_mbps: float, carried: dict[str, dict[str, Any]],
              cpu_idle: float | None, errors: tuple[str, ...], wall_s: float, resent_packets: int = 0,
              ideal_load: float | None = None, lossless: bool = False) -> GraphRunReport:
    """The report of a finished run (pure: tests give it a run and link usage); `ideal_load`: the busiest link's
    load in a run its links pace, on this run's paths (placed_load.ideal_link_load; None: 1.0); `lossless`: no
    loss injected and no fault, so a packet sent again that no link dropped was the machine's doing."""
    graph, d = job.graph, job.dilation
    rate = rate_bytes_per_s(bw_mbps, d)
    sizes = {g.name: len(g.ranks) for g in graph.groups}
    servers = [s.node_id for s in job.job.servers]
    algos = {(c.group, c.collective): PS if servers_run(graph, c.group, c.collective, servers)
             else algorithm(graph, c.group, c.collective, job.in_network) for c in run.collectives()}

    def bound_s(group: str, kind: CollectiveKind, nbytes: int) -> float:
        if algos[(group, kind)] == PS:  # N S/(P B): the servers' links carry every member's push and pull
            return allreduce_bound_s(Algorithm.PS, sizes[group], len(servers), nbytes, rate)
        return collective_bound_s(kind, sizes[group], nbytes, rate, algos[(group, kind)] == NETREDUCE)

    collectives = tuple(CollectiveResult(c.group, c.index, c.collective.value, sizes[c.group], c.nbytes, c.start_s,
                                         c.end_s, bound_s(c.group, c.collective, c.nbytes),
                                         c.checked, algos[(c.group, c.collective)]) for c in run.collectives())
    transfers = _transfers(job, run, rate)
    kinds: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for c in collectives:
        kinds[c.collective].append((c.time_s, c.bound_s))
    for t in transfers:
        kinds[SEND_RECV].append((t.time_s, t.bound_s))
    by_kind = tuple(KindSummary(k, len(v), sum(t for t, _ in v), sum(b for _, b in v),
                                max((t / b if b > 0 else 0.0) for t, b in v)) for k, v in sorted(kinds.items()))
    by_group: dict[str, float] = {}
    for g in graph.groups:
        waits = [GraphRun(tuple(n for n in run.nodes if n.rank == r and (n.kind == "compute" or n.group == g.name)))
                 .exposed_communication_s().get(r, 0.0) for r in g.ranks]
        by_group[g.name] = max(waits, default=0.0)
    comm = [n for n in run.nodes if n.kind != "compute"]
    busiest = max(carried.items(), key=lambda kv: kv[1]["sent_bytes"], default=None)
    load = busiest[1]["load"] if busiest else None
    has_compute = any(n.kind == "compute" and n.duration_s > 0 for n in run.nodes)
    # A graph that only communicates keeps its busiest link full when the links set its pace (or as loaded as
    # `ideal_load`, where steps wait for links that others do not share); with computation the links idle by
    # design, and only the CPU is judged.
    ideal = None if has_compute else ideal_load
    drops = sum(int(u.get("dropped_packets", 0)) for u in carried.values()) if carried else None
    unexplained = resent_packets if lossless and drops == 0 else 0
    bottleneck = judge(cpu_idle, None if has_compute else load, ideal, unexplained)
    return GraphRunReport(graph.name, tuple(hosts), bw_mbps, d, run, collectives, transfers, by_kind,
                          run.exposed_communication_s(), by_group,
                          not errors and all(n.checked is True for n in comm if n.kind != "send"), errors,
                          busiest[0] if busiest else None, int(busiest[1]["sent_bytes"]) if busiest else None, load,
                          cpu_idle, bottleneck.machine_bound, bottleneck.reason, wall_s, resent_packets,
                          ideal_link_load=ideal, link_drops=drops)


def _transfers(job: GraphJob, run: GraphRun, rate: float) -> tuple[TransferResult, ...]:
    """Each send matched with its receive by operation key (gradswitch/hosts/collectives/ops.py)."""
    timing = {(n.rank, n.node_id): n for n in run.nodes}
    recv_by_key = {}
    ops = all_ops(job.graph)  # every rank's, numbered once
    for r in job.graph.ranks:
        for nid, op in ops[r.rank].items():
            if op.kind == "recv":
                recv_by_key[op.key] = timing[(r.rank, nid)]
    out = []
    for r in job.graph.ranks:
        by_id = r.by_id()
        for nid, op in ops[r.rank].items():
            if op.kind != "send":
                continue
            node = by_id[nid]
            assert isinstance(node, SendNode)
            s, v = timing[(r.rank, nid)], recv_by_key[op.key]
            checked = v.checked  # the receiver's check (a send has no output of its own)
            out.append(TransferResult(r.rank, node.peer, node.tag, node.nbytes, s.start_s, max(s.end_s, v.end_s),
                                      point_to_point_bound_s(node.nbytes, rate), checked))
    return tuple(out)
