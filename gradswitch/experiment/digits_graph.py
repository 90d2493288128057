"""`gradswitch experiment --workload train-digits --engine graph`: the digits MLP's training as an execution graph
(gradswitch.workload.generators.digits_graph) on the hosts' graph engine, its all-reduces carrying the real gradients
(payload train-digits, gradswitch/hosts/graph_digits.py), through the spec's network: ring on the hosts or NetReduce in
the switches. The same spec without `engine` runs the iteration loop (gradswitch/hosts/digits_job.py); both train the
same model (same seed and settings: the same parameter digest at the end). Writes graph-results.json (with the
training's accuracy per iteration and every rank's digest) and the graph's timeline, as a trace's run does.
"""

from __future__ import annotations

from pathlib import Path

from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.graph_run import GraphRunReport, run_graph_on
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec
from gradswitch.experiment.testbed import Testbed
from gradswitch.workload.generators import digits_graph
from gradswitch.workload.graph import JobGraph
from gradswitch.workload.graph_payload import PayloadKind


def spec_digits_graph(spec: ExperimentSpec) -> JobGraph:
    """The spec's train-digits job as a graph: its workers, its iterations, named as the run."""
    if spec.workload.workload != "train-digits":
        raise ExperimentError(f"{spec.label}: workload {spec.workload.workload!r}: the digits graph is workload "
                              "train-digits'")
    return digits_graph(spec.network.workers, spec.measurement.iterations, name=spec.label)


def _checked(spec: ExperimentSpec) -> ExperimentSpec:
    spec.validate()
    if spec.algorithm.engine != Engine.GRAPH:
        raise ExperimentError(f"{spec.label}: engine = {spec.algorithm.engine}: the iteration loop runs it (runner.py)")
    return spec


def run_digits_graph(spec: ExperimentSpec, out_dir: Path) -> GraphRunReport:
    """Run the spec (engine = graph) on a BMv2 network of its own; the report is also out_dir/graph-results.json,
    its timeline beside it."""
    return run_graph_spec(_checked(spec), spec_digits_graph(spec), out_dir, PayloadKind.DIGITS)


def run_digits_graph_on(net: Testbed, spec: ExperimentSpec, out_dir: Path) -> GraphRunReport:
    """Run the spec (engine = graph) on the running network `net`; the report is also out_dir/graph-results.json."""
    return run_graph_on(net, _checked(spec), spec_digits_graph(spec), out_dir, payload=PayloadKind.DIGITS)
