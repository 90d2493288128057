"""Workload train-digits (gradswitch/workload/digits.py: an MLP learning scikit-learn's digits) as an execution graph.

Per iteration and rank: a compute node, the minibatch's gradient (`it{i}.gradient`), then the loop's reductions
(gradswitch/hosts/digits_job.py through gradswitch/workload/encoding.py Encoder.reduce), one all-reduce of the world
group per tensor in back-propagation order (digits_profile's, output layer first), each its tensor's elements x 4
bytes (the int32 fixed point the workers send: `it{i}.all_reduce.{tensor}`); with block exponents (`exponents`:
float_mode = exponent, gradswitch/workload/floats.py) every tensor's values after the all-reduce of its exponent codes
(`it{i}.exponents.{tensor}`, one int32 per block). Each waits for the one before, as the loop runs them one at a
time, and the next iteration's computation for the last (the SGD step needs every sum): the loop's reductions in
the loop's order and sizes, so the same bytes on the wire. The graph carries sizes and order only; a host run with
the real gradients (GraphJob's payload PayloadKind.DIGITS, gradswitch/hosts/graph_digits.py) computes them as each
all-reduce's input.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.workload.dlcp import layer_class
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
from gradswitch.workload.node_names import NodeLabel, node_name

BYTES_PER_ELEMENT = 4  # int32 fixed point on the wire


def digits_bytes() -> int:
    """The values' bytes of one iteration's all-reduces: every gradient of the MLP, as int32."""
    return digits_profile().elements * BYTES_PER_ELEMENT


def digits_codes() -> int:
    """The exponent codes of one iteration (block exponents): one per block of each tensor, every tensor's blocks
    its own (as the loop's per-tensor reductions make them)."""
    block = BlockExponent(1)  # the blocks' count depends on the block's size alone
    return sum(block.blocks(t.elements) for t in digits_profile().tensors)


@dataclass(frozen=True)
class DigitsReduction:
    """One of an iteration's reductions: tensor `tensor` (its index in digits_profile), its exponent codes (`codes`)
    or its values, of `elements` int32."""

    tensor: int
    name: str  # the tensor's
    codes: bool
    elements: int

    @property
    def kind(self) -> NodeLabel:
        """Its node's label: `exponents` or `all_reduce` (its name: `it3.all_reduce.fc2.bias`)."""
        return NodeLabel.DIGITS_EXPONENTS if self.codes else NodeLabel.DIGITS_ALL_REDUCE


def digits_reductions(exponents: bool = False) -> tuple[DigitsReduction, ...]:
    """An iteration's reductions in order, as the loop's Encoder.reduce makes them tensor by tensor: each tensor's
    values (fixed point), or its codes then its values (`exponents`)."""
    block = BlockExponent(1)
    out: list[DigitsReduction] = []
    for j, t in enumerate(digits_profile().tensors):
        if exponents:
            out.append(DigitsReduction(j, t.name, True, block.blocks(t.elements)))
        out.append(DigitsReduction(j, t.name, False, t.elements))
    return tuple(out)


def digits_graph(ranks: int, iterations: int, compute_s: float = 0.0, name: str = "", exponents: bool = False
                 ) -> JobGraph:
    """train-digits on `ranks` workers for `iterations` iterations; `compute_s`: each gradient's computation,
    in seconds of the emulated cluster (0: the graph times communication alone); `exponents`: block exponents, each
    tensor's values after the all-reduce of its exponent codes (digits_reductions)."""
    if ranks < 1:
        raise GraphError(f"{ranks} ranks: train-digits needs at least 1")
    if iterations < 1:
        raise GraphError(f"{iterations} iterations: train at least once")
    if not compute_s >= 0:
        raise GraphError(f"a gradient's computation of {compute_s} s: give 0 s or more")
    group = world_group(ranks)
    reductions = digits_reductions(exponents)
    nodes: list[Node] = []
    for it in range(iterations):
        deps = (nodes[-1].id,) if nodes else ()
        nodes.append(ComputeNode(len(nodes), node_name(it, NodeLabel.GRADIENT), compute_s, deps))
        for k, r in enumerate(reductions):
            nodes.append(CollectiveNode(len(nodes), node_name(it, r.kind, r.name), CollectiveKind.ALL_REDUCE,
                                        group.name, r.elements * BYTES_PER_ELEMENT, (nodes[-1].id,),
                                        layer_class=layer_class(k, len(reductions)), droppable=not r.codes))
    graph = JobGraph(name or f"train-digits-n{ranks}", tuple(RankGraph(r, tuple(nodes)) for r in range(ranks)),
                     (group,))
    validate(graph)
    return graph
