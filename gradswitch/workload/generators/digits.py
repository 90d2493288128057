"""Workload train-digits (gradswitch/workload/digits.py: an MLP learning scikit-learn's digits) as an execution graph.

Per iteration and rank: a compute node, the minibatch's gradient (`it{i}.gradient`), then the all-reduce of the
whole gradient vector on the world group (`it{i}.all_reduce`, digits_profile's elements x 4 bytes: the int32
fixed point the workers send), and the next iteration's computation after it (the SGD step needs the sum).
The graph carries sizes and order only; a host run with the real gradients (GraphJob's payload
PayloadKind.DIGITS, gradswitch/hosts/graph_digits.py) computes them as each all-reduce's input.
"""

from __future__ import annotations

from gradswitch.workload.gradients import digits_profile
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

BYTES_PER_ELEMENT = 4  # int32 fixed point on the wire
GRADIENT = "gradient"
ALL_REDUCE = "all_reduce"


def digits_bytes() -> int:
    """The bytes of one iteration's all-reduce: every gradient of the MLP, as int32."""
    return digits_profile().elements * BYTES_PER_ELEMENT


def digits_graph(ranks: int, iterations: int, compute_s: float = 0.0, name: str = "") -> JobGraph:
    """train-digits on `ranks` workers for `iterations` iterations; `compute_s`: each gradient's computation,
    in seconds of the emulated cluster (0: the graph times communication alone)."""
    if ranks < 1:
        raise GraphError(f"{ranks} ranks: train-digits needs at least 1")
    if iterations < 1:
        raise GraphError(f"{iterations} iterations: train at least once")
    if not compute_s >= 0:
        raise GraphError(f"a gradient's computation of {compute_s} s: give 0 s or more")
    group = world_group(ranks)
    nbytes = digits_bytes()
    nodes: list[Node] = []
    for it in range(iterations):
        deps = (nodes[-1].id,) if nodes else ()
        nodes.append(ComputeNode(len(nodes), f"it{it}.{GRADIENT}", compute_s, deps))
        nodes.append(CollectiveNode(len(nodes), f"it{it}.{ALL_REDUCE}", CollectiveKind.ALL_REDUCE, group.name, nbytes,
                                    (nodes[-1].id,)))
    graph = JobGraph(name or f"train-digits-n{ranks}", tuple(RankGraph(r, tuple(nodes)) for r in range(ranks)),
                     (group,))
    validate(graph)
    return graph
