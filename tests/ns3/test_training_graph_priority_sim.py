"""ByteScheduler's priority partitions as an execution graph (gradswitch/workload/generators/training.py: each
all-reduce started by its dependencies when the training loop would start it) iterate on the simulator's graph engine at
the pace of the simulator's training loop (gs-training.cc), on the scaling study's fat tree with its emulated V100s at 1
Gb/s (where ResNet-50's partitions queue behind each other on the links), with ring all-reduce and with NetReduce in the
switches: a graph whose partitions started as soon as their own gradients existed would run them all at once, sharing
the links, and iterate at another pace."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from bench.scaling import scaling_spec
from bench.scaling_graph import TOLERANCE
from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.runner import run_experiment
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.experiment.training_graph import spec_training_graph
from gradswitch.workload.generators import iteration_times

pytestmark = pytest.mark.ns3

ITERATIONS = 3
RATE_MBPS = 1000


@pytest.mark.parametrize("algo", ["ring", "netreduce-hier"])
def test_priority_partitions_iterate_as_the_training_loop_does(tmp_path: Path, algo: str) -> None:
    spec = spec_from_dict({"sync": "layer", "scheduling": "priority", "partition_mb": 4, "iterations": ITERATIONS},
                          scaling_spec("resnet50", 8, algo, RATE_MBPS))
    loop = run_experiment(spec, tmp_path / "loop")
    training = loop["training"]
    assert loop["ok"] and training is not None
    run_spec, graph, _ = spec_training_graph(spec, ITERATIONS)
    collectives = sum(1 for n in graph.ranks[0].nodes if n.name.startswith("it0.allreduce."))
    assert collectives > 20  # partitions that queue behind each other: the start rule matters
    report = run_graph_spec(run_spec, graph, tmp_path / "graph")
    assert report.checked and not report.errors
    iteration_s = statistics.median(iteration_times(graph, report.run)[spec.measurement.warmup:])
    assert iteration_s == pytest.approx(training["iteration_s_real"], rel=TOLERANCE)
