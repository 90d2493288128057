"""Every third-party module the project imports is declared in pyproject.toml.

A module installed by hand in a developer's venv (thrift once was) passes every local test and
breaks CI's clean venv at collection time; this test fails first, naming the module.
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


def _declared(extra: str | None) -> set[str]:
    project = PYPROJECT["project"]
    specs = project["dependencies"] + (project["optional-dependencies"][extra] if extra else [])
    return {_canonical(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in specs}


def _imports(folders: list[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], path)
    return {m: p for m, p in found.items() if m not in sys.stdlib_module_names and m not in OWN}


def _undeclared(folders: list[str], extra: str | None) -> list[str]:
    declared = _declared(extra)
    dists = packages_distributions()
    missing = []
    for module, path in sorted(_imports(folders).items()):
        # A module not installed here (tomli on 3.11) counts as declared under its own name.
        owners = {_canonical(d) for d in dists.get(module, [])} | {_canonical(module)}
        if not owners & declared:
            missing.append(f"{module} (imported by {path.relative_to(ROOT)}; installed from {sorted(owners)})")
    return missing


def test_package_imports_are_runtime_dependencies() -> None:
    assert _undeclared([*PACKAGES, "bench"], None) == []


def test_test_imports_are_dev_dependencies() -> None:
    assert _undeclared(["tests"], "dev") == []
