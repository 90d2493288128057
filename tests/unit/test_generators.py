"""gradswitch's workloads as execution graphs (gradswitch/workload/generators): the training job's bytes are the
model's gradient bytes, its all-reduces run in plan.py's order after the backward node that made
their last gradient, and the next iteration waits as `sync` says; single collectives and send/recv."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from gradswitch.workload.chakra import read_traces, write_traces
from gradswitch.workload.generators import collective_graph, send_recv_graph, training_graph, training_job
from gradswitch.workload.gradients import workload
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    RecvNode,
    SendNode,
    to_dict,
    topological_order,
)
from gradswitch.workload.job import Device, Emulation, Scheduling, Sync
from gradswitch.workload.plan import plan

MODELS = ["resnet50", "vgg16", "bert-base"]  # the profiles with a calibrated computation


def collectives(graph, rank=0):
    return [n for n in topological_order(graph.ranks[rank]) if isinstance(n, CollectiveNode)]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("scheduling", [Scheduling.FIFO, Scheduling.PRIORITY])
def test_each_iteration_reduces_exactly_the_models_gradient_bytes(model, scheduling):
    cfg = training_job(model, 4, 3, scheduling=scheduling)
    graph = training_graph(cfg)
    gradient_bytes = 4 * workload(model, 0, 1.0).elements
    for r in range(4):
        per_iteration: dict[str, int] = {}
        for n in collectives(graph, r):
            it = n.name.split(".")[0]
            per_iteration[it] = per_iteration.get(it, 0) + n.nbytes
        assert per_iteration == {f"it{i}": gradient_bytes for i in range(3)}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("scheduling", [Scheduling.FIFO, Scheduling.PRIORITY])
def test_the_all_reduces_run_in_the_plans_order(model, scheduling):
    cfg = training_job(model, 8, 2, scheduling=scheduling, bucket_bytes=5 << 20, partition_bytes=1 << 20)
    ops = plan(cfg).ops
    assert len(ops) > 2
    got = [(n.name, n.nbytes) for n in collectives(training_graph(cfg))]
    assert got == [(f"it{i}.allreduce.{op.index}", 4 * op.elements) for i in range(2) for op in ops]


def test_an_all_reduce_waits_for_the_last_gradient_so_far_and_the_window():
    """Op k waits for the backward node of the front-most layer ops 0..k carry (in a bucket order, its own
    last gradient) and for ops k-2W+1..k-W (the loop's window of W = in_flight; the rest by transitivity)."""
    cfg = training_job("resnet50", 2, 1, bucket_bytes=4 << 20)
    assert cfg.training is not None and cfg.training.in_flight == 4
    p = plan(cfg)
    rank = training_graph(cfg).ranks[0]
    by_id = rank.by_id()
    ops = [n for n in rank.nodes if isinstance(n, CollectiveNode)]
    assert len(ops) > 8
    for k, (op, node) in enumerate(zip(p.ops, ops, strict=True)):
        front = min(p.tensor_layer[piece.tensor] for piece in op.pieces)
        bwd = [by_id[d].name for d in node.deps if isinstance(by_id[d], ComputeNode)]
        assert bwd == [f"it0.bwd.{p.layers[front].name}"]  # buckets come in backward's order
        assert {d for d in node.deps if isinstance(by_id[d], CollectiveNode)} == {
            ops[j].id for j in range(max(0, k - 7), max(0, k - 3))}


def test_forward_and_backward_times_are_the_compute_models():
    cfg = training_job("vgg16", 2, 1, emulate=Emulation(device=Device.A100, batch=32))
    p = plan(cfg)
    rank = training_graph(cfg).ranks[0]
    computed = {n.name: n.duration_s for n in rank.nodes if isinstance(n, ComputeNode)}
    assert computed == {**{f"it0.fwd.{la.name}": la.forward_s for la in p.layers},
                        **{f"it0.bwd.{la.name}": la.backward_s for la in p.layers}}
    assert sum(computed.values()) > 0


def test_the_next_iteration_waits_as_sync_says():
    for sync in (Sync.ITERATION, Sync.LAYER):
        cfg = training_job("vgg16", 2, 2, sync=sync, bucket_bytes=1 << 20)
        p = plan(cfg)
        rank = training_graph(cfg).ranks[0]
        by_name = {n.name: n for n in rank.nodes}
        first_ops = {n.id: n for n in rank.nodes if isinstance(n, CollectiveNode) and n.name.startswith("it0.")}
        assert len(first_ops) > 1
        for layer in p.layers:
            waits = {d for d in by_name[f"it1.fwd.{layer.name}"].deps if d in first_ops}
            carrying = {n.id for n in first_ops.values() if int(n.name.split(".")[-1]) in p.layer_ops()[layer.index]}
            if sync == Sync.ITERATION:
                assert waits == (set(first_ops) if layer.index == 0 else set())
            else:
                assert waits == carrying


def test_a_training_graph_survives_the_trace_round_trip(tmp_path):
    graph = training_graph(training_job("resnet50", 4, 2))
    write_traces(graph, tmp_path / "rn")
    back = to_dict(read_traces(tmp_path / "rn"))
    for r in back["ranks"]:
        r["source"] = ""
    expected = to_dict(graph) | {"name": "rn"}
    # Chakra stores whole microseconds
    for r in expected["ranks"]:
        for n in r["nodes"]:
            if n["kind"] == "compute":
                n["duration_s"] = round(n["duration_s"] * 1e6) / 1e6
    assert back == expected


@pytest.mark.parametrize("kind", list(CollectiveKind))
def test_one_collective_repeated_with_computation_between(kind):
    graph = collective_graph(kind, 4, 1 << 20, repeat=3, compute_s=0.002, root=1)
    for r in graph.ranks:
        order = topological_order(r)
        assert [type(n).__name__ for n in order] == ["CollectiveNode", "ComputeNode"] * 2 + ["CollectiveNode"]
        assert all(n.nbytes == 1 << 20 and n.collective == kind and n.group == "world"
                   for n in order if isinstance(n, CollectiveNode))
        assert all(b.deps == (a.id,) for a, b in itertools.pairwise(order))
    assert graph.groups[0].ranks == (0, 1, 2, 3)


def test_send_recv_to_the_next_rank():
    graph = send_recv_graph(3, 1000, repeat=2)
    sends = {(r.rank, n.peer, n.tag) for r in graph.ranks for n in r.nodes if isinstance(n, SendNode)}
    recvs = {(n.peer, r.rank, n.tag) for r in graph.ranks for n in r.nodes if isinstance(n, RecvNode)}
    assert sends == recvs == {(r, (r + 1) % 3, t) for r in range(3) for t in range(2)}


@pytest.mark.parametrize(("make", "says"), [
    (lambda: collective_graph(CollectiveKind.ALL_REDUCE, 0, 64), "0 ranks: this workload needs at least 1"),
    (lambda: collective_graph(CollectiveKind.ALL_REDUCE, 4, 0), "0 bytes: communication moves at least 1 byte"),
    (lambda: collective_graph(CollectiveKind.ALL_REDUCE, 4, 64, repeat=0), "repeat 0: run it at least once"),
    (lambda: send_recv_graph(1, 64), "1 ranks: this workload needs at least 2"),
    (lambda: collective_graph(CollectiveKind.BROADCAST, 4, 64, root=4), "broadcast root 4 is not in group 'world'"),
    (lambda: training_graph(training_job("resnet50", 2, 0)), "0 iterations: give at least 1"),
    (lambda: training_graph(training_job("synthetic", 2, 1)), "workload 'synthetic': workload 'synthetic' has no "
                                                              "compute model"),
])
def test_bad_values_are_refused_in_one_line(make, says):
    with pytest.raises(GraphError, match=says.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_iteration_times_run_from_one_iterations_first_forward_node_to_the_next():
    from gradswitch.workload.generators import iteration_starts, iteration_times
    from gradswitch.workload.graph_timing import GraphRun, NodeTiming

    graph = training_graph(training_job("resnet50", 2, 3))
    firsts = [next(n.id for n in graph.ranks[0].nodes if n.name.startswith(f"it{k}.fwd.")) for k in range(3)]
    assert len(set(firsts)) == 3
    # Rank 1 starts each iteration later than rank 0 except the second; the run ends at 1.0 s.
    starts = {(0, firsts[0]): 0.0, (1, firsts[0]): 0.01, (0, firsts[1]): 0.32, (1, firsts[1]): 0.3,
              (0, firsts[2]): 0.6, (1, firsts[2]): 0.65}
    nodes = [NodeTiming(r, n.id, "compute", starts.get((r, n.id), 0.5), 1.0 if n.id == graph.ranks[0].nodes[-1].id
                        else 0.7) for r in range(2) for n in graph.ranks[r].nodes]
    run = GraphRun(tuple(nodes))
    assert iteration_starts(graph, run) == (0.0, 0.3, 0.6)
    assert iteration_times(graph, run) == pytest.approx((0.3, 0.3, 0.4))
    with pytest.raises(GraphError, match="no timing for 1 iteration"):
        iteration_starts(graph, GraphRun(tuple(t for t in nodes if t.node_id != firsts[2])))


def test_under_layer_sync_the_last_iteration_ends_when_a_next_forward_could_start():
    """The training loop ends its last iteration once the first layer's gradients are reduced and backward is
    done (a next forward could start), not when the back layers' all-reduces end: so does iteration_times."""
    from gradswitch.workload.generators import iteration_times
    from gradswitch.workload.graph_timing import GraphRun, NodeTiming

    cfg = training_job("resnet50", 2, 2, sync=Sync.LAYER, scheduling=Scheduling.PRIORITY, partition_bytes=1 << 20)
    graph = training_graph(cfg)
    p = plan(cfg)
    rank = graph.ranks[0]
    front_ops = {f"it1.allreduce.{k}" for k in p.layer_ops()[0]}
    last_bwd = f"it1.bwd.{p.layers[0].name}"
    assert front_ops and len(front_ops) < len(p.ops)

    def end(name: str) -> float:
        if name in front_ops:
            return 1.5
        if name == last_bwd:
            return 1.2
        return 3.0 if name.startswith("it1.allreduce.") else 0.5  # the back layers' all-reduces end last

    nodes = [NodeTiming(r, n.id, "compute", 1.0 if n.name == f"it1.fwd.{p.layers[0].name}" else 0.0, end(n.name))
             for r in range(2) for n in rank.nodes]
    assert iteration_times(graph, GraphRun(tuple(nodes))) == pytest.approx((1.0, 0.5))
    late = [replace(t, end_s=1.7) if t.rank == 1 and rank.by_id()[t.node_id].name == last_bwd else t for t in nodes]
    assert iteration_times(graph, GraphRun(tuple(late)))[1] == pytest.approx(0.7)  # on every rank
    one = training_graph(training_job("resnet50", 2, 1, sync=Sync.LAYER))
    assert iteration_times(one, GraphRun(tuple(NodeTiming(0, n.id, "compute", 0.0, 0.1 * n.id)
                                              for n in one.ranks[0].nodes))) == pytest.approx((0.1 * max(
                                                  n.id for n in one.ranks[0].nodes),))
