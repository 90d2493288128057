"""`engine = graph` on the simulator: a spec's training job run as an execution graph by the simulator's graph
engine (gs-graph-rank.cc), reported as the training loop's run is: the same results.json, table, plots and
timeline (gradswitch/experiment/simulated.py), from each rank's node timings
(gradswitch/workload/graph_iterations.py gives the loop's iterations and timeline from them).

The graph is the spec's job (gradswitch/experiment/training_graph.py spec_training_graph: its model, scale,
emulated GPUs, sync, buckets), its computation stretched by the spec's dilation D as the loop's is on the
simulator, so every time in results.json is the simulated run's and `training` divides by D, as for the loop.
Where the graph engine does not yet run what the spec asks, spec.engine_problems refuses it before anything starts.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import cast

from gradswitch.experiment.graph_run import graph_job
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.run_plan import plan_run, sim_settings
from gradswitch.experiment.simulated import report_simulated
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec
from gradswitch.experiment.training_graph import spec_training_graph
from gradswitch.sim import SimError
from gradswitch.sim.build import status
from gradswitch.sim.graph_run import run_graph as simulate_graph
from gradswitch.sim.results import NodeResult
from gradswitch.sim.sim_config import check_mode
from gradswitch.sim.sim_settings import CheckMode
from gradswitch.workload.graph import GraphError, JobGraph
from gradswitch.workload.graph_iterations import rank_events, rank_iterations
from gradswitch.workload.graph_timing import GraphRun
from gradswitch.workload.job import JobConfig
from gradswitch.workload.plan import plan
from gradswitch.workload.records import CheckKind
from gradswitch.workload.worker_result import iteration_entry


def run_simulated_graph(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None) -> Results:
    """Run one spec's training job on the simulator's graph engine; returns (and writes) results.json's content."""
    spec.validate()
    missing = status().missing()
    if missing:
        raise ExperimentError(f"the ns-3 simulator cannot run: {missing}")
    out_dir.mkdir(parents=True, exist_ok=True)
    run_plan = plan_run(spec)
    run_plan.save(out_dir)
    training = run_plan.first
    try:
        run_spec, graph, dilation = spec_training_graph(spec, spec.iterations)
        job, placement = graph_job(run_plan.topology, run_spec, graph, dilation=dilation)
    except GraphError as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    settings = sim_settings(run_spec, [job.job], placement, sys.stderr.isatty() if progress is None else progress)
    # the loop's check, per iteration's elements (the graph's AUTO counts every iteration's: a weaker check sooner)
    settings = replace(settings, check=check_mode(training, settings))
    started = time.time()
    hostfile = Path(spec.hostfile) if spec.hostfile is not None else None
    try:
        result = simulate_graph(graph.dilated(dilation) if dilation != 1.0 else graph, run_plan.topology, settings,
                                out_dir / "sim", job=job.job, mpi_ranks=spec.ranks, hostfile=hostfile,
                                in_network=job.in_network)
    except (SimError, GraphError) as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    nodes = {training.job_id: loop_results(graph, result.run, result.sim.nodes[job.job.job_id], training,
                                           result.check)}
    return report_simulated(spec, [training], run_plan.topology, replace(result.sim, nodes=nodes), started, out_dir)


def loop_results(graph: JobGraph, run: GraphRun, ranks: dict[int, NodeResult], training: JobConfig,
                 check: CheckMode) -> dict[int, NodeResult]:
    """Each rank's result as the training loop's worker `training.nodes[rank]` reports it (its iterations, timeline
    and plan; the transport's counters the simulator's own); a parameter server's as the simulator gave it."""
    kind = CheckKind(str(check))
    in_flight = training.training.in_flight if training.training is not None else 1
    p = plan(training)
    figures = {"ops": len(p.ops), "layers": len(p.layers), "largest_op_elements": max(op.elements for op in p.ops)}
    out: dict[int, NodeResult] = {}
    for node_id, node in ranks.items():
        if node["role"] != "worker" or node_id >= graph.world_size:
            out[node_id] = node
            continue
        iterations = []
        for record in rank_iterations(graph, run, node_id, kind, in_flight):
            entry = iteration_entry(record)
            if kind != CheckKind.EXACT:
                entry["max_abs_error"] = None  # a digest, or no check: the error is not known
            iterations.append(entry)
        timeline: list[dict[str, object]] = [
            {"iteration": e.iteration, "kind": str(e.kind), "name": e.name, "start": e.start, "end": e.end,
             "lane": e.lane} for e in rank_events(graph, run, node_id, in_flight)]
        out[node_id] = cast(NodeResult, {**node, "iterations": iterations, "timeline": timeline, "plan": figures})
    return out
