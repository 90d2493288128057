"""Entry point of a rank of a graph run: `python -m gradswitch.hosts.graph_main JOB RUN_DIR RANK` (a node id past the
ranks: one of the job's parameter servers, gradswitch/hosts/graph_ps_server.py).

The same life as gradswitch/hosts/main.py's nodes (ready, the runner's go, done, lingering, result-<rank>.json,
the abort file), running the rank's execution graph (gradswitch/hosts/graph_engine.py) instead of iterations.
Every memory region and queue pair the rank's operations use exists before it says ready, so a fast
peer's first write never finds a region missing. What the operations carry comes from the job's data source
(gradswitch/hosts/graph_data.py: synthetic data from the seed, or the digits MLP's real gradients); every communication
node's output is compared, element by element, with what the source says it must be (while the emulated GPU
computes, or after the graph), and the rank writes its node timings, in seconds of the emulated cluster from the
go, to graph-<rank>.json; its result holds what the source reports (per-iteration records, a model's digest).
After every iteration it completes it says so in RUN_DIR/progress-<rank>, as the loop's workers do (what a killed
rank completed); the job's `crash` ends the rank's process where the loop's worker ends its own (`Crashing`).

DLCP dropping (a training graph's or train-digits' job with `dlcp.drop`): before a training iteration's first
operation starts the rank sets its magnitude thresholds from everything it contributes that iteration (the data
source's `contributed`: the inputs of the iteration's operations, or train-digits' gradient as the loop's worker
encodes it), so its droppable writes are marked as the loop's
(collectives/ops.py Op.tag_at); a node's output may then differ where packets were trimmed and zero-filled: the
check records its zero-filled packets and the squared error against the squared norm, and the run judges each
iteration's relative error against the job's max_relative_error (gradswitch/workload/graph_iterations.py), as the
loop does, instead of failing on the first wrong element.

A job whose switches run some collectives (GraphJob.in_network, gradswitch/hosts/collectives/in_network.py) gives the
rank one more Comm per NetReduce job, on the same engine (each job its own QPs, with its own job id), and
hears every job's packets; the runtime steps them all. The all-reduce job's worker falls back to the hosts' ring
when the control plane says its aggregation switch is lost (gradswitch/hosts/fallback.py): the rank runs its graph as
ever, and before it leaves it stays for its peers until each has run every reduction (one may need this rank in a
ring that redoes a reduction this rank had from the switch); its result carries the job's `fallback`. The
all-reduce job takes the job's k of N and deadline (JobConfig.netreduce_k, netreduce_deadline_us): each of its sums
names the ranks it holds, and the data source checks it against exactly those (gradswitch/hosts/graph_data.py).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from gradswitch.hosts import graph_ps_server as ps_server
from gradswitch.hosts.check_cost import CheckCost
from gradswitch.hosts.collectives.data import elements_of, wrong_elements
from gradswitch.hosts.collectives.executor import Received, execute
from gradswitch.hosts.collectives.in_network import InNetworkJob, job_order, runs_in_network
from gradswitch.hosts.collectives.ops import Op, ops_of
from gradswitch.hosts.collectives.ps import PsLayout, layout, member_region_bytes, ps_all_reduce, runs_on_servers
from gradswitch.hosts.comm import Comm
from gradswitch.hosts.graph_data import Contributors, DataSource, SourceReport
from gradswitch.hosts.graph_digits import DigitsData
from gradswitch.hosts.graph_engine import GraphScheduler, OpRun, Span
from gradswitch.hosts.graph_job import GraphJob, write_timing
from gradswitch.hosts.graph_sources import data_source
from gradswitch.hosts.main import failed, linger, ready_then_go
from gradswitch.hosts.netreduce import NetReduceWorker
from gradswitch.hosts.slowdown import Slowdown
from gradswitch.hosts.whole_file import write_progress
from gradswitch.roce.engine import Engine, Link, RawSocketLink
from gradswitch.roce.qp import MemoryRegion
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, Node, node_kind
from gradswitch.workload.graph_iterations import IterationProgress, iteration_of, trains
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.records import CRASH_STATUS
from gradswitch.workload.worker_result import WorkerResult, worker_result, write


class HostRuntime:
    """The scheduler's runtime on a host: the monotonic clock, the transport, the rank's operations, what they
    carry (`source`), and the checks of their outputs (`wrong`: per node checked, its wrong elements out of its
    length; `loss`: with DLCP dropping, its squared error and the squared norm of what it should be; `received`: its
    packets zero-filled). `switched`: the nodes the switches run, each with its NetReduce job and its place in that
    job's order; `served`: the nodes the parameter servers run, each with its keys."""

    def __init__(self, comm: Comm, ops: dict[int, Op], regions: dict[int, MemoryRegion], source: DataSource,
                 switched: dict[int, tuple[InNetworkJob, int]] | None = None,
                 served: dict[int, PsLayout] | None = None) -> None:
        self.comm, self.ops, self.regions, self.source = comm, ops, regions, source
        self.switched = switched or {}
        self.served = served or {}
        self.others = list({id(j.worker.comm): j.worker.comm for j, _ in self.switched.values()}.values())
        self.pending: list[tuple[int, Int32Array]] = []
        self.cost = CheckCost()
        self.wrong: dict[int, tuple[int, int]] = {}
        self.lossy = comm.dlcp is not None and comm.dlcp.drop  # trimmed packets are zero-filled within a budget
        self.loss: dict[int, tuple[float, float]] = {}
        self.float_errors: dict[int, float] = {}  # float32 gradients: per node checked, its sum's error (known ones)
        self.received: dict[int, Received] = {}
        self._classed: set[int] = set()  # training iterations whose magnitude thresholds are set

    def classify(self, op: Op) -> None:
        """DLCP: the rank's magnitude thresholds of the op's training iteration, once, before its first write: from
        what the rank contributes in that iteration (its data source's `contributed` of every operation of it,
        gradswitch/workload/dlcp.py Magnitudes), as the training loop's worker sets them from its iteration's
        gradient."""
        it = op.iteration
        if self.comm.dlcp is None or it is None or it in self._classed:
            return
        self._classed.add(it)
        self.comm.set_magnitudes(it, self.source.contributed([o for o in self.ops.values()
                                                              if o.iteration == it and o.kind == "collective"]))

    def now(self) -> float:
        return time.monotonic()

    def wait(self, max_wait: float, what: str) -> None:
        self.comm.step(max_wait, what)
        for other in self.others:  # the engine has polled: take their completions too
            other.step(0.0, what)

    def start(self, node: Node) -> OpRun:
        op = self.ops[node.id]
        self.classify(op)
        if node.id in self.switched:
            job, place = self.switched[node.id]
            assert op.collective is not None
            return job.run(place, op.collective, self.source.input(op), iteration_of(node.name) or 0)
        received = self.received.setdefault(node.id, Received())
        if node.id in self.served:
            return ps_all_reduce(self.comm, op, self.served[node.id], self.regions[node.id], self.source.input(op),
                                 received)
        return execute(self.comm, op, self.regions[node.id], self.source.input(op), received)

    def finish(self, node: Node, output: Int32Array) -> None:
        contributors: Contributors | None = None
        if node.id in self.switched:  # k of N: the ranks each message's sum holds
            job, place = self.switched[node.id]
            contributors = job.contributors.pop(place, None)
        received = self.received.get(node.id)
        self.source.finished(self.ops[node.id], output, contributors, received.zero_filled if received else 0)
        self.pending.append((node.id, output))

    def background(self, budget_s: float = math.inf) -> bool:
        """Check the oldest finished operation's output against its definition, every element, if its check is
        expected to take at most budget_s (in finish order: a data source may check its iterations in order)."""
        if not self.pending:
            return False
        nid, output = self.pending[0]
        values = self.ops[nid].check_values()
        if self.cost.estimate_s(values) > budget_s:
            return False
        self.pending.pop(0)
        began = time.monotonic()
        want = self.source.expected(self.ops[nid])
        self.wrong[nid] = (wrong_elements(output, want), len(output))
        if (error := self.source.float_error(self.ops[nid], output)) is not None:
            self.float_errors[nid] = error
        if self.lossy and len(output) == len(want):
            diff = output.astype(np.float64) - want.astype(np.float64)
            self.loss[nid] = (float(np.dot(diff, diff)), float(np.dot(want.astype(np.float64), want)))
        self.cost.record(values, time.monotonic() - began)
        return True


def prepare(comm: Comm, ops: dict[int, Op], skip: frozenset[int] = frozenset(),
            served: dict[int, PsLayout] | None = None) -> dict[int, MemoryRegion]:
    """Every operation's region and every queue pair it uses, before the first packet (but those in `skip`,
    which the switches run; those `served`, by the parameter servers, with a region for their sums and a queue
    pair to each of their servers)."""
    served = served or {}
    mine = {nid: op for nid, op in ops.items() if nid not in skip}
    regions = {nid: comm.register(op.rkey, member_region_bytes(op) if nid in served else op.region_bytes())
               for nid, op in mine.items()}
    for nid, op in mine.items():
        peers = served[nid].block if nid in served else [op.members[p] for p in op.schedule().peers()]
        for peer in peers:
            comm.qp(peer)
    return regions


def on_servers(job: GraphJob, rank: int, ops: dict[int, Op]) -> dict[int, PsLayout]:
    """The rank's nodes that the parameter servers run (none without servers), each with its keys."""
    servers = tuple(s.node_id for s in job.job.servers)
    nodes = job.graph.ranks[rank].by_id()
    return {nid: layout(op, servers, job.job.ps_key_bytes) for nid, op in ops.items()
            if runs_on_servers(job.graph, nodes[nid], servers)}


def in_network(job: GraphJob, rank: int, comm: Comm) -> dict[int, tuple[InNetworkJob, int]]:
    """The rank's nodes that the switches run, each with its NetReduce job's worker (a Comm of that job id on
    the rank's engine, its region and QPs made now) and its place in that job's start order."""
    workers: dict[CollectiveKind, InNetworkJob] = {}
    nodes = [n for n in job.graph.ranks[rank].nodes if runs_in_network(job.graph, n, job.in_network)]
    for kind, job_id in job.in_network.items():
        cfg = replace(job.job, job_id=job_id)
        if kind != CollectiveKind.ALL_REDUCE:  # k of N is the all-reduce job's (graph_run.switch_jobs)
            cfg = replace(cfg, netreduce_k=None, netreduce_deadline_us=0)
        other = Comm(cfg, comm.me, comm.engine)
        other.abort_file = comm.abort_file
        # the largest of its operations: the all-reduce job's fallback ring sizes its slots by it
        largest = max((elements_of(n.nbytes) for n in nodes if isinstance(n, CollectiveNode) and n.collective == kind),
                      default=1)
        workers[kind] = InNetworkJob(NetReduceWorker(other, scatter=kind == CollectiveKind.REDUCE_SCATTER,
                                                     gather=kind == CollectiveKind.ALL_GATHER, largest_op=largest))
    order = job_order(job.graph, rank, job.in_network)
    out = {}
    for n in job.graph.ranks[rank].nodes:
        if runs_in_network(job.graph, n, job.in_network):
            assert isinstance(n, CollectiveNode)
            out[n.id] = (workers[n.collective], order[n.id])
    return out


def in_network_workers(switched: dict[int, tuple[InNetworkJob, int]]) -> list[NetReduceWorker]:
    """The rank's NetReduce workers (one per switch job), in job order."""
    workers = {j.worker.layout.job: j.worker for j, _ in switched.values()}
    return [workers[k] for k in sorted(workers)]


def overtaken(switched: dict[int, tuple[InNetworkJob, int]]) -> Callable[[], bool]:
    """k of N: whether the sum of the rank's next all-reduce in the switches is here already (its k-of-N worker's
    NetReduceWorker.overtaken; always False without one)."""
    workers = {id(j.worker): j.worker for j, _ in switched.values() if j.worker.layout.k_of_n}
    if not workers:
        return lambda: False
    return lambda: any(w.overtaken() for w in workers.values())


def merged_stats(comms: list[Comm]) -> dict[str, object]:
    """The first Comm's stats, its requester's and responder's counters summed over every Comm (one engine)."""
    every = [c.stats() for c in comms]
    stats = every[0]
    for side in ("requester", "responder"):
        total: dict[str, int] = {}
        for one in every:
            part = one.get(side)
            if isinstance(part, dict):
                for k, v in part.items():
                    total[k] = total.get(k, 0) + int(v)
        stats[side] = total
    return stats


def timings(job: GraphJob, rank: int, spans: dict[int, Span], runtime: HostRuntime, t0: float
            ) -> tuple[list[NodeTiming], list[str]]:
    """Every node's timing in emulated seconds from t0, each communication node checked (the checks
    left are done now); and what was wrong (one line per node whose output differs from its definition)."""
    while runtime.background():
        pass
    d = job.dilation
    out, wrong = [], []
    for n in job.graph.ranks[rank].nodes:
        if n.id not in spans:  # a run that stopped: the nodes it never ended
            continue
        s = spans[n.id]
        checked: bool | None = None
        error2, norm2 = runtime.loss.get(n.id, (0.0, 0.0))
        if n.id in runtime.wrong and runtime.ops[n.id].kind != "send":  # a send has no output: its receiver checks
            bad, length = runtime.wrong[n.id]
            # DLCP dropping: zero-filled values are what the job allows; its iteration judges the error they left
            checked = bad == 0 or (runtime.lossy and n.id in runtime.loss)
            if not checked:
                wrong.append(f"rank {rank} node {n.id} ({n.name}, {runtime.ops[n.id].key}): {bad} of {length} "
                             f"elements wrong")
        coll = n if isinstance(n, CollectiveNode) else None
        received = runtime.received.get(n.id)
        out.append(NodeTiming(rank, n.id, node_kind(n), (s.start - t0) / d, (s.end - t0) / d,
                              coll.collective if coll else None, coll.group if coll else None,
                              getattr(n, "nbytes", 0), checked, received.zero_filled if received else 0, error2,
                              norm2, runtime.float_errors.get(n.id)))
    return out, wrong


def keep_partial(job: GraphJob, rank: int, spans: dict[int, Span], runtime: HostRuntime, t0: float, run_dir: Path
                 ) -> None:
    """A rank that stopped mid-graph (its peers gone, a fault, the timeout): the nodes it ended, checked, in
    graph-<rank>.partial.json, so a training run keeps the iterations completed before, as the loop does; never
    a reason to hide the failure (its result says it)."""
    try:
        nodes, _wrong = timings(job, rank, spans, runtime, t0)
        write_timing(run_dir, rank, GraphRun(tuple(nodes)), partial=True)
    except Exception as e:  # the failure is reported already: what ran is kept only where it can be
        print(f"rank {rank}: what ran before the failure could not be kept: {type(e).__name__}: {e}", flush=True)


@dataclass(frozen=True)
class Crashing:
    """The job's `crash` on this rank (JobConfig.crash): it dies abruptly (no clean-up, no result, exit status
    CRASH_STATUS) once iteration `after` has ended, as the loop's worker does (gradswitch/workload/records.py
    crash_if_asked): a training loop's once it reported the iteration in its progress file
    (gradswitch/hosts/iteration.py), the loop without training's and train-digits' before it did
    (gradswitch/hosts/loops.py, digits_job.py), so its peers keep what they keep of the loop's. Either way it drains
    first: its writes of the iteration delivered, every peer completes the iteration it ended (its operations ended
    with their outputs, not their writes' acknowledgements, and a peer lacking its last writes lost the iteration)."""

    after: int
    reports_first: bool  # a training graph's rank: it reports iteration `after` done, then dies

    def before_report(self, done: int) -> bool:
        return not self.reports_first and done > self.after

    def after_report(self, done: int) -> bool:
        return self.reports_first and done > self.after


def run_rank(job: GraphJob, rank: int, run_dir: Path, link: Link | None = None) -> WorkerResult:
    cfg = job.job
    me = cfg.node(rank)
    # with NetReduce jobs beside the graph's own, the rank hears every job's packets (they are all its)
    engine = Engine(link if link is not None else RawSocketLink(me.ifname, me.ip,
                                                                job=None if job.in_network else cfg.job_id), me.ip)
    comm = Comm(cfg, me, engine)
    comm.abort_file = run_dir / "abort"
    switched: dict[int, tuple[InNetworkJob, int]] = {}
    ok, check_failed = False, False
    error: str | None = None
    trace: str | None = None
    source: DataSource | None = None
    scheduler: GraphScheduler | None = None
    runtime: HostRuntime | None = None
    t0 = 0.0
    try:
        ops = ops_of(job.graph, rank)
        source = data_source(job.payload, cfg, rank, ops)
        switched = in_network(job, rank, comm)
        served = on_servers(job, rank, ops)
        regions = prepare(comm, ops, frozenset(switched), served)
        engine.resolve_peers(cfg.start_timeout / 3)
        go = ready_then_go(cfg, run_dir, rank)
        t0 = time.monotonic()
        with contextlib.suppress(ValueError):  # the runner's stamp: one clock for every rank of the machine
            t0 = min(t0, float(go.read_text()))
        runtime = HostRuntime(comm, ops, regions, source, switched, served)
        progress = IterationProgress(job.graph.ranks[rank])
        crash = Crashing(cfg.crash.after, trains(job.graph.ranks[rank])) \
            if cfg.crash is not None and cfg.crash.node == rank else None

        def ended(node_id: int) -> None:
            if progress.ended(node_id):
                if crash is not None and crash.before_report(progress.done):
                    # as the loop's worker dies after its iteration's drain: its operations ended with their outputs,
                    # its last writes may still be on their way to the peers that need them
                    comm.drain()
                    os._exit(CRASH_STATUS)
                write_progress(run_dir, rank, progress.done)  # kept should it be killed (as the loop's)
                if crash is not None and crash.after_report(progress.done):
                    comm.drain()  # its last writes delivered, so that every peer completes the iteration it reported
                    os._exit(CRASH_STATUS)

        scheduler = GraphScheduler(job.graph.ranks[rank], runtime, job.dilation, cfg.iteration_timeout,
                                   slowdown=Slowdown(run_dir, rank).factor, on_end=ended,
                                   host_compute_s=source.compute_s if isinstance(source, DigitsData) else 0.0,
                                   overtaken=overtaken(switched))
        spans = scheduler.run()
        # the graph's operations ended with their outputs, not their writes' acknowledgements (executor.py): the rank
        # stays until every write it posted is acknowledged, resending what a peer still lacks (a transport failure
        # is its error), as the training loop drains at its end
        comm.drain()
        for worker in in_network_workers(switched):  # stay until every peer ran its reductions (a fallback's)
            worker.settle_fallback()
        nodes, wrong = timings(job, rank, spans, runtime, t0)
        write_timing(run_dir, rank, GraphRun(tuple(nodes)))
        if wrong:
            error, check_failed = f"{me.host}: " + "; ".join(wrong), True
        else:
            ok = True
        linger(cfg, engine, run_dir, rank)
    except Exception as e:  # reported to the runner, which names the rank
        error, trace = failed(run_dir, f"rank {rank} on {me.host}", e)
        if scheduler is not None and runtime is not None and scheduler.spans:
            keep_partial(job, rank, scheduler.spans, runtime, t0, run_dir)
    finally:
        stats = merged_stats([comm, *{id(j.worker.comm): j.worker.comm for j, _ in switched.values()}.values()])
        engine.close()
    report = source.report() if source is not None else SourceReport()  # what it did, also of a failed run
    extra = dict(report.extra)
    for worker in in_network_workers(switched):  # the all-reduce job's counters and its fallback (or k of N), as
        if worker.fallback is not None or worker.layout.k_of_n:  # the loop's
            extra.update(worker.report())
    result = worker_result(rank, me.host, str(me.role), ok, report.iterations, stats, extra, error, trace,
                           check_failed)
    write(run_dir, result)
    return result


def run_server(job: GraphJob, node_id: int, run_dir: Path, link: Link | None = None) -> WorkerResult:
    """A parameter server's life in a graph run (algo = ps): its keys of every all-reduce the servers run
    (gradswitch/hosts/graph_ps_server.py), the same ready, go, done and result as a rank's; no node timings."""
    cfg = job.job
    me = cfg.node(node_id)
    engine = Engine(link if link is not None else RawSocketLink(me.ifname, me.ip, job=cfg.job_id), me.ip)
    comm = Comm(cfg, me, engine)
    comm.abort_file = run_dir / "abort"
    ok, error, trace, served = False, None, None, 0
    try:
        keys = ps_server.prepare(comm, job.graph)
        engine.resolve_peers(cfg.start_timeout / 3)
        ready_then_go(cfg, run_dir, node_id)
        served = ps_server.serve(comm, keys)
        ok = True
        linger(cfg, engine, run_dir, node_id)
    except Exception as e:  # reported to the runner, which names the server
        error, trace = failed(run_dir, f"server {node_id} on {me.host}", e)
    finally:
        stats = comm.stats()
        engine.close()
    result = worker_result(node_id, me.host, str(me.role), ok, [], stats, {"keys_served": served}, error, trace)
    write(run_dir, result)
    return result


def run_node(job: GraphJob, node_id: int, run_dir: Path, link: Link | None = None) -> WorkerResult:
    """Node `node_id` of the job: a rank (0..N-1) or one of its parameter servers (the nodes after)."""
    run = run_rank if node_id < job.graph.world_size else run_server
    return run(job, node_id, run_dir, link)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m gradswitch.hosts.graph_main JOB RUN_DIR RANK", file=sys.stderr)
        return 2
    result = run_node(GraphJob.load(Path(args[0])), int(args[2]), Path(args[1]))
    if not result["ok"]:
        print(result.get("error", "failed"), file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
