"""A spec's job as an execution graph: what the training loop (gradswitch/hosts/iteration.py, the
simulator's gs-training.cc) runs, given to the graph engines instead; a job without training (a synthetic
gradient, or a model profile without `emulate`: every tensor all-reduced in a row, gradswitch/hosts/loops.py) as
gradswitch.workload.generators.plain_graph (spec_graph).

The graph is gradswitch.workload.generators.training_graph of the job the spec describes (its model, scale,
emulated cluster, sync, scheduling, buckets and partitions, as placement.training_config makes them, and its dtype
and float mode: with block exponents the exponent codes' all-reduces the loop's plan has);
the spec that runs it keeps the fabric, links, transport and placement, and leaves the workload to the
graph. Its times come back as the emulated cluster's (the graph engines divide by the dilation).

workload = "train-digits" is a graph of its own (gradswitch.workload.generators.digits_graph: each iteration's
all-reduce of the MLP's gradient, after its exponent codes' with block exponents), run with the spec as it is: the
ranks compute the real gradients it carries (payload train-digits, gradswitch/hosts/graph_digits.py).
"""

from __future__ import annotations

from dataclasses import replace

from gradswitch.experiment.placement import training_config
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec
from gradswitch.hosts.ideal import ideal
from gradswitch.topology.model import Topology
from gradswitch.workload.generators import digits_graph, plain_graph, training_graph, training_job
from gradswitch.workload.graph import JobGraph
from gradswitch.workload.job import Algorithm, DType, FloatMode, JobConfig, Role, Scheduling, Sync
from gradswitch.workload.job import Node as Host

DIGITS = "train-digits"  # the workload whose graph carries a real model's gradients


def spec_graph(spec: ExperimentSpec, iterations: int) -> tuple[ExperimentSpec, JobGraph, float]:
    """The spec's job as `iterations` iterations of a graph (its training's, or its all-reduces in a row without
    training), the spec to run it with and the dilation (1 without training); train-digits' is spec_digits_graph."""
    if training_config(spec) is not None:
        return spec_training_graph(spec, iterations)
    if spec.workload.workload == DIGITS:
        raise ExperimentError(f"{spec.label}: workload 'train-digits': its graph carries real gradients "
                              "(spec_digits_graph)")
    hosts = tuple(Host(i, Role.WORKER, f"h{i + 1}", f"10.0.0.{i + 1}") for i in range(spec.network.workers))
    cfg = JobConfig(Algorithm.RING, hosts, iterations, spec.workload.workload, size_bytes=spec.workload.size_bytes,
                    scale=spec.workload.scale,
                    dtype=spec.workload.dtype, float_mode=spec.workload.float_mode)
    # the spec's workload is the graph's now; the spec that runs it keeps its network, transport and placement
    return spec.but(engine=Engine.GRAPH), plain_graph(cfg, name=spec.label), 1.0


def spec_training_graph(spec: ExperimentSpec, iterations: int) -> tuple[ExperimentSpec, JobGraph, float]:
    """The spec's training job as `iterations` iterations of a graph; the spec to run it with (no workload
    of its own); the dilation D the graph's computation runs under."""
    training = training_config(spec)
    if training is None:
        raise ExperimentError(f"{spec.label}: workload {spec.workload.workload!r} without an emulated cluster: a "
                              "training graph needs a model profile and `emulate`")
    # the spec's algorithm: priority partitions go in the order its link-rate bound gives (gradswitch/workload/plan.py);
    # its dtype and float mode: float32 with block exponents puts each op's exponent codes on the wire before it, as
    # the loop's plan does (gradswitch/workload/plan.py with_codes; the graph's `it{i}.codes.{k}` ops)
    cfg = replace(training_job(spec.workload.workload, spec.network.workers, iterations, scale=spec.workload.scale),
                  algo=spec.algorithm.algo,
                  training=training, dtype=spec.workload.dtype, float_mode=spec.workload.float_mode)
    graph = training_graph(cfg, name=spec.label)
    # The spec's training fields are the graph's now; the spec that runs it has the defaults.
    plain = spec.but(workload="synthetic", emulate=None, sync=Sync.ITERATION, scheduling=Scheduling.FIFO,
                     engine=Engine.GRAPH)
    return plain, graph, training.dilation


def spec_digits_graph(spec: ExperimentSpec) -> JobGraph:
    """The spec's train-digits job as a graph: its workers, its iterations, block exponents where its float mode
    has them, named as the run."""
    if spec.workload.workload != DIGITS:
        raise ExperimentError(f"{spec.label}: workload {spec.workload.workload!r}: the digits graph is workload "
                              f"{DIGITS}'")
    dtype, float_mode = spec.workload.dtype, spec.workload.float_mode
    exponents = dtype == DType.FLOAT32 and float_mode == FloatMode.EXPONENT  # as encoding.uses_exponents
    return digits_graph(spec.network.workers, spec.measurement.iterations, name=spec.label, exponents=exponents)


def ideal_link_load(spec: ExperimentSpec, topo: Topology) -> float:
    """The busiest link's load of the spec's job at its ideal iteration (gradswitch/hosts/ideal.py): what a link-bound
    run keeps while the emulated GPUs compute, as the training loop's report has it (`ideal_link_load`)."""
    return ideal(plan_run(spec, topo).first).link_load
