"""`engine = graph` on the simulator: a spec's training job run as an execution graph by the simulator's graph
engine (gs-graph-rank.cc), reported as the training loop's run is: the same results.json, table, plots and
timeline (gradswitch/experiment/simulated.py), from each rank's node timings
(gradswitch/workload/graph_iterations.py gives the loop's iterations and timeline from them). `simulate_spec` is the
run before its report (the plan, the network simulated and the simulated run with the loop's node results): the
studies that read their own figures of a simulated run (bench.sim_faults, bench.sim_netreduce_fallback, the goodput
study, the simulator's own speed and MPI benchmarks bench.ns3_speed and bench.mpi_scaling) run their specs through it;
`spec_sim_config` is the configuration it hands the simulator, for a tool that runs the simulator itself
(bench.ns3_profile, under `perf record`).

The graph is the spec's job (gradswitch/experiment/training_graph.py spec_training_graph: its model, scale,
emulated GPUs, sync, buckets), its computation stretched by the spec's dilation D as the loop's is on the
simulator, so every time in results.json is the simulated run's and `training` divides by D, as for the loop.
Where the graph engine does not yet run what the spec asks, spec.engine_problems refuses it before anything starts.

A workload given as graphs (a trace's, workload_et; gradswitch/experiment/graph_run.py GraphWorkload) runs here too,
placed as on BMv2 (graph_as_loop.trace_graph_job), and its results.json holds the graphs' figures (`graph`,
gradswitch/experiment/trace_results.py), as a BMv2 run's does.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gradswitch.experiment import results_file
from gradswitch.experiment.graph_as_loop import TrainingGraphJob, loop_results, trace_graph_job, training_graph_jobs
from gradswitch.experiment.graph_run import GraphWorkload, resent_packets, summarize
from gradswitch.experiment.report import interrupting
from gradswitch.experiment.results_file import Outcome, Results
from gradswitch.experiment.run_plan import RunPlan, sim_settings
from gradswitch.experiment.simulated import link_usage, planned, report_simulated, speed
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec
from gradswitch.experiment.trace_results import trace_results
from gradswitch.sim import SimError, SimResult
from gradswitch.sim.faults import fault_records
from gradswitch.sim.graph_run import GraphSimResult, PlacedGraph, graphs_config, run_graphs
from gradswitch.sim.ranks import MpiSync
from gradswitch.sim.sim_config import check_mode
from gradswitch.sim.sim_settings import EventList, SimSettings
from gradswitch.topology.model import Topology
from gradswitch.workload.graph import GraphError
from gradswitch.workload.job import JobConfig
from gradswitch.workload.records import CheckKind


@dataclass(frozen=True)
class SimulatedRun:
    """A spec's jobs run as graphs on the simulator, before their report: the run's plan, the network simulated and
    the simulated run, each job's nodes reported as the training loop's workers report theirs (loop_results: their
    iterations with start, end and check; a crashed rank's error), its faults' measurements as the simulator made
    them. What `gradswitch run` reports from (report_simulated), and what a study reads its own figures from."""

    plan: RunPlan
    network: Topology  # the plan's topology, or the one the run was given (the same hosts, an element gone)
    result: SimResult
    started: float  # the wall clock (time.time()) when the simulation began

    @property
    def jobs(self) -> list[JobConfig]:
        """The spec's jobs (the loop's configurations: each job's nodes in `result.nodes` are theirs)."""
        return list(self.plan.jobs)


def simulate_spec(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
                  network: Topology | None = None, sync: MpiSync = MpiSync.BARRIER) -> SimulatedRun:
    """Run one spec's jobs on the simulator's graph engine (the plan computed once, saved in out_dir, the simulator's
    output under out_dir/sim). `network`: the topology to simulate instead of the plan's, with the same hosts (the
    plan's without a failed element: the jobs are placed on the plan's, and the simulator routes around what is
    gone). `sync`: how the spec's MPI ranks (`ranks` > 1) keep in step. ExperimentError (one line) when the run
    cannot be, or when the spec names the loop."""
    prepared = _prepare(spec, out_dir, progress, network)
    started = time.time()
    results = _simulate(spec, prepared.tgs, prepared.topology, prepared.settings, out_dir, sync)
    trainings = list(prepared.plan.jobs)
    nodes = {cfg.job_id: loop_results(tg.graph, result.run, result.sim.nodes[cfg.job_id], cfg,
                                      CheckKind(str(result.check)), simulated=True)
             for tg, cfg, result in zip(prepared.tgs, trainings, results, strict=True)}
    return SimulatedRun(prepared.plan, prepared.topology, replace(results[0].sim, nodes=nodes), started)


def spec_sim_config(spec: ExperimentSpec, out_dir: Path, scheduler: EventList | None = None) -> dict[str, Any]:
    """The simulator's configuration of simulate_spec's run of the spec, on one process (the plan saved in out_dir),
    for a tool that runs gradswitch-sim itself (bench.ns3_profile: under `perf record`); `scheduler`: ns-3's event
    list instead of the default. ExperimentError (one line) as simulate_spec; the simulator need not be built here
    (the tool may run a build of its own)."""
    prepared = _prepare(spec, out_dir, False, None, simulator=False)
    settings = prepared.settings if scheduler is None else replace(prepared.settings, scheduler=scheduler)
    try:
        config, _jobs = graphs_config(_placed(prepared.tgs), prepared.topology, settings)
    except (SimError, GraphError) as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    return config


@dataclass(frozen=True)
class _Prepared:
    """What a spec's graph run needs before the simulator starts: its plan, its jobs as graphs, the network to
    simulate and the simulator's settings."""

    plan: RunPlan
    tgs: list[TrainingGraphJob]
    topology: Topology
    settings: SimSettings


def _prepare(spec: ExperimentSpec, out_dir: Path, progress: bool | None, network: Topology | None,
             simulator: bool = True) -> _Prepared:
    """The spec's run up to the simulator (its plan saved in out_dir; the simulator checked there when `simulator`);
    ExperimentError (one line) when it cannot be."""
    if spec.algorithm.engine != Engine.GRAPH:
        raise ExperimentError(f"{spec.label}: engine = {spec.algorithm.engine}: simulate_spec runs the graph engine; "
                              "leave `engine` out (or give graph)")
    run_plan = planned(spec, out_dir, simulator)
    try:
        tgs = training_graph_jobs(spec, run_plan.topology)
    except GraphError as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    first = tgs[0]
    settings = sim_settings(first.run_spec, [tg.job.job for tg in tgs], first.placement,
                            sys.stderr.isatty() if progress is None else progress)
    # the loop's check, per iteration's elements (the graph's AUTO counts every iteration's: a weaker check sooner)
    settings = replace(settings, check=check_mode(run_plan.jobs[0], settings))
    topology = network if network is not None else run_plan.topology
    if {h.name for h in topology.hosts} != {h.name for h in run_plan.topology.hosts}:
        raise ExperimentError(f"{spec.label}: the network to simulate ({topology.name}) has other hosts than the "
                              f"plan's ({run_plan.topology.name}): give one with the same hosts")
    return _Prepared(run_plan, tgs, topology, settings)


def _placed(tgs: list[TrainingGraphJob]) -> list[PlacedGraph]:
    """The jobs' graphs as the simulator runs them: each stretched by its dilation."""
    return [PlacedGraph(tg.graph.dilated(tg.dilation) if tg.dilation != 1.0 else tg.graph, tg.job.job,
                        tg.job.in_network) for tg in tgs]


def _simulate(spec: ExperimentSpec, tgs: list[TrainingGraphJob], topology: Topology, settings: SimSettings,
              out_dir: Path, sync: MpiSync = MpiSync.BARRIER) -> list[GraphSimResult]:
    """The jobs' graphs (each stretched by its dilation) run on the simulator, its output under out_dir/sim, on the
    spec's MPI ranks (kept in step by `sync`); ExperimentError (one line) when the simulator or a graph refuses."""
    hostfile = Path(spec.network.hostfile) if spec.network.hostfile is not None else None
    try:
        return run_graphs(_placed(tgs), topology, settings, out_dir / "sim", mpi_ranks=spec.network.ranks,
                          hostfile=hostfile, sync=sync)
    except (SimError, GraphError) as e:
        raise ExperimentError(f"{spec.label}: {e}") from None


def run_simulated_graph(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
                        workload: GraphWorkload | None = None) -> Results:
    """Run one spec's training job (or `workload`, its graphs given: a trace's) on the simulator's graph engine;
    returns (and writes) results.json's content."""
    if workload is None:
        run = simulate_spec(spec, out_dir, progress)
        return report_simulated(spec, run.jobs, run.plan.topology, run.result, run.started, out_dir)
    run_plan = planned(spec, out_dir)
    try:
        tg = trace_graph_job(spec, run_plan.topology, workload)
    except GraphError as e:
        raise ExperimentError(f"{spec.label}: {e}") from None
    settings = sim_settings(tg.run_spec, [tg.job.job], tg.placement,
                            sys.stderr.isatty() if progress is None else progress)
    started = time.time()
    results = _simulate(spec, [tg], run_plan.topology, settings, out_dir)
    return graph_results(spec, tg, results[0], run_plan.topology, started, out_dir)


def graph_results(spec: ExperimentSpec, tg: TrainingGraphJob, result: GraphSimResult, topology: Topology,
                  started: float, out_dir: Path) -> Results:
    """results.json of a simulated run of a workload of graphs (trace_results: the loop's figures of its one run and
    the graphs' own, `graph`; its times the emulated cluster's, the simulated ones over the dilation), written in
    out_dir. A simulated run is never judged machine-bound (machine_bound null, as its report had it): its clock is the
    model's, not the machine's."""
    job, d = tg.job, tg.dilation
    run = result.run.undilated(d) if d != 1.0 else result.run
    errors = () if result.ok() else tuple(
        f"rank {n.rank} node {n.node_id}: output not what its {n.collective or n.kind} defines"
        for n in run.nodes if n.checked is False) or ("a rank did not finish its graph",)
    faults = tuple(fault_records(spec.faults.faults, list(result.sim.faults), result.sim.nodes, [job.job],
                                 result.sim.speed.sim_s))
    errors = tuple(f"{who}: {line}" for who, line in interrupting(faults).items()) + errors  # the fault first
    assert spec.network.bw_mbps is not None  # graph_job refused a spec without
    nodes = result.sim.nodes[job.job.job_id]
    usage = link_usage(topology, result.sim)
    report = summarize(job, run, list(result.hosts), spec.network.bw_mbps, usage, None, errors, result.sim.speed.wall_s,
                       resent_packets(nodes.values()))
    report = replace(report, faults=faults, machine_bound=None, machine_bound_reason=None)
    body = trace_results(spec, tg.graph, report, started, nodes.values(), usage, result.sim.switches,
                         job.job.job_id)
    body["simulator"] = speed(result.sim, spec)
    if result.sim.time_limit_hit:
        body["ok"], body["outcome"] = False, str(Outcome.FAILED)
        body["errors"]["simulator"] = f"stopped at its simulated time limit ({result.sim.speed.sim_s:.3g} s)"
    return results_file.write(out_dir / "results.json", body)
