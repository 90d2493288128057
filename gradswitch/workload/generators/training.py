"""The data-parallel training job gradswitch runs (gradswitch/hosts/iteration.py) as an execution graph.

Per iteration and rank: a forward node per layer (forward order), a backward node per layer (last
layer first), and an all-reduce per op of gradswitch/workload/plan.py (a DDP bucket with `fifo`, a partition
with `priority`, in the order the plan's modelled sender takes them). The training loop starts op i
once its gradients exist, op i-1 has started, op i - in_flight is complete and (exponent mode) the
ops carrying its tensors' exponent codes are complete (gradswitch/hosts/iteration.py); as dependencies (which
end, never start): op i waits for the backward node of the front-most layer any op 0..i carries (the
last of their gradients to appear), for ops i-2W+1..i-W (W = in_flight; their own dependencies cover
the earlier ones) and for the codes ops that ops 0..i wait for (those after i-W), so each op starts
when the loop would start it: in the plan's order, a priority partition never before a more urgent
one that is not ready yet. The next iteration's forward waits as the job's `sync` says: `iteration`,
its first layer on every all-reduce of the iteration before (DDP); `layer`, each layer on the
all-reduces that carry its gradient (P3, ByteScheduler). Times are the emulated cluster's real
seconds (no dilation); sizes 4 bytes per element (int32 or float32). Each all-reduce carries the DLCP
layer class of its front-most tensor (gradswitch/workload/plan.py op_mark), as the loop's writes do.
"""

from __future__ import annotations

from gradswitch.workload.dlcp import layer_class
from gradswitch.workload.encoding import job_profile
from gradswitch.workload.graph import (
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
from gradswitch.workload.graph_timing import GraphRun
from gradswitch.workload.job import MAX_IN_FLIGHT, Algorithm, Emulation, JobConfig, Role, Scheduling, Sync, Training
from gradswitch.workload.job import Node as Host
from gradswitch.workload.node_names import NodeLabel, iteration_head, node_name, parse_node_name
from gradswitch.workload.plan import op_mark, plan

BYTES_PER_ELEMENT = 4  # int32 on the wire, float32 converted (gradswitch/workload/floats.py)


def training_job(model: str, workers: int, iterations: int = 1, emulate: Emulation | None = None,
                 sync: Sync = Sync.ITERATION, scheduling: Scheduling = Scheduling.FIFO,
                 bucket_bytes: int = 25 << 20, partition_bytes: int = 4 << 20, scale: float = 1.0,
                 in_flight: int = Training.in_flight) -> JobConfig:
    """A ring training job of a model profile, as the plan needs it: every layer's gradient `scale` of its
    real size (1: real size; a BMv2 run's scale, with buckets and partitions of testbed bytes); at most
    `in_flight` all-reduces started and not complete."""
    if workers < 1:
        raise GraphError(f"{workers} workers: a job has at least 1")
    hosts = tuple(Host(i, Role.WORKER, f"h{i + 1}", f"10.0.0.{i + 1}") for i in range(workers))
    if not 1 <= in_flight <= MAX_IN_FLIGHT:
        raise GraphError(f"in flight {in_flight}: 1 to {MAX_IN_FLIGHT} all-reduces at once")
    training = Training(emulate or Emulation(), 1.0, sync, scheduling, bucket_bytes, partition_bytes,
                        in_flight=in_flight)
    return JobConfig(Algorithm.RING, hosts, iterations, model, scale=scale, training=training)


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
    window = cfg.training.in_flight
    tensors = len(job_profile(cfg).tensors)
    classes = [layer_class(op_mark(cfg, op), tensors) for op in p.ops]  # DLCP: as the loop's writes carry them
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
            nodes.append(ComputeNode(len(nodes), _forward_name(it, layer.name), layer.forward_s, tuple(deps)))
        bwd: dict[int, int] = {}
        above = fwd[layers[-1].index]
        for layer in reversed(layers):
            bwd[layer.index] = len(nodes)
            name = node_name(it, NodeLabel.BACKWARD, layer.name)
            nodes.append(ComputeNode(len(nodes), name, layer.backward_s, (above,)))
            above = bwd[layer.index]
        prev_last_backward = above
        prev_ops = []
        front = layers[-1].index  # the front-most layer carried by the ops so far
        codes_of: dict[int, int] = {}  # exponent mode: tensor -> the op reducing its codes
        needed: set[int] = set()  # the codes ops that ops 0..k wait for, not yet covered by the window
        for k, (op, last) in enumerate(zip(p.ops, op_last_layer, strict=True)):
            front = min(front, last)
            before = prev_ops[max(0, k - 2 * window + 1):max(0, k - window + 1)]
            if op.codes:
                codes_of.update(dict.fromkeys(op.tensors, k))
            else:
                needed |= {codes_of[t] for t in op.tensors if t in codes_of}
            needed = {j for j in needed if j > k - window}  # ops 0..k-W are complete (the window's dependencies)
            codes = [prev_ops[j] for j in sorted(needed)]
            prev_ops.append(len(nodes))
            label = NodeLabel.CODES if op.codes else NodeLabel.ALL_REDUCE
            nodes.append(CollectiveNode(len(nodes), node_name(it, label, op.index), CollectiveKind.ALL_REDUCE,
                                        group.name, op.elements * BYTES_PER_ELEMENT, (bwd[front], *before, *codes),
                                        layer_class=classes[k], droppable=not op.codes))
    graph = JobGraph(name or f"{cfg.workload}-n{ranks}", tuple(RankGraph(r, tuple(nodes)) for r in range(ranks)),
                     (group,))
    validate(graph)
    return graph


def _forward_name(iteration: int, layer: str) -> str:
    return node_name(iteration, NodeLabel.FORWARD, layer)


def iteration_starts(graph: JobGraph, run: GraphRun) -> tuple[float, ...]:
    """When each iteration of a training_graph began: its first forward node's earliest start over the
    ranks (the gaps between them are the iteration times a training run reports)."""
    first: dict[int, int] = {}  # each iteration's first forward node: its id -> the iteration
    for node in graph.ranks[0].nodes:
        p = parse_node_name(node.name)
        if p is not None and p.label == NodeLabel.FORWARD and p.iteration not in first.values():
            first[node.id] = p.iteration
    starts: dict[int, float] = {}
    for timing in run.nodes:
        k = first.get(timing.node_id)
        if k is not None:
            starts[k] = min(starts.get(k, timing.start_s), timing.start_s)
    if len(starts) != len(first):
        raise GraphError(f"{graph.name}: the run has no timing for {len(first) - len(starts)} iteration(s)")
    return tuple(starts[k] for k in sorted(starts))


def iteration_times(graph: JobGraph, run: GraphRun) -> tuple[float, ...]:
    """Each iteration's time, as a training run reports them (gradswitch/hosts/iteration.py, gs-training.cc): from its
    first forward node's start to the next iteration's; the last one to when a next iteration's first forward
    could start, which is when the last of what the last iteration's first forward waited for in the iteration
    before it (the backward node that ended that iteration, the all-reduces `sync` makes it wait for), counted
    in the last iteration, has ended on every rank. Under layer sync that is before the last iteration's
    all-reduces of the back layers end, which the graph's end includes; with one iteration, the graph's end."""
    starts = iteration_starts(graph, run)
    return tuple(b - a for a, b in zip(starts, (*starts[1:], _last_end(graph, run, len(starts))), strict=True))


def _last_end(graph: JobGraph, run: GraphRun, iterations: int) -> float:
    if iterations < 2:
        return run.job_s
    rank = graph.ranks[0]
    by_id = rank.by_id()
    before, last = iteration_head(iterations - 2), iteration_head(iterations - 1)
    first = next(n for n in rank.nodes if n.name.startswith(f"{last}{NodeLabel.FORWARD}."))
    waited = {last + by_id[d].name[len(before):] for d in first.deps if by_id[d].name.startswith(before)}
    ids = {n.id for n in rank.nodes if n.name in waited}
    if len(ids) != len(waited):
        raise GraphError(f"{graph.name}: iteration {iterations - 1} has no node for {len(waited) - len(ids)} of what "
                         f"its first forward waited for in the iteration before")
    return max(t.end_s for t in run.nodes if t.node_id in ids)
