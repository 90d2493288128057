"""Workload train-digits (gradswitch/workload/digits.py: an MLP learning scikit-learn's digits) as an execution graph.

Per iteration and rank: a compute node, the minibatch's gradient (`it{i}.gradient`), then the all-reduce of the
whole gradient vector on the world group (`it{i}.all_reduce`, digits_profile's elements x 4 bytes: the int32
fixed point the workers send), and the next iteration's computation after it (the SGD step needs the sum). With block
exponents (`exponents`: float_mode = exponent, gradswitch/workload/floats.py) the values' all-reduce waits for one of
every tensor's exponent codes before it (`it{i}.exponents`, one int32 per block of every tensor): the loop's two
reductions per tensor (gradswitch/workload/encoding.py), each kind in one vector.
The graph carries sizes and order only; a host run with the real gradients (GraphJob's payload
PayloadKind.DIGITS, gradswitch/hosts/graph_digits.py) computes them as each all-reduce's input.
"""

from __future__ import annotations

from gradswitch.workload.floats import BlockExponent
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
EXPONENTS = "exponents"


def digits_bytes() -> int:
    """The bytes of one iteration's all-reduce: every gradient of the MLP, as int32."""
    return digits_profile().elements * BYTES_PER_ELEMENT


def digits_codes() -> int:
    """The exponent codes of one iteration (block exponents): one per block of each tensor, every tensor's blocks
    its own (as the loop's per-tensor reductions make them)."""
    block = BlockExponent(1)  # the blocks' count depends on the block's size alone
    return sum(block.blocks(t.elements) for t in digits_profile().tensors)


def digits_graph(ranks: int, iterations: int, compute_s: float = 0.0, name: str = "", exponents: bool = False
                 ) -> JobGraph:
    """train-digits on `ranks` workers for `iterations` iterations; `compute_s`: each gradient's computation,
    in seconds of the emulated cluster (0: the graph times communication alone); `exponents`: block exponents, each
    iteration's values after the all-reduce of its exponent codes."""
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
        if exponents:
            nodes.append(CollectiveNode(len(nodes), f"it{it}.{EXPONENTS}", CollectiveKind.ALL_REDUCE, group.name,
                                        digits_codes() * BYTES_PER_ELEMENT, (nodes[-1].id,)))
        nodes.append(CollectiveNode(len(nodes), f"it{it}.{ALL_REDUCE}", CollectiveKind.ALL_REDUCE, group.name, nbytes,
                                    (nodes[-1].id,)))
    graph = JobGraph(name or f"train-digits-n{ranks}", tuple(RankGraph(r, tuple(nodes)) for r in range(ranks)),
                     (group,))
    validate(graph)
    return graph
