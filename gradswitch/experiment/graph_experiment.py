"""`gradswitch experiment --workload-et DIR/PREFIX`: a workload given as Chakra execution traces run on
either backend, reported alike.

The traces are read and checked before anything starts (gradswitch.workload.chakra.read_traces: one line naming
the file, node and problem). The job has as many workers as the traces have ranks; what a trace's run has
no use for (a size, a workload, iterations, ...) is refused in one line (trace_problems: `gradswitch
compare` refuses the same in a spec's trace runs, gradswitch/experiment/compare_traces.py). It runs as every spec
does (runner.run_experiment): on BMv2 the hosts' graph engine runs it (runner.run_on), on ns-3 the simulator's
(gradswitch/experiment/simulated_graph.py), with the same job (placement, transport, window shared among the groups
a rank receives from; with algo = netreduce the all-reduce's NetReduce job) so that both backends run one job. Both
write the run's results.json, the one type every run writes, with the graphs' figures as its `graph` section
(gradswitch/experiment/trace_results.py), read back as a GraphRunReport (graph_run.read_graph_report).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from gradswitch.experiment.graph_run import (
    RESULTS,
    SEND_RECV,
    GraphRunReport,
    GraphWorkload,
    graph_spec,
    read_graph_report,
)
from gradswitch.experiment.graph_timeline import write_graph_timeline
from gradswitch.experiment.report import fault_line
from gradswitch.experiment.runner import run_experiment, run_on
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec, RingOrder, SpecError, named
from gradswitch.experiment.testbed import Testbed
from gradswitch.roce.qp import Mode
from gradswitch.workload.chakra import read_traces
from gradswitch.workload.graph import JobGraph
from gradswitch.workload.job import Algorithm

# What a trace's run has no use for: its traces give the sizes, the computation and how often each runs, and it
# runs one job (spec.problems keeps the rest: a worker's fault on a trace, NetReduce k of N, ...).
TRACE_IGNORES = ("size_bytes", "workload", "scale", "dtype", "float_mode", "iterations", "servers", "ps_key_bytes",
                 "emulate", "sync", "scheduling", "bucket_mb", "partition_mb", "warmup", "in_flight", "crash", "jobs",
                 "colocate_servers", "tensorlights", "tensorlights_rotate_s", "netreduce_k", "netreduce_deadline_ms")
PS_KEYS = ("servers", "ps_key_bytes")  # what a trace's run through parameter servers (algo = ps) uses


def trace_problems(spec: ExperimentSpec, graph: JobGraph, given: Collection[str]) -> list[str]:
    """What a run of the spec's traces (read: `graph`) refuses, one line each: keys a trace's run ignores among
    those `given` (a spec's keys, the options typed), a `workers` given that differs from the traces' ranks, no link
    rate."""
    out = []
    used = PS_KEYS if spec.algorithm.algo == Algorithm.PS else ()
    ignored = [named(k) for k in TRACE_IGNORES if k in given and k not in used]
    if ignored:
        them = "it" if len(ignored) == 1 else "them"
        out.append(f"{', '.join(ignored)}: a trace's run (workload_et) has no use for {them}: the traces give the "
                   f"sizes, the computation and how often each runs; leave {them} out")
    if "workers" in given and spec.network.workers != graph.world_size:
        out.append(f"workers = {spec.network.workers}, but the traces {spec.workload.workload_et} have "
                   f"{graph.world_size} ranks; leave workers out (the traces set it) or give {graph.world_size}")
    if not spec.network.bw_mbps:
        out.append(f"{named('bw_mbps')} is not set: a trace's run needs link rates (its bounds are at the link "
                   "rate): give it, e.g. 8 on BMv2 or 100000 on ns3")
    return out


def load_graph(spec: ExperimentSpec, given: Collection[str] = ()) -> tuple[ExperimentSpec, JobGraph]:
    """The spec's traces, read and checked, and the spec with workers = their ranks; SpecError listing what
    trace_problems refuses (`given`: the keys the spec file and the command line set)."""
    assert spec.workload.workload_et is not None
    graph = read_traces(Path(spec.workload.workload_et))
    problems = trace_problems(spec, graph, given)
    if problems:
        raise SpecError("\n".join(problems))
    spec = spec.but(workers=graph.world_size)
    spec.validate()
    return spec, graph


def run_graph_spec(spec: ExperimentSpec, graph: JobGraph, out_dir: Path, sim_dilation: float = 1.0
                   ) -> GraphRunReport:
    """Run the graph on the spec's backend as the spec's workload (runner.run_experiment, the one way from a spec
    to its result), its communication carrying synthetic data; the report is out_dir/results.json's (its `graph`),
    its timeline out_dir/graph-timeline.{json,png} (compute and each collective per rank). `sim_dilation`: on ns-3,
    the computation stretched by it on the simulated clock and the times reported divided by it, as a BMv2 run
    dilated by it does (the twin of such a run)."""
    if spec.network.simulated and sim_dilation <= 0:
        raise ExperimentError(f"{graph.name}: a dilation of {sim_dilation:g}: give one above 0 (1: none)")
    out_dir = out_dir.resolve()
    run_experiment(spec, out_dir, progress=False,
                   workload=GraphWorkload(graph, dilation=sim_dilation if spec.network.simulated else None))
    return graph_report_of(spec, graph, out_dir)


def run_graph(net: Testbed, graph: JobGraph, run_dir: Path, *, bw_mbps: float, seed: int = 1,
              ring_order: RingOrder = RingOrder.LEAVES, transport: Mode = Mode.GBN, loss_pct: float = 0.0,
              dilation: float | None = None, timeout_s: float | None = None, algo: Algorithm = Algorithm.RING,
              servers: int = 1, ps_key_bytes: int = ExperimentSpec().algorithm.ps_key_bytes) -> GraphRunReport:
    """Run `graph` on the running network `net` (runner.run_on) with an experiment's settings made for it
    (graph_run.graph_spec); the report is run_dir/results.json's."""
    spec = graph_spec(graph, bw_mbps=bw_mbps, seed=seed, ring_order=ring_order, transport=transport,
                      loss_pct=loss_pct, algo=algo, servers=servers, ps_key_bytes=ps_key_bytes)
    return run_workload_on(net, spec, graph, run_dir, dilation=dilation, timeout_s=timeout_s)


def run_workload_on(net: Testbed, spec: ExperimentSpec, graph: JobGraph, run_dir: Path, *,
                    dilation: float | None = None, timeout_s: float | None = None) -> GraphRunReport:
    """runner.run_on with `graph` as the spec's workload (GraphWorkload: `dilation` None, the spec's; `timeout_s`
    None, sized from the graph) on the running network `net`; the report run_dir/results.json holds."""
    run_on(net, spec, run_dir, False, GraphWorkload(graph, dilation, timeout_s))
    return read_graph_report(run_dir.resolve() / RESULTS)


def graph_report_of(spec: ExperimentSpec, graph: JobGraph, out_dir: Path) -> GraphRunReport:
    """The report of a graph's run in out_dir (its results.json), its timeline drawn beside it."""
    report = read_graph_report(out_dir / RESULTS)
    write_graph_timeline(report.run, report.hosts, out_dir, f"{graph.name}: {placed(report)} on "
                         f"{spec.network.backend} at {report.bw_mbps:g} Mb/s")
    return report


def placed(report: GraphRunReport) -> str:
    """`4 ranks`, or `4 ranks and 2 parameter servers` (the hosts after the ranks)."""
    ranks = len({n.rank for n in report.run.nodes})
    servers = len(report.hosts) - ranks
    return f"{ranks} ranks" + (f" and {servers} parameter server{'s' if servers > 1 else ''}" if servers > 0 else "")


def format_graph_table(report: GraphRunReport, backend: str) -> str:
    """What a person reads after the run: per collective type the algorithm that ran it (the hosts' or
    netreduce, in the switches) and its time against its link-rate bound, the job's time, exposed
    communication, the busiest link, the checks."""
    lines = [f"{report.graph}: {placed(report)} on {backend} at {report.bw_mbps:g} Mb/s"
             + (f" (dilation {report.dilation:g})" if report.dilation != 1 else ""),
             *[f"  fault {r.fault.label}: {fault_line(r)}" for r in report.faults],
             f"{'collective':<16}{'algorithm':<12}{'count':>6}{'time s':>12}{'bound s':>12}{'time/bound':>12}"
             f"{'worst':>8}"]
    algorithms: dict[str, set[str]] = {}
    for c in report.collectives:
        algorithms.setdefault(c.collective, set()).add(c.algorithm)
    for k in report.by_kind:
        name = "send/recv" if k.kind == SEND_RECV else k.kind
        algorithm = "direct" if k.kind == SEND_RECV else "+".join(sorted(algorithms.get(k.kind, set()))) or "-"
        ratio = k.time_s / k.bound_s if k.bound_s > 0 else float("nan")
        lines.append(f"{name:<16}{algorithm:<12}{k.count:>6}{k.time_s:>12.4g}{k.bound_s:>12.4g}{ratio:>12.2f}"
                     f"{k.worst_ratio:>8.2f}")
    exposed = max(report.exposed_s.values(), default=0.0)
    lines.append(f"job {report.job_s:.4g} s; exposed communication up to {exposed:.4g} s on a rank")
    if report.busiest_link is not None and report.busiest_link_load is not None:
        paced = "" if report.ideal_link_load is None or report.ideal_link_load >= 1 else (
            f" (a link-paced run keeps {report.ideal_link_load:.0%} on its flows' paths: steps that share an uplink "
            "wait for it, a parameter server's link out for its first key)")
        lines.append(f"busiest link {report.busiest_link}: {report.busiest_link_bytes} bytes, "
                     f"{report.busiest_link_load:.0%} loaded{paced}")
    if report.resent_packets or report.link_drops:
        dropped = "" if report.link_drops is None else f", {report.link_drops} dropped by the links' queues"
        lines.append(f"packets sent again: {report.resent_packets}{dropped}")
    if report.machine_bound:
        lines.append(f"MACHINE-BOUND: {report.machine_bound_reason}")
    lines.append("checks: every output exact" if report.checked else
                 "checks FAILED: " + "; ".join(report.errors or ("an output was not checked",)))
    return "\n".join(lines)
