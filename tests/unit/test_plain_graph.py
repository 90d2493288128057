"""A job without training as an execution graph (gradswitch/workload/generators/plain.py, spec_graph in
gradswitch/experiment/training_graph.py): every tensor of the loop's profile all-reduced in a row, in the loop's
order and sizes, and its run's iterations as the loop without training reports them (gradswitch/workload/
graph_iterations.py)."""

from __future__ import annotations

import pytest

from gradswitch.experiment.spec import Engine, ExperimentError, spec_from_dict
from gradswitch.experiment.training_graph import spec_graph
from gradswitch.workload.dlcp import layer_class
from gradswitch.workload.encoding import job_profile
from gradswitch.workload.generators import plain_graph, training_job
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, GraphError
from gradswitch.workload.graph_iterations import IterationProgress, rank_bounds, rank_iterations
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.job import Algorithm, DType, FloatMode, JobConfig, Node, Role
from gradswitch.workload.records import CheckKind


def job(workload: str = "synthetic", size: int = 8 << 20, **more: object) -> JobConfig:
    nodes = tuple(Node(i, Role.WORKER, f"h{i + 1}", f"10.0.0.{i + 1}") for i in range(4))
    return JobConfig(Algorithm.RING, nodes, 3, workload, size_bytes=size, **more)  # type: ignore[arg-type]


def test_a_synthetic_job_is_one_all_reduce_an_iteration_of_its_size():
    g = plain_graph(job())
    nodes = g.ranks[0].nodes
    assert [n.name for n in nodes] == ["it0.allreduce.0", "it1.allreduce.0", "it2.allreduce.0"]
    assert all(isinstance(n, CollectiveNode) and n.collective == CollectiveKind.ALL_REDUCE and n.nbytes == 8 << 20
               for n in nodes)
    assert [n.deps for n in nodes] == [(), (0,), (1,)]  # one after another, as the loop reduces
    assert g.world_size == 4 and all(r.nodes == nodes for r in g.ranks)


def test_a_model_profile_is_its_tensors_in_the_loops_order_and_sizes():
    cfg = job("resnet50", scale=0.5)
    tensors = job_profile(cfg).tensors
    g = plain_graph(cfg, iterations=2)
    nodes = [n for n in g.ranks[0].nodes if isinstance(n, CollectiveNode)]
    assert len(nodes) == 2 * len(tensors) > 100
    assert [n.nbytes for n in nodes] == [4 * t.elements for t in tensors] * 2
    assert [n.layer_class for n in nodes[:len(tensors)]] == [layer_class(j, len(tensors)) for j in range(len(tensors))]
    assert all(n.deps == (n.id - 1,) for n in nodes[1:])
    assert all(n.droppable for n in nodes)  # DLCP dropping: every tensor's values, as the loop marks its writes


def test_block_exponents_reduce_each_tensors_codes_before_it():
    cfg = job(size=1 << 20, dtype=DType.FLOAT32, float_mode=FloatMode.EXPONENT)
    g = plain_graph(cfg, iterations=1)
    names = [n.name for n in g.ranks[0].nodes]
    assert names == ["it0.codes.0", "it0.allreduce.1"]
    # the loop's marks (gradswitch/hosts/comm.py tag_for): its classes, the codes never droppable, the values so
    nodes = [n for n in g.ranks[0].nodes if isinstance(n, CollectiveNode)]
    assert [(n.layer_class, n.droppable) for n in nodes] == [(layer_class(j, 2), t.kind != "exponents")
                                                              for j, t in enumerate(job_profile(cfg).tensors)]
    assert [n.droppable for n in nodes] == [False, True]
    assert [n.nbytes for n in g.ranks[0].nodes if isinstance(n, CollectiveNode)] == [
        4 * t.elements for t in job_profile(cfg).tensors]


def test_a_training_job_or_no_iteration_is_refused_in_one_line():
    with pytest.raises(GraphError, match="training_graph"):
        plain_graph(training_job("resnet50", 4))
    with pytest.raises(GraphError, match="0 iterations"):
        plain_graph(job(), iterations=0)


def test_spec_graph_gives_a_plain_spec_its_all_reduces_and_keeps_the_rest():
    spec = spec_from_dict({"algo": "ps", "workers": 4, "size_bytes": 1 << 20, "iterations": 5, "engine": "graph",
                           "bw_mbps": 20})
    assert spec.problems() == []  # engine = graph runs a workload without emulate
    run_spec, graph, dilation = spec_graph(spec, spec.measurement.iterations)
    assert dilation == 1.0 and run_spec.algorithm.engine == Engine.GRAPH and run_spec.algorithm.algo == Algorithm.PS
    assert graph.world_size == 4 and len(graph.ranks[0].nodes) == 5 and graph.name == spec.label
    with pytest.raises(ExperimentError, match="real gradients"):
        spec_graph(spec_from_dict({"workload": "train-digits", "dtype": "float32"}), 2)


def test_the_loops_iterations_come_from_the_first_all_reduces_start_to_the_lasts_end():
    g = plain_graph(job("resnet50", scale=0.01), iterations=3)
    per_iteration = len(g.ranks[0].nodes) // 3
    t, timings = 0.0, []
    for n in g.ranks[1].nodes:
        timings.append(NodeTiming(1, n.id, "collective", t + 0.0005, t + 0.001, CollectiveKind.ALL_REDUCE, "world",
                                  n.nbytes if isinstance(n, CollectiveNode) else 0, True))
        t += 0.001
    run = GraphRun(tuple(timings))
    bounds = rank_bounds(g, run, 1)
    step = per_iteration * 0.001
    assert bounds == [pytest.approx((k * step + 0.0005, (k + 1) * step)) for k in range(3)]
    records = rank_iterations(g, run, 1, CheckKind.EXACT)
    assert [r.index for r in records] == [0, 1, 2] and all(r.correct for r in records)
    assert set(records[0].extra) == {"zero_filled_packets", "relative_error"}  # the loop's, no training parts
    # an iteration whose every all-reduce has not ended is not kept
    assert len(rank_bounds(g, GraphRun(run.nodes[:-1]), 1)) == 2
    progress = IterationProgress(g.ranks[1])
    assert sum(progress.ended(n.id) for n in g.ranks[1].nodes) == 3 and progress.done == 3


def test_a_crash_dies_where_each_loop_dies_and_train_digits_counts_its_progress():
    """crash_node (gradswitch/sim/sim_config.py's jobs[].crash.graph_node): a graph without computation's rank dies
    as its iteration's last all-reduce ends (the last iteration's too, as the loop without training's node), a
    training graph's as its next iteration's first forward would start (none after the last). train-digits' graph
    (`it0.gradient`, `it0.all_reduce.fc2.bias`) counts its iterations in the progress file as the others do."""
    from gradswitch.hosts.graph_main import Crashing
    from gradswitch.workload.generators import digits_graph, training_graph
    from gradswitch.workload.graph_iterations import crash_node, iteration_start
    from gradswitch.workload.node_names import iteration_prefix

    g = plain_graph(job("resnet50"))  # its tensors in a row, several an iteration
    nodes = g.ranks[2].nodes
    for after in range(3):
        last = crash_node(g.ranks[2], after)
        assert last is not None and nodes[last].name.startswith(f"it{after}.")
        assert last + 1 == len(nodes) or nodes[last + 1].name.startswith(f"it{after + 1}.")
    assert crash_node(g.ranks[2], 3) is None
    trained = training_graph(training_job("resnet50", 2, iterations=3))
    assert crash_node(trained.ranks[1], 0) == iteration_start(trained.ranks[1], 1) is not None
    assert crash_node(trained.ranks[1], 2) is None
    digits = digits_graph(4, 3)
    assert [iteration_prefix(n.name) for n in digits.ranks[0].nodes[:2]] == [0, 0]
    assert iteration_prefix("allreduce.0") is None and iteration_prefix("itx.a") is None
    progress = IterationProgress(digits.ranks[0])
    assert sum(progress.ended(n.id) for n in digits.ranks[0].nodes) == 3 and progress.done == 3
    # the loop without training and train-digits' die before they report the iteration, a training loop's after
    assert Crashing(1, reports_first=False).before_report(2) and not Crashing(1, False).after_report(2)
    assert Crashing(1, reports_first=True).after_report(2) and not Crashing(1, True).before_report(2)
    assert not Crashing(1, True).after_report(1) and not Crashing(1, False).before_report(1)
