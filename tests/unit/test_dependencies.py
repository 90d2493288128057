"""Every third-party module the project imports is declared in pyproject.toml.

A module installed by hand in a developer's venv (thrift once was) passes every local test and
breaks CI's clean venv at collection time; this test fails first, naming the module. A module of
an optional extra (`digits`: scikit-learn) is imported only inside the function that needs it,
by a file that tells the user which extra to install.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (Ubuntu 22.04, the Vagrant VM): the same parser, from PyPI
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = [p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]]
OWN = {*PACKAGES, "bench", "tests"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared_specs(specs: list[str]) -> set[str]:
    return {_canonical(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in specs}


def _declared(extra: str | None) -> set[str]:
    """The distributions `pip install gradswitch[extra]` installs (an extra may name others: gradswitch[digits])."""
    project = PYPROJECT["project"]
    specs = project["dependencies"] + (project["optional-dependencies"][extra] if extra else [])
    named: set[str] = set()
    for spec in specs:
        inner = re.fullmatch(r"gradswitch\[([\w,-]+)\]", spec)
        if inner:
            named = named.union(*(_declared(e) for e in inner[1].split(",")))
    return _declared_specs(specs) | named


EXTRAS = {name: specs for name, specs in PYPROJECT["project"]["optional-dependencies"].items() if name != "dev"}


def _import_nodes(folders: list[str]) -> list[tuple[str, Path, bool]]:
    """(full module name, file, at module level) of every absolute import."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            top = {id(node) for node in tree.body}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                found += [(name, path, id(node) in top) for name in names]
    return found


def _imports(folders: list[str], top_level_only: bool = False) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for name, path, top in _import_nodes(folders):
        if top or not top_level_only:
            found.setdefault(name.split(".")[0], path)
    return {m: p for m, p in found.items() if m not in sys.stdlib_module_names and m not in OWN}


def _owners(module: str) -> set[str]:
    # A module not installed here (tomli on 3.11) counts as declared under its own name.
    return {_canonical(d) for d in packages_distributions().get(module, [])} | {_canonical(module)}


def _undeclared(folders: list[str], extra: str | None, optional: frozenset[str] = frozenset()) -> list[str]:
    declared = _declared(extra) | optional
    missing = []
    for module, path in sorted(_imports(folders).items()):
        owners = _owners(module)
        if not owners & declared:
            missing.append(f"{module} (imported by {path.relative_to(ROOT)}; installed from {sorted(owners)})")
    return missing


def test_package_imports_are_runtime_dependencies_or_extras() -> None:
    optional = frozenset(name for specs in EXTRAS.values() for name in _declared_specs(specs))
    assert _undeclared([*PACKAGES, "bench"], None, optional) == []


def test_test_imports_are_dev_dependencies() -> None:
    assert _undeclared(["tests"], "dev") == []


def test_extras_are_imported_inside_functions_that_name_the_extra() -> None:
    """`pip install gradswitch` without an extra imports every module, and a user who needs an extra's
    part is told in one line what to install."""
    wrong = []
    runtime = _declared(None)
    for extra, specs in EXTRAS.items():
        mine = _declared_specs(specs) - runtime
        for module, path in _imports([*PACKAGES], top_level_only=True).items():
            if _owners(module) & mine:
                wrong.append(f"{path.relative_to(ROOT)} imports {module} (extra {extra}) at module level")
        for module, path in _imports([*PACKAGES]).items():
            if _owners(module) & mine and f"gradswitch[{extra}]" not in path.read_text():
                wrong.append(f"{path.relative_to(ROOT)} imports {module} but never names 'gradswitch[{extra}]'")
    assert wrong == []


def test_dev_installs_every_extra() -> None:
    """The suite runs every part, so `.[dev]` brings every extra."""
    dev = PYPROJECT["project"]["optional-dependencies"]["dev"]
    assert {extra for extra in EXTRAS if f"gradswitch[{extra}]" not in dev} == set()


def test_p4runtime_messages_come_from_one_module() -> None:
    """The P4Runtime and google.rpc messages come from gradswitch/control/p4rt/proto.py (finsy's, generated for
    protobuf 6): the p4runtime wheel's `p4.*` modules do not load on protobuf's upb backend, and
    googleapis-common-protos' `google.rpc` modules register the same proto files as finsy's, so one
    process that imports both fails."""
    proto = ROOT / "gradswitch" / "control" / "p4rt" / "proto.py"
    imports = _import_nodes([*PACKAGES, "bench", "tests"])
    wrong = sorted({f"{path.relative_to(ROOT)}: {name}" for name, path, _ in imports
                    if (name == "p4" or name.startswith(("p4.", "google.rpc"))
                        or (name.startswith("finsy") and path != proto))})
    assert wrong == []


def test_protobuf_runs_its_upb_backend() -> None:
    """protobuf's fast backend: a pin back to protobuf 3.20 (pure Python, several times slower per
    P4Runtime write: bench/results/p4runtime-writes.json) fails here."""
    from google.protobuf.internal import api_implementation

    assert api_implementation.Type() == "upb"


def test_digits_without_its_extra_is_one_line_before_anything_starts(monkeypatch) -> None:
    """scikit-learn is the `digits` extra: a train-digits spec on a machine without it is refused by the
    spec's check, naming the extra, before a network comes up."""
    import gradswitch.workload.digits
    from gradswitch.experiment.spec import ExperimentSpec
    from gradswitch.workload.job import DType

    spec = ExperimentSpec.of(workload="train-digits", dtype=DType.FLOAT32)
    assert not [p for p in spec.problems() if "digits" in p]
    monkeypatch.setattr(gradswitch.workload.digits, "digits_available", lambda: False)
    assert [p for p in spec.problems() if "scikit-learn" in p] == [
        "workload = 'train-digits': the digits data set needs scikit-learn: pip install 'gradswitch[digits]'"]
