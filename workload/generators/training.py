"""The data-parallel training job gradswitch runs (workers/iteration.py) as an execution graph.

Per iteration and rank: a forward node per layer (forward order), a backward node per layer (last
layer first), and an all-reduce per op of workload/plan.py (a DDP bucket with `fifo`, a partition
with `priority`), in the plan's order, each depending on the backward node that produced its
last gradient (its front-most layer's). The next iteration's forward waits as the job's `sync`
says: `iteration`, its first layer on every all-reduce of the iteration before (DDP); `layer`,
each layer on the all-reduces that carry its gradient (P3, ByteScheduler). Times are the
emulated cluster's real seconds (no dilation); sizes 4 bytes per element (int32 or float32).
"""

from __future__ import annotations

from workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    Node,
    RankGraph,
    validate,
    world_group,
)
from workload.job import Algorithm, Emulation, JobConfig, Role, Scheduling, Sync, Training
from workload.job import Node as Host
from workload.plan import plan

BYTES_PER_ELEMENT = 4  # int32 on the wire, float32 converted (workload/floats.py)


def training_job(model: str, workers: int, iterations: int = 1, emulate: Emulation | None = None,
                 sync: Sync = Sync.ITERATION, scheduling: Scheduling = Scheduling.FIFO,
                 bucket_bytes: int = 25 << 20, partition_bytes: int = 4 << 20) -> JobConfig:
    """A ring training job of a model profile at real size (scale 1), as the plan needs it."""
    if workers < 1:
        raise GraphError(f"{workers} workers: a job has at least 1")
    hosts = tuple(Host(i, Role.WORKER, f"h{i + 1}", f"10.0.0.{i + 1}") for i in range(workers))
    training = Training(emulate or Emulation(), 1.0, sync, scheduling, bucket_bytes, partition_bytes)
    return JobConfig(Algorithm.RING, hosts, iterations, model, training=training)


def training_graph(cfg: JobConfig, iterations: int | None = None, name: str = "") -> JobGraph:
    """The job's `iterations` (default cfg.iterations) training iterations on every worker."""
    if cfg.training is None:
        raise GraphError(f"workload {cfg.workload!r}: the job does not train (no emulated cluster)")
    try:
        p = plan(cfg)
    except ValueError as e:
        raise GraphError(f"workload {cfg.workload!r}: {e}") from None
    n_iter = cfg.iterations if iterations is None else iterations
    if n_iter < 1:
        raise GraphError(f"{n_iter} iterations: give at least 1")
    ranks = len(cfg.workers)
    group = world_group(ranks)
    layers = p.layers
    op_last_layer = [min(p.tensor_layer[piece.tensor] for piece in op.pieces) for op in p.ops]
    layer_ops = p.layer_ops()
    nodes: list[Node] = []
    prev_ops: list[int] = []  # the previous iteration's all-reduce node ids, by op index
    prev_last_backward: int | None = None
    for it in range(n_iter):
        fwd: dict[int, int] = {}
        for layer in layers:
            deps: list[int] = []
            if layer.index > 0:
                deps.append(fwd[layer.index - 1])
            elif prev_last_backward is not None:
                deps.append(prev_last_backward)
            if prev_ops:
                if cfg.training.sync == Sync.ITERATION:
                    deps += prev_ops if layer.index == 0 else []
                else:
                    deps += [prev_ops[k] for k in sorted(layer_ops[layer.index])]
            fwd[layer.index] = len(nodes)
            nodes.append(ComputeNode(len(nodes), f"it{it}.fwd.{layer.name}", layer.forward_s, tuple(deps)))
        bwd: dict[int, int] = {}
        above = fwd[layers[-1].index]
        for layer in reversed(layers):
            bwd[layer.index] = len(nodes)
            nodes.append(ComputeNode(len(nodes), f"it{it}.bwd.{layer.name}", layer.backward_s, (above,)))
            above = bwd[layer.index]
        prev_last_backward = above
        prev_ops = []
        for op, last in zip(p.ops, op_last_layer, strict=True):
            prev_ops.append(len(nodes))
            label = "codes" if op.codes else "allreduce"
            nodes.append(CollectiveNode(len(nodes), f"it{it}.{label}.{op.index}", CollectiveKind.ALL_REDUCE,
                                        group.name, op.elements * BYTES_PER_ELEMENT, (bwd[last],)))
    graph = JobGraph(name or f"{cfg.workload}-n{ranks}", tuple(RankGraph(r, tuple(nodes)) for r in range(ranks)),
                     (group,))
    validate(graph)
    return graph
