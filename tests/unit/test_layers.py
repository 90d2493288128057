"""Imports run one way: protocol/ at the bottom; roce/ (host transport) and mininet_topos/
(emulated network) on it; workers/ on roce/, and the switch control plane (controller/ but
its orchestration) on mininet_topos/ and roce/'s packet code; the simulator's Python side (ns3sim/)
on those; the orchestration (controller/experiment/, cli.py, testbed.py, doctor.py) and bench/ on top. Parts of
one floor do not import each other, and no module imports itself through others.
docs/architecture.md draws the same picture.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "roce", "mininet_topos", "workers", "controller", "ns3sim", "bench")
ORCHESTRATION = ("controller.experiment", "controller.cli", "controller.testbed", "controller.doctor")


@dataclass(frozen=True, order=True)
class Part:
    floor: int
    name: str


def part_of(module: str) -> Part:
    """The floor and part of a module of the project."""
    top = module.split(".")[0]
    if top == "protocol":
        return Part(0, "protocol")
    if top in ("roce", "mininet_topos"):
        return Part(1, top)
    if top == "workers":
        return Part(2, "workers")
    if top == "ns3sim":
        return Part(3, "ns3sim")
    if top == "controller":
        if module == "controller" or module.startswith(tuple(p for p in ORCHESTRATION)):
            return Part(4, "orchestration")
        return Part(2, "switch control plane")
    if top == "bench":
        return Part(5, "bench")
    raise ValueError(f"{module}: not a module of the project")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_imports(path: Path) -> set[str]:
    """Project modules a file imports, at the top or inside functions."""
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        found |= {name for name in names if name.split(".")[0] in PACKAGES}
    return found


def known_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module an imported name lives in (`from a.b import C` -> a.b)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def graph() -> dict[str, set[str]]:
    modules = known_modules()
    return {m: {r for n in project_imports(p) if (r := resolve(n, modules)) and r != m} for m, p in modules.items()}


def wrong_way(edges: dict[str, set[str]]) -> list[str]:
    """Imports from a lower floor to a higher one, or between two parts of one floor."""
    bad = []
    for importer, targets in edges.items():
        a = part_of(importer)
        for target in sorted(targets):
            b = part_of(target)
            if b.floor > a.floor or (b.floor == a.floor and b.name != a.name):
                bad.append(f"{importer} ({a.name}, floor {a.floor}) imports {target} ({b.name}, floor {b.floor})")
    return bad


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Modules that import themselves through others (package __init__ faces excluded)."""
    faces = {m for m in edges if (ROOT / m.replace(".", "/") / "__init__.py").exists()}
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges.get(m, set()) - faces):
            if state.get(t) == 1:
                found.append([*stack[stack.index(t):], t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(set(edges) - faces):
        if m not in state:
            visit(m)
    return found


def test_imports_run_down_the_floors():
    assert wrong_way(graph()) == []


def test_no_module_imports_itself_through_others():
    assert cycles(graph()) == []


def test_protocol_imports_nothing_of_the_project_but_itself():
    outside = {t for m, ts in graph().items() if m.startswith("protocol") for t in ts if not t.startswith("protocol")}
    assert outside == set()


@pytest.mark.parametrize(("importer", "target"), [
    ("protocol.config", "roce.qp"),  # the bottom importing the host transport
    ("roce.engine", "mininet_topos.network"),  # two parts of one floor
    ("workers.comm", "controller.fabric"),  # the hosts reaching into the switch control plane
    ("controller.fabric", "controller.experiment.runner"),  # the control plane into orchestration
    ("controller.controls.netreduce", "workers.netreduce"),
    ("ns3sim.config", "controller.experiment.spec"),  # the simulator's side reaching into the orchestration
    ("workers.ring", "ns3sim.config"),
])
def test_the_check_sees_a_wrong_way_import(importer, target):
    assert wrong_way({importer: {target}}) != []


def test_the_check_sees_a_cycle():
    assert cycles({"workers.a": {"workers.b"}, "workers.b": {"workers.a"}}) != []
