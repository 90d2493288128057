"""The generated nodes' names (gradswitch/workload/node_names.py): one parser for every generator's graph, and every
generator's names parse back to the iteration and label it gave (a generator that names a node another way fails
here before the readers of names (iterations, crashes, progress, DLCP's thresholds) miss it)."""

from __future__ import annotations

import pytest

from gradswitch.workload.generators import digits_graph, plain_graph, training_graph, training_job
from gradswitch.workload.graph import JobGraph
from gradswitch.workload.job import Algorithm, Node, Role
from gradswitch.workload.job import JobConfig as Job
from gradswitch.workload.node_names import (
    DIGITS_LABELS,
    TRAINING_LABELS,
    NodeLabel,
    NodeName,
    iteration_head,
    iteration_prefix,
    node_name,
    parse_node_name,
)
from gradswitch.workload.pytorch.job_graph import job_graph
from gradswitch.workload.pytorch.profile import BucketProfile, LayerProfile, ModelProfile


def test_a_name_and_its_parts_go_both_ways() -> None:
    assert node_name(3, NodeLabel.FORWARD, "conv1") == "it3.fwd.conv1" == str(NodeName(3, NodeLabel.FORWARD, "conv1"))
    assert node_name(12, NodeLabel.GRADIENT) == "it12.gradient"
    assert node_name(0, NodeLabel.DIGITS_ALL_REDUCE, "fc2.bias") == "it0.all_reduce.fc2.bias"
    assert parse_node_name("it0.all_reduce.fc2.bias") == NodeName(0, NodeLabel.DIGITS_ALL_REDUCE, "fc2.bias")
    assert parse_node_name("it7.allreduce.4") == NodeName(7, NodeLabel.ALL_REDUCE, "4")
    assert iteration_head(5) == "it5." and iteration_prefix("it5.optimizer") == 5


@pytest.mark.parametrize("name", ["allreduce.0", "itx.fwd.a", "it.fwd.a", "it3", "it3.unknown.a", "it\u00b2.fwd.a",
                                  "comm_send_node_7", ""])
def test_a_name_no_generator_gives_parses_to_none(name: str) -> None:
    assert parse_node_name(name) is None and iteration_prefix(name) is None


def _graphs() -> dict[str, JobGraph]:
    profile = ModelProfile("tiny", "cpu", "2.13.0+cpu", 5, 2, "(4, 10) float32",
                           (LayerProfile("fc1", "Linear", 0.01, 0.02, 1000),
                            LayerProfile("fc2", "Linear", 0.003, 0.006, 200)),
                           (BucketProfile(0, 200, ("fc2.bias",), "fc2"), BucketProfile(1, 1000, ("fc1.bias",), "fc1")),
                           0.0005)
    plain = Job(Algorithm.RING, tuple(Node(i, Role.WORKER, f"h{i + 1}", f"10.0.0.{i + 1}") for i in range(4)), 3,
                "resnet50")
    return {"training": training_graph(training_job("resnet50", 2, iterations=3)), "plain": plain_graph(plain),
            "digits": digits_graph(2, 3, exponents=True), "pytorch": job_graph(profile, ranks=2, iterations=3)}


@pytest.mark.parametrize("kind", ["training", "plain", "digits", "pytorch"])
def test_every_generators_names_parse_to_its_iterations_in_order(kind: str) -> None:
    graph = _graphs()[kind]
    parsed = [parse_node_name(n.name) for n in graph.ranks[0].nodes]
    unparsed = [n.name for n, p in zip(graph.ranks[0].nodes, parsed, strict=True) if p is None]
    assert not unparsed
    iterations = [p.iteration for p in parsed if p is not None]
    assert iterations == sorted(iterations) and set(iterations) == {0, 1, 2}
    labels = {p.label for p in parsed if p is not None}
    expected = {"training": TRAINING_LABELS - {NodeLabel.CODES}, "plain": {NodeLabel.ALL_REDUCE},
                "digits": DIGITS_LABELS,
                "pytorch": {NodeLabel.FORWARD, NodeLabel.BACKWARD, NodeLabel.ALL_REDUCE, NodeLabel.OPTIMIZER}}[kind]
    assert labels == expected
