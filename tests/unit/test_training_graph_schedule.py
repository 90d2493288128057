"""The training job as an execution graph (gradswitch/workload/generators/training.py) starts its all-reduces when the
hosts' training loop (gradswitch/hosts/iteration.py Scheduler) starts them: in the plan's order, each once its gradients
exist, the one before it has started, the one `in_flight` before it is complete and (exponent mode) its tensors'
exponent codes are reduced. Both schedulers run on one
simulated clock with the same link (reductions one at a time, in the order they start, each taking a time of its
own), so the same start rule gives the same start times to the microsecond; a graph whose all-reduces started as
soon as their gradients exist would start ByteScheduler's overtaken partitions early and fail here."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace

import numpy as np
import pytest

from gradswitch.hosts.graph_engine import GraphScheduler
from gradswitch.hosts.iteration import Scheduler
from gradswitch.workload.generators import training_graph, training_job
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import CollectiveNode, Node
from gradswitch.workload.job import DType, FloatMode, JobConfig, Scheduling, Sync
from gradswitch.workload.plan import Layer, Op, plan

EPS = 1e-9


class Link:
    """A clock that moves only when a scheduler waits (to the next end, when one comes sooner) and one link:
    a reduction begins when it starts or the link is free, whichever is later, and takes its own time."""

    def __init__(self, op_s: dict[str, float]) -> None:
        self.t = 0.0
        self.op_s = op_s
        self.free = 0.0
        self.ends: list[float] = []
        self.starts: dict[str, float] = {}

    def now(self) -> float:
        return self.t

    def wait(self, max_wait: float, what: str) -> None:
        later = [e for e in self.ends if e > self.t + EPS]
        self.t = min([self.t + max(max_wait, 1e-6), *later])

    def reduce(self, name: str) -> Generator[object, None, None]:
        self.starts[name] = self.t
        self.free = end = max(self.t, self.free) + self.op_s[name]
        self.ends.append(end)
        yield lambda: self.t >= end - EPS


class LoopRuntime(Link):
    def start(self, iteration: int, op: Op) -> Generator[object, None, None]:
        return self.reduce(f"it{iteration}.{'codes' if op.codes else 'allreduce'}.{op.index}")

    def gradients(self, iteration: int, layer: Layer) -> None:
        pass

    def background(self, budget_s: float) -> bool:
        return False


class GraphRuntime(Link):
    def start(self, node: Node) -> Generator[object, None, Int32Array]:
        yield from self.reduce(node.name)
        return np.zeros(1, dtype=np.int32)

    def finish(self, node: Node, output: Int32Array) -> None:
        pass

    def background(self, budget_s: float) -> bool:
        return False


def both(cfg: JobConfig, op_s: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """Every all-reduce's start on the loop and on the graph engine (rank 0)."""
    assert cfg.training is not None
    loop = LoopRuntime(op_s)
    Scheduler(plan(cfg), cfg.training, loop, timeout=1e6).run(cfg.iterations)  # type: ignore[arg-type]
    graph = GraphRuntime(op_s)
    GraphScheduler(training_graph(cfg).ranks[0], graph, dilation=1.0, timeout=1e6).run()  # type: ignore[arg-type]
    return loop.starts, graph.starts


def durations(cfg: JobConfig, per_byte_s: float) -> dict[str, float]:
    return {n.name: n.nbytes * per_byte_s for n in training_graph(cfg).ranks[0].nodes if isinstance(n, CollectiveNode)}


@pytest.mark.parametrize(("model", "scheduling", "sync", "in_flight", "exponents"), [
    ("resnet50", Scheduling.PRIORITY, Sync.LAYER, 4, False),
    ("bert-base", Scheduling.PRIORITY, Sync.LAYER, 2, False),
    ("vgg16", Scheduling.PRIORITY, Sync.ITERATION, 4, False),
    ("vgg16", Scheduling.FIFO, Sync.ITERATION, 4, False),
    ("resnet50", Scheduling.FIFO, Sync.LAYER, 1, False),
    ("resnet50", Scheduling.PRIORITY, Sync.LAYER, 8, True),
])
def test_the_graph_starts_each_all_reduce_when_the_training_loop_does(model: str, scheduling: Scheduling,
                                                                      sync: Sync, in_flight: int,
                                                                      exponents: bool) -> None:
    cfg = training_job(model, 4, 3, sync=sync, scheduling=scheduling, bucket_bytes=4 << 20, partition_bytes=1 << 20)
    assert cfg.training is not None
    cfg = replace(cfg, training=replace(cfg.training, in_flight=in_flight))
    if exponents:  # each tensor's exponent codes reduced before its values, an op of their own
        cfg = replace(cfg, dtype=DType.FLOAT32, float_mode=FloatMode.EXPONENT)
        assert any(op.codes for op in plan(cfg).ops)
    # a link slow enough that partitions queue behind it (the loop's overtaking and its window both matter)
    op_s = durations(cfg, 2e-10 if model == "resnet50" else 5e-11)
    loop, graph = both(cfg, op_s)
    assert len(loop) == len(op_s) > 3 * 8
    assert graph == pytest.approx(loop, abs=1e-6)
    order = sorted(loop, key=lambda n: (loop[n], int(n.split(".")[-1])))
    assert order == sorted(graph, key=lambda n: (graph[n], int(n.split(".")[-1])))


def test_started_as_soon_as_ready_the_overtaken_partitions_would_go_first() -> None:
    """The check above can fail: the same graph without the start rule's dependencies (each all-reduce on its
    own gradients alone) starts ResNet-50's priority partitions at other times than the loop."""
    cfg = training_job("resnet50", 4, 2, sync=Sync.LAYER, scheduling=Scheduling.PRIORITY, partition_bytes=1 << 20)
    op_s = durations(cfg, 2e-10)
    loop, _ = both(cfg, op_s)
    graph = training_graph(cfg)
    p = plan(cfg)
    rank = graph.ranks[0]
    by_name = {n.name: n for n in rank.nodes}
    own = []
    for n in rank.nodes:
        if isinstance(n, CollectiveNode):
            op = p.ops[int(n.name.split(".")[-1])]
            front = min(p.tensor_layer[piece.tensor] for piece in op.pieces)
            it = n.name.split(".")[0]
            n = replace(n, deps=(by_name[f"{it}.bwd.{p.layers[front].name}"].id,))
        own.append(n)
    early = GraphRuntime(op_s)
    GraphScheduler(replace(rank, nodes=tuple(own)), early, dilation=1.0, timeout=1e6).run()  # type: ignore[arg-type]
    moved = [n for n in loop if abs(early.starts[n] - loop[n]) > 1e-3]
    assert len(moved) > 5
