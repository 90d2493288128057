"""A spec's graph's run reported as the loop's: what the graph engines measured of a spec's job run as its
graph (gradswitch/experiment/training_graph.py spec_graph: its training's, or its all-reduces in a row), turned
into the loop's node results (result-<id>.json's content: iterations, and a training's timeline and plan;
gradswitch/workload/graph_iterations.py), so the loop's report (gradswitch/experiment/report.py summarize) makes
the same results.json of either engine, on either backend (gradswitch/experiment/simulated_graph.py on ns-3,
gradswitch/experiment/runner.py run_on on BMv2)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import cast

from gradswitch.experiment.graph_run import START_MARGIN_S, GraphWorkload, graph_job
from gradswitch.experiment.placement import Placement, training_config
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.training_graph import DIGITS, spec_digits_graph, spec_graph
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.topology.model import Topology
from gradswitch.workload.graph import JobGraph
from gradswitch.workload.graph_iterations import iteration_float_errors, rank_events, rank_iterations
from gradswitch.workload.graph_payload import PayloadKind
from gradswitch.workload.graph_timing import GraphRun, NodeStart, NodeTiming
from gradswitch.workload.job import Algorithm, DType, JobConfig
from gradswitch.workload.plan import plan
from gradswitch.workload.records import CheckKind
from gradswitch.workload.worker_result import WorkerResult, iteration_entry


@dataclass(frozen=True)
class TrainingGraphJob:
    """A spec's training job (or a workload of graphs: trace_graph_job) as the graph engine runs it: the spec to run
    its graph with (no workload of its own, the hosts' algorithms: the graph's in-network all-reduces are NetReduce
    jobs of their own), the graph, the job the ranks run (gradswitch/experiment/graph_run.py graph_job) and the
    dilation."""

    run_spec: ExperimentSpec
    graph: JobGraph
    job: GraphJob
    placement: Placement  # where the ranks (and servers) run
    dilation: float

    @property
    def host_spec(self) -> ExperimentSpec:
        """The run's settings on the switches: the spec's, but the graph's own job id carries the hosts'
        algorithms (the in-network ones are the GraphJob's NetReduce jobs)."""
        return self.run_spec.but(algo=Algorithm.RING)


def training_graph_jobs(spec: ExperimentSpec, topology: Topology) -> list[TrainingGraphJob]:
    """The spec's training jobs (`jobs` of them, each `spec.measurement.iterations` iterations on hosts of its own,
    as the loop places them, parameter servers too) as graph jobs on the topology: a model's training graph, a job's
    all-reduces in a row without training, or train-digits' carrying its real gradients; one-line errors
    (GraphError, ExperimentError) before anything starts."""
    if spec.workload.workload == DIGITS:
        run_spec, graph, dilation, payload = spec, spec_digits_graph(spec), 1.0, PayloadKind.DIGITS
    else:
        run_spec, graph, dilation = spec_graph(spec, spec.measurement.iterations)
        # a float32 job's all-reduces in a row carry the loop's float32 gradients on the hosts, so that its sums'
        # error is known as the loop's (the simulator adds integers; a training graph's all-reduces, buckets and
        # partitions of its tensors, carry synthetic int32 data: their error is not known)
        floats = spec.workload.dtype == DType.FLOAT32 and training_config(spec) is None
        payload = PayloadKind.GRADIENTS if floats and not spec.network.simulated else PayloadKind.SYNTHETIC
    # unshaped links (a run without training may leave bw_mbps out): no rate to bound the graph by, so the loop's
    # deadline, each iteration's
    iterations = spec.measurement.iterations
    timeout = None if spec.network.bw_mbps else START_MARGIN_S + iterations * JobConfig.iteration_timeout
    out = []
    for k in range(spec.workload.jobs):
        job, placement = graph_job(topology, run_spec, graph, dilation=dilation, timeout_s=timeout, job_index=k,
                                   payload=payload)
        out.append(TrainingGraphJob(run_spec, graph, job, placement, dilation))
    return out


def trace_graph_job(spec: ExperimentSpec, topology: Topology, workload: GraphWorkload) -> TrainingGraphJob:
    """A workload of graphs (a trace's) as the graph job its ranks run on the topology: the spec as it is (its
    `workers` the graph's ranks), its dilation the workload's or the spec's; one-line errors (GraphError,
    ExperimentError) before anything starts."""
    job, placement = graph_job(topology, spec, workload.graph, dilation=workload.dilation,
                               timeout_s=workload.timeout_s)
    return TrainingGraphJob(spec, workload.graph, job, placement, job.dilation)


def on_clock(run: GraphRun, go: float, dilation: float) -> GraphRun:
    """A run's times (emulated seconds from the go) on the testbed's clock: go + t x D, as the loop records them."""
    return GraphRun(tuple(replace(n, start_s=go + n.start_s * dilation, end_s=go + n.end_s * dilation)
                          for n in run.nodes),
                    tuple(replace(n, start_s=go + n.start_s * dilation) for n in run.started))


def loop_results(graph: JobGraph, run: GraphRun, ranks: dict[int, WorkerResult], training: JobConfig,
                 check: CheckKind, simulated: bool = False) -> dict[int, WorkerResult]:
    """Each rank's result as the training loop's worker `training.nodes[rank]` reports it (its iterations, timeline
    and plan; the transport's counters its own); a parameter server's as it is. With DLCP dropping (the job's
    `dlcp`), each iteration's zero-filled packets and relative error, judged against its max_relative_error. A
    float32 job's max_abs_error: on the hosts, the largest error of the iteration's sums against the float64 sums
    where its ranks carried float32 gradients (payload `gradients`: iteration_float_errors), else not known; on the
    simulator (`simulated`), 0 for an exact check, as its loop reports it (it adds integers: sim/results.py
    node_result)."""
    in_flight = training.training.in_flight if training.training is not None else 1
    figures: dict[str, int] | None = None  # the training loop's plan; the loop without training reports none
    if training.training is not None:
        p = plan(training)
        figures = {"ops": len(p.ops), "layers": len(p.layers),
                   "largest_op_elements": max(op.elements for op in p.ops)}
    out: dict[int, WorkerResult] = {}
    by_rank: dict[int, list[NodeTiming]] = defaultdict(list)  # each rank's timings, split once (not per rank)
    for t in run.nodes:
        by_rank[t.rank].append(t)
    begun: dict[int, list[NodeStart]] = defaultdict(list)  # a stopped rank's node started and not ended
    for s in run.started:
        begun[s.rank].append(s)
    for node_id, node in ranks.items():
        if node["role"] != "worker" or node_id >= graph.world_size:
            out[node_id] = node
            continue
        mine = GraphRun(tuple(by_rank[node_id]), tuple(begun[node_id]))
        float_errors = iteration_float_errors(graph, mine, node_id)
        iterations = []
        for record in rank_iterations(graph, mine, node_id, check, in_flight, training.dlcp):
            entry = iteration_entry(record)
            if check != CheckKind.EXACT:  # a digest, or no check: the error is not known
                entry["max_abs_error"] = None
            elif training.dtype == DType.FLOAT32 and not simulated:
                # the ranks' decoded sums against the float64 sums where they carried float32 gradients; else (int32
                # data standing in for a training's float32) the sums on the wire are checked, their error not known
                entry["max_abs_error"] = float_errors.get(record.index)
            iterations.append(entry)
        if figures is None:  # all-reduces in a row: the loop's worker keeps its iterations only
            out[node_id] = cast(WorkerResult, {**node, "iterations": iterations})
            continue
        timeline: list[dict[str, object]] = [
            {"iteration": e.iteration, "kind": str(e.kind), "name": e.name, "start": e.start, "end": e.end,
             "lane": e.lane} for e in rank_events(graph, mine, node_id, in_flight)]
        out[node_id] = cast(WorkerResult, {**node, "iterations": iterations, "timeline": timeline, "plan": figures})
    return out
