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

from gradswitch.experiment.graph_as_loop import loop_results, training_graph_job
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.run_plan import plan_run, sim_settings
from gradswitch.experiment.simulated import report_simulated
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec
from gradswitch.sim import SimError
from gradswitch.sim.build import status
from gradswitch.sim.graph_run import run_graph as simulate_graph
from gradswitch.sim.sim_config import check_mode
from gradswitch.workload.graph import GraphError
from gradswitch.workload.records import CheckKind


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
        tg = training_graph_job(spec, run_plan.topology)
    except GraphError as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    job, graph, dilation = tg.job, tg.graph, tg.dilation
    settings = sim_settings(tg.run_spec, [job.job], tg.placement, sys.stderr.isatty() if progress is None else progress)
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
                                           CheckKind(str(result.check)))}
    return report_simulated(spec, [training], run_plan.topology, replace(result.sim, nodes=nodes), started, out_dir)
