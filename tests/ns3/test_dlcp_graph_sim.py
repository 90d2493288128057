"""bench.crossval's DLCP pair (VGG-16 priority partitions under bulk TCP on the leaf-spine, baseline-class and DLCP
priority) as execution graphs on the simulator's graph engine iterates at the pace of the simulator's training
loop, each partition's all-reduce in the layer class the loop's writes carry (bench/crossval_training_graph.py's
`dlcp-graph` part runs it on both graph engines)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from bench.crossval import dlcp_specs, simulated
from bench.scaling_graph import TOLERANCE
from bench.testbed_costs import load_costs
from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.runner import run_experiment
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.training_graph import spec_training_graph
from gradswitch.workload.generators import iteration_times
from gradswitch.workload.graph import CollectiveNode

pytestmark = pytest.mark.ns3


@pytest.mark.parametrize("spec", dlcp_specs(), ids=lambda s: s.label)
def test_the_dlcp_pair_iterates_on_the_graph_engine_as_the_training_loop_does(tmp_path: Path,
                                                                              spec: ExperimentSpec) -> None:
    costs = load_costs()
    loop = run_experiment(simulated(spec, costs), tmp_path / "loop")
    training = loop["training"]
    assert loop["ok"] and training is not None
    run_spec, graph, dilation = spec_training_graph(spec, spec.measurement.iterations)
    classes = {n.layer_class for n in graph.ranks[0].nodes if isinstance(n, CollectiveNode)}
    assert len(classes) > 3  # partitions of several layer classes: what DLCP priority orders
    report = run_graph_spec(simulated(run_spec, costs), graph, tmp_path / "graph", sim_dilation=dilation)
    assert report.checked and not report.errors
    background = json.loads((tmp_path / "graph" / "sim" / "sim-results.json").read_text())["background"]
    assert background["flows"] == spec.workload.background_flows and background["goodput_mbps"] > 1  # the bulk TCP ran
    iteration_s = statistics.median(iteration_times(graph, report.run)[spec.measurement.warmup:])
    assert iteration_s == pytest.approx(training["iteration_s_real"], rel=TOLERANCE)
