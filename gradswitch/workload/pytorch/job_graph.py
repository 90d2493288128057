"""The execution graph of data-parallel training of a measured model (profile.py) at any number of ranks.

Every rank runs the same graph (data parallelism: the same model on its own batch), per iteration:
the forward of each layer in order; the backward of each layer in reverse order; an all-reduce of
each DDP bucket's bytes on the world group, launched (in DDP's order) once the backward of the last
layer whose gradients the bucket holds is done, so that communication overlaps the rest of the
backward as in DDP; then the optimizer's step, after every all-reduce; the next iteration's forward
after that step.
"""

from __future__ import annotations

from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    JobGraph,
    Node,
    RankGraph,
    world_group,
)
from gradswitch.workload.node_names import NodeLabel, node_name
from gradswitch.workload.pytorch.profile import ModelProfile, ProfileError


def job_graph(profile: ModelProfile, ranks: int, iterations: int = 1, name: str | None = None) -> JobGraph:
    """The job's graph: `ranks` identical ranks, `iterations` iterations each (ProfileError on a bad count)."""
    if ranks < 1:
        raise ProfileError(f"ranks {ranks}: a job has 1 rank or more (e.g. --ranks 8)")
    if iterations < 1:
        raise ProfileError(f"iterations {iterations}: give 1 or more (e.g. --iterations 2)")
    profile.check()
    group = world_group(ranks)
    nodes = tuple(_rank_nodes(profile, iterations, group.name))
    graph_name = name or f"{profile.model}-{ranks}ranks"
    return JobGraph(graph_name, tuple(RankGraph(r, nodes) for r in range(ranks)), (group,))


def _rank_nodes(profile: ModelProfile, iterations: int, group: str) -> list[Node]:
    nodes: list[Node] = []

    def add(node: Node) -> int:
        nodes.append(node)
        return node.id

    after: tuple[int, ...] = ()  # what the next iteration's first forward waits for
    for k in range(iterations):
        for layer in profile.layers:
            after = (add(ComputeNode(len(nodes), node_name(k, NodeLabel.FORWARD, layer.name), layer.forward_s, after)),)
        backward: dict[str, int] = {}
        for layer in reversed(profile.layers):
            name = node_name(k, NodeLabel.BACKWARD, layer.name)
            backward[layer.name] = add(ComputeNode(len(nodes), name, layer.backward_s, after))
            after = (backward[layer.name],)
        reductions = tuple(add(CollectiveNode(len(nodes), node_name(k, NodeLabel.ALL_REDUCE, b.index),
                                              CollectiveKind.ALL_REDUCE, group, b.nbytes, (backward[b.ready_after],)))
                           for b in profile.buckets)
        optimizer = ComputeNode(len(nodes), node_name(k, NodeLabel.OPTIMIZER), profile.optimizer_s, after + reductions)
        after = (add(optimizer),)
    return nodes
