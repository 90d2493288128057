"""A job without training (gradswitch/hosts/loops.py WorkerLoop, the simulator's gs-training.cc without `training`) as
an execution graph: per iteration, every tensor of the job's profile all-reduced in a row (the synthetic gradient, or
each tensor of a model profile; with block exponents each tensor's exponent codes before it), no computation.

Node `itI.allreduce.J` (`itI.codes.J` for exponent codes) is iteration I's all-reduce of profile tensor J, its size
the tensor's 4 bytes an element (the loop's int32 on the wire), waiting for the one before it (the last of the
iteration before, for J = 0): the loop reduces one tensor at a time. Each carries the DLCP layer class the loop's
writes of that tensor carry (gradswitch/hosts/comm.py: the profile index's class) and, as the loop marks them, is
droppable but for exponent codes (DLCP dropping: docs/dlcp.md; the job's policy says which packets are)."""

from __future__ import annotations

from gradswitch.workload.dlcp import layer_class
from gradswitch.workload.encoding import job_profile
from gradswitch.workload.generators.training import BYTES_PER_ELEMENT
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    GraphError,
    JobGraph,
    Node,
    RankGraph,
    validate,
    world_group,
)
from gradswitch.workload.job import JobConfig
from gradswitch.workload.node_names import NodeLabel, node_name

CODES_KIND = "exponents"  # a profile tensor of exponent codes (gradswitch/workload/encoding.py with_exponents)


def plain_graph(cfg: JobConfig, iterations: int | None = None, name: str = "") -> JobGraph:
    """The job's `iterations` (default cfg.iterations) iterations of all-reduces on every worker."""
    if cfg.training is not None:
        raise GraphError(f"workload {cfg.workload!r}: the job trains (an emulated cluster): its graph is "
                         "training_graph's")
    if cfg.workload == "train-digits":
        raise GraphError("workload 'train-digits': its graph is digits_graph's (real gradients)")
    n_iter = cfg.iterations if iterations is None else iterations
    if n_iter < 1:
        raise GraphError(f"{n_iter} iterations: give at least 1")
    try:
        tensors = job_profile(cfg).tensors
    except ValueError as e:
        raise GraphError(f"workload {cfg.workload!r}: {e}") from None
    ranks = len(cfg.workers)
    group = world_group(ranks)
    nodes: list[Node] = []
    for it in range(n_iter):
        for j, t in enumerate(tensors):
            label = NodeLabel.CODES if t.kind == CODES_KIND else NodeLabel.ALL_REDUCE
            deps = (len(nodes) - 1,) if nodes else ()
            nodes.append(CollectiveNode(len(nodes), node_name(it, label, j), CollectiveKind.ALL_REDUCE, group.name,
                                        t.elements * BYTES_PER_ELEMENT, deps,
                                        layer_class=layer_class(j, len(tensors)), droppable=t.kind != CODES_KIND))
    graph = JobGraph(name or f"{cfg.workload}-n{ranks}", tuple(RankGraph(r, tuple(nodes)) for r in range(ranks)),
                     (group,))
    validate(graph)
    return graph
