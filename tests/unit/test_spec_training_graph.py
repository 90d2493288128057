"""A training spec's job as an execution graph (gradswitch/experiment/training_graph.py): the graph the
generator makes of the job the spec's training loop would run, a spec without training fields to run
it, and the spec's dilation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gradswitch.experiment.placement import training_config
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec, spec_from_dict
from gradswitch.experiment.training_graph import spec_training_graph
from gradswitch.workload.generators import training_graph, training_job
from gradswitch.workload.graph import CollectiveNode
from gradswitch.workload.job import Algorithm, Scheduling, Sync
from gradswitch.workload.plan import plan


def speedup_spec(**more: Any) -> ExperimentSpec:
    return spec_from_dict({"workload": "resnet50", "workers": 4, "bw_mbps": 20, "scale": 0.008, "sync": "layer",
                           "scheduling": "priority", "bucket_mb": 25, "partition_mb": 16, "iterations": 4,
                           "emulate": {"link_gbps": 10, "device": "v100", "batch": 32}, **more})


def test_the_graph_is_the_generators_of_the_job_the_spec_trains():
    spec = speedup_spec()
    run_spec, graph, dilation = spec_training_graph(spec, 3)
    assert dilation == pytest.approx(0.008 * 10_000 / 20) == spec.dilation
    training = training_config(spec)
    assert training is not None and training.sync == Sync.LAYER and training.scheduling == Scheduling.PRIORITY
    cfg = training_job("resnet50", 4, 3, spec.workload.emulate, scale=0.008, sync=Sync.LAYER,
                       scheduling=Scheduling.PRIORITY,
                       bucket_bytes=training.bucket_bytes, partition_bytes=training.partition_bytes)
    assert graph.ranks == training_graph(cfg).ranks
    # Scaled: each iteration's all-reduces carry the plan's testbed bytes, in partitions of 16 MB x scale.
    ops = plan(cfg).ops
    sizes = [n.nbytes for n in graph.ranks[0].nodes if isinstance(n, CollectiveNode)]
    assert sizes == [op.elements * 4 for op in ops] * 3
    assert max(sizes) <= training.partition_bytes + 4
    # The spec that runs it leaves the workload to the graph and keeps the fabric and links.
    assert (run_spec.workload.workload, run_spec.workload.emulate, run_spec.algorithm.sync,
            run_spec.algorithm.scheduling) == ("synthetic", None, Sync.ITERATION, Scheduling.FIFO)
    assert run_spec.network == spec.network
    run_spec.validate()


def test_a_spec_that_does_not_train_is_refused_in_one_line():
    spec = spec_from_dict({"workload": "synthetic", "workers": 4, "bw_mbps": 20})
    with pytest.raises(ExperimentError, match="without an emulated cluster") as e:
        spec_training_graph(spec, 2)
    assert "\n" not in str(e.value)


def test_netreduces_partitions_go_in_the_order_the_netreduce_loop_plans_them():
    """The modelled sender of priority partitions runs at the algorithm's link-rate bound (NetReduce's S/B against
    the ring's 2(N-1)S/(NB), 1.5 S/B at N = 4): the graph of a NetReduce spec has the NetReduce job's order, which
    is not the ring's."""
    spec = speedup_spec(algo="netreduce", scale=0.2, partition_mb=4)
    _, graph, _ = spec_training_graph(spec, 1)
    training = training_config(spec)
    assert training is not None
    ring = training_job("resnet50", 4, 1, scale=0.2)
    orders = {}
    for algo in (Algorithm.NETREDUCE, Algorithm.RING):
        orders[algo] = [op.elements * 4 for op in plan(replace(ring, algo=algo, training=training)).ops]
    assert orders[Algorithm.NETREDUCE] != orders[Algorithm.RING]
    assert [n.nbytes for n in graph.ranks[0].nodes if isinstance(n, CollectiveNode)] == orders[Algorithm.NETREDUCE]


@pytest.mark.parametrize("algo", ["ring", "netreduce", "ps"])
def test_block_exponents_put_the_loops_codes_ops_in_the_graph(algo):
    """float32 with float_mode = exponent: the graph's all-reduces are the loop's plan's, exponent codes included
    (each op of codes before the values that wait for them), sizes and order; the spec is no longer refused."""
    spec = speedup_spec(dtype="float32", float_mode="exponent", algo=algo, engine="graph")
    assert spec.problems() == []
    run_spec, graph, _ = spec_training_graph(spec, 2)
    run_spec.validate()
    training = training_config(spec)
    assert training is not None
    cfg = replace(training_job("resnet50", 4, 2, spec.workload.emulate, scale=0.008, sync=Sync.LAYER,
                               scheduling=Scheduling.PRIORITY, bucket_bytes=training.bucket_bytes,
                               partition_bytes=training.partition_bytes),
                  algo=Algorithm(algo), dtype=spec.workload.dtype, float_mode=spec.workload.float_mode)
    ops = plan(cfg).ops
    assert any(op.codes for op in ops) and any(not op.codes for op in ops)
    nodes = [n for n in graph.ranks[0].nodes if isinstance(n, CollectiveNode)]
    assert [(n.name.split(".")[1], n.nbytes) for n in nodes] == \
        [("codes" if op.codes else "allreduce", op.elements * 4) for op in ops] * 2
    fixed = spec_training_graph(speedup_spec(dtype="float32", algo=algo), 2)[1]
    assert sum(isinstance(n, CollectiveNode) for n in fixed.ranks[0].nodes) == 2 * sum(not op.codes for op in ops)
