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

from gradswitch.experiment.graph_as_loop import loop_results, training_graph_jobs
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.run_plan import sim_settings
from gradswitch.experiment.simulated import planned, report_simulated
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec
from gradswitch.sim import SimError
from gradswitch.sim.graph_run import PlacedGraph, run_graphs
from gradswitch.sim.sim_config import check_mode
from gradswitch.workload.graph import GraphError
from gradswitch.workload.records import CheckKind


def run_simulated_graph(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None) -> Results:
    """Run one spec's training job on the simulator's graph engine; returns (and writes) results.json's content."""
    run_plan = planned(spec, out_dir)
    trainings = list(run_plan.jobs)
    try:
        tgs = training_graph_jobs(spec, run_plan.topology)
    except GraphError as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    first = tgs[0]
    settings = sim_settings(first.run_spec, [tg.job.job for tg in tgs], first.placement,
                            sys.stderr.isatty() if progress is None else progress)
    # the loop's check, per iteration's elements (the graph's AUTO counts every iteration's: a weaker check sooner)
    settings = replace(settings, check=check_mode(trainings[0], settings))
    started = time.time()
    hostfile = Path(spec.network.hostfile) if spec.network.hostfile is not None else None
    placed = [PlacedGraph(tg.graph.dilated(tg.dilation) if tg.dilation != 1.0 else tg.graph, tg.job.job,
                          tg.job.in_network) for tg in tgs]
    try:
        results = run_graphs(placed, run_plan.topology, settings, out_dir / "sim", mpi_ranks=spec.network.ranks,
                             hostfile=hostfile)
    except (SimError, GraphError) as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    nodes = {cfg.job_id: loop_results(tg.graph, result.run, result.sim.nodes[cfg.job_id], cfg,
                                      CheckKind(str(result.check)))
             for tg, cfg, result in zip(tgs, trainings, results, strict=True)}
    return report_simulated(spec, trainings, run_plan.topology, replace(results[0].sim, nodes=nodes), started,
                            out_dir)
