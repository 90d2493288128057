"""Imports run one way, low to high, at module and at folder level:

  0  gradswitch.protocol    facts the switch program, its control plane, the hosts and the simulator share;
     gradswitch.version     which code a run came from (the package's root modules sit on floor 0)
     gradswitch.formats     the `format` every JSON file carries, and its readers' check
  1  gradswitch.topology    the backend-neutral topology model;  gradswitch.roce  the host RoCE v2 transport
  2  gradswitch.workload    jobs, model profiles, compute, execution graphs;  gradswitch.net  the emulated network
  3  gradswitch.hosts       the host processes;  gradswitch.control  the switch control plane (P4Runtime, REPL);
     gradswitch.sim         the simulator's driver
  4  gradswitch.experiment  the orchestration: specs, runs, compare, reports
  5  gradswitch.cli         the command line and its tools (doctor, build, export-et, trace-model, shell)
  6  gradswitch.__main__    `python -m gradswitch`
  7  bench                  benchmarks (outside the package: they import it, it never imports them)

Parts of one floor do not import each other, and no module imports itself through others.
docs/architecture.md draws the same picture.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLOORS: dict[str, int] = {
    "gradswitch.protocol": 0, "gradswitch.version": 0, "gradswitch.formats": 0, "gradswitch": 0,
    "gradswitch.topology": 1, "gradswitch.roce": 1,
    "gradswitch.workload": 2, "gradswitch.net": 2,
    "gradswitch.hosts": 3, "gradswitch.control": 3, "gradswitch.sim": 3,
    "gradswitch.experiment": 4,
    "gradswitch.cli": 5,
    "gradswitch.__main__": 6,
    "bench": 7,
}
PACKAGES = ("gradswitch", "bench")  # the folders the check reads


@dataclass(frozen=True, order=True)
class Part:
    floor: int
    name: str


def part_of(module: str) -> Part:
    """The floor and part of a module of the project: its package's second name (gradswitch.hosts.ring -> hosts)."""
    names = module.split(".")
    for n in (2, 1):
        key = ".".join(names[:n])
        if len(names) >= n and key in FLOORS:
            return Part(FLOORS[key], key)
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
    outside = {t for m, ts in graph().items() if m.startswith("gradswitch.protocol") for t in ts
               if not t.startswith("gradswitch.protocol")}
    assert outside == set()


@pytest.mark.parametrize(("importer", "target"), [
    ("gradswitch.protocol.p4_constants", "gradswitch.roce.qp"),  # the bottom importing the host transport
    ("gradswitch.roce.engine", "gradswitch.net.network"),  # two parts of one floor
    ("gradswitch.hosts.comm", "gradswitch.control.fabric"),  # the hosts reaching into the switch control plane
    ("gradswitch.control.fabric", "gradswitch.experiment.runner"),  # the control plane into orchestration
    ("gradswitch.control.controls.netreduce", "gradswitch.hosts.netreduce"),
    ("gradswitch.sim.sim_config", "gradswitch.experiment.spec"),  # the simulator's side reaching into the orchestration
    ("gradswitch.sim.sim_config", "gradswitch.control.routing"),  # the simulator's driver on the switch control plane
    ("gradswitch.hosts.ring", "gradswitch.sim.sim_config"),
    ("gradswitch.topology.model", "gradswitch.net.network"),  # the neutral model on one backend
    ("gradswitch.workload.plan", "gradswitch.hosts.iteration"),  # the workload model on the host processes
])
def test_the_check_sees_a_wrong_way_import(importer, target):
    assert wrong_way({importer: {target}}) != []


def test_the_check_sees_a_cycle():
    assert cycles({"gradswitch.hosts.a": {"gradswitch.hosts.b"}, "gradswitch.hosts.b": {"gradswitch.hosts.a"}}) != []


def test_every_package_of_the_project_has_a_floor():
    """A new part of the package must be placed on a floor here before the check can judge it."""
    parts = {f"gradswitch.{p.parent.name}" for p in (ROOT / "gradswitch").glob("*/__init__.py")}
    parts |= {f"gradswitch.{p.stem}" for p in (ROOT / "gradswitch").glob("*.py") if p.stem != "__init__"}
    assert parts | {"gradswitch", "bench"} == set(FLOORS)


def test_one_top_level_package_ships():
    """Everything the product ships is under gradswitch: no other importable folder at the checkout's root but
    the tests and the benchmarks (which the wheel leaves out)."""
    assert {p.parent.name for p in ROOT.glob("*/__init__.py")} == {"gradswitch", "tests", "bench"}


def test_the_simulator_driver_imports_nothing_of_the_control_plane():
    assert {t for m, ts in graph().items() if m.startswith("gradswitch.sim")
            for t in ts if t.startswith("gradswitch.control")} == set()


def test_the_package_never_imports_the_benchmarks():
    """bench/ calls the package (the studies, the tables, the judging); the package works without bench/, which the
    wheel leaves out."""
    assert {m: sorted(t for t in ts if t.split(".")[0] == "bench") for m, ts in graph().items()
            if m.startswith("gradswitch") and any(t.split(".")[0] == "bench" for t in ts)} == {}
