"""Every value chosen from a fixed set is a Choice (gradswitch/protocol/choice.py): one str enum that prints its value,
not a hand-made copy of it (a `(str, Enum)` class elsewhere, whose __str__ each copy wrote again)."""

from __future__ import annotations

import ast
from enum import Enum
from pathlib import Path

import gradswitch
from gradswitch.protocol.choice import Choice
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.graph_payload import PayloadKind

PACKAGE = Path(gradswitch.__file__).parent


def str_enums() -> list[str]:
    """The classes of the package that derive from both str and Enum themselves."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases}
                if {"str", "Enum"} <= bases or {"str", "enum.Enum"} <= bases:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    return found


def test_the_only_str_enum_is_choice() -> None:
    assert str_enums() == ["protocol/choice.py:Choice"]


def test_a_choice_prints_and_compares_as_its_value() -> None:
    for kind in (CollectiveKind.ALL_REDUCE, PayloadKind.DIGITS):
        assert isinstance(kind, Choice) and isinstance(kind, Enum)
        assert str(kind) == kind.value and f"{kind}" == kind.value and kind == kind.value
    assert CollectiveKind("all_gather") is CollectiveKind.ALL_GATHER
    assert PayloadKind.names() == ["synthetic", "train-digits", "gradients"]
