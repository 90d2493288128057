"""The names the graph generators give their nodes, and the one parser of them.

A generated node is named `it<I>.<label>[.<what>]`: iteration I, what the node does (NodeLabel) and, for most
labels, which one (a layer's name, a tensor's index, a digits reduction's tensor). A model's training graph gives
`it3.fwd.conv1`, `it3.bwd.conv1`, `it3.allreduce.0` (`it3.codes.0` for exponent codes); a graph without computation
`it3.allreduce.0`; a PyTorch job's graph also `it3.optimizer`; train-digits `it3.gradient`, `it3.all_reduce.fc2.bias`
and `it3.exponents.fc2.bias`. A trace's nodes (Chakra) have names of their own: parse_node_name gives None for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.protocol.choice import Choice

PREFIX = "it"


class NodeLabel(Choice):
    """What a generated node does: its name's second part."""

    FORWARD = "fwd"
    BACKWARD = "bwd"
    ALL_REDUCE = "allreduce"
    CODES = "codes"
    OPTIMIZER = "optimizer"
    GRADIENT = "gradient"
    DIGITS_ALL_REDUCE = "all_reduce"
    DIGITS_EXPONENTS = "exponents"


TRAINING_LABELS = frozenset({NodeLabel.FORWARD, NodeLabel.BACKWARD, NodeLabel.ALL_REDUCE, NodeLabel.CODES})
"""The labels of a model's training graph and of a graph without computation (each with a `what`)."""

DIGITS_LABELS = frozenset({NodeLabel.GRADIENT, NodeLabel.DIGITS_ALL_REDUCE, NodeLabel.DIGITS_EXPONENTS})
"""train-digits' labels."""

_BY_VALUE = {label.value: label for label in NodeLabel}


@dataclass(frozen=True)
class NodeName:
    """A generated node's name, parsed: `it3.fwd.conv1` is NodeName(3, NodeLabel.FORWARD, "conv1")."""

    iteration: int
    label: NodeLabel
    what: str = ""

    def __str__(self) -> str:
        return node_name(self.iteration, self.label, self.what)


def node_name(iteration: int, label: NodeLabel, what: object = "") -> str:
    """The name of iteration `iteration`'s node `label` (`what`: which one, left out when empty)."""
    tail = str(what)
    return f"{PREFIX}{iteration}.{label.value}" + (f".{tail}" if tail else "")


def iteration_head(iteration: int) -> str:
    """What every node name of iteration `iteration` starts with (`it3.`)."""
    return f"{PREFIX}{iteration}."


def parse_node_name(name: str) -> NodeName | None:
    """`it3.fwd.conv1` -> NodeName(3, FORWARD, "conv1"); None for a name no generator gives (a trace's node, an
    unknown label, an iteration that is not a number)."""
    head, dot, rest = name.partition(".")
    number = head[len(PREFIX):]
    if not dot or not head.startswith(PREFIX) or not number.isascii() or not number.isdigit():
        return None
    text, _, what = rest.partition(".")
    label = _BY_VALUE.get(text)
    if label is None:
        return None
    return NodeName(int(number), label, what)


def iteration_prefix(name: str) -> int | None:
    """The iteration a node of any of the generators' graphs belongs to: 3 for `it3.fwd.conv1`, `it3.allreduce.0`
    or `it3.gradient`; None for a name no generator gives."""
    parsed = parse_node_name(name)
    return parsed.iteration if parsed is not None else None
