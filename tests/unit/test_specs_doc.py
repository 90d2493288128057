"""docs/specs.md names every key of a compare spec and of a run, with the defaults and command-line options
the code has, each run key under the section spec.SECTIONS puts it in: a key added, removed, changed or moved in
the code fails here until the document follows."""

from __future__ import annotations

import argparse
import re
from dataclasses import MISSING, Field, fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest

from gradswitch.cli.main import build_parser
from gradswitch.experiment.compare import SPEC_KEYS
from gradswitch.experiment.spec import (
    CLI_OPTIONS,
    EMULATE_OPTIONS,
    RUN_KEYS,
    SECTION_CLASSES,
    SECTION_OF,
    SECTIONS,
    SIM_OPTIONS,
    DlcpOptions,
    ExperimentSpec,
    SimOptions,
    load_experiment,
)
from gradswitch.experiment.spec import TABLES as RUN_TABLES
from gradswitch.protocol.choice import Choice
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.job import Crash, Emulation

DOC = Path(__file__).resolve().parents[2] / "docs" / "specs.md"


def experiment_options() -> set[str]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {o for a in sub.choices["experiment"]._actions for o in a.option_strings}


def default_text(f: Field[Any]) -> str:
    """A field's default as the document writes it: TOML in backquotes, or (none), (table), (required)."""
    if f.default is not MISSING:
        value = f.default
    elif f.default_factory is not MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    if value is None:
        return "(none)"
    if is_dataclass(value):
        return "(table)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Choice | str):
        return f'`"{value}"`'
    return f"`{value}`"


def section(heading: str) -> str:
    text = DOC.read_text()
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def rows(heading: str) -> dict[str, list[str]]:
    """A section's table: the key of each row (first cell, in backquotes) and its other cells."""
    out = {}
    for line in section(heading).splitlines():
        match = re.match(r"^\| `(\w+)` \|(.*)\|$", line)
        if match:
            out[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return out


def option(name: str, options: dict[str, str], known: set[str]) -> str:
    flag = "--" + options.get(name, name.replace("_", "-"))
    return f"`{flag}`" if flag in known else "-"


TABLES: list[tuple[str, Any, dict[str, str], set[str]]] = [
    ("A run", ExperimentSpec, CLI_OPTIONS, set()),
    ("`sim = { ... }`", SimOptions, SIM_OPTIONS, set()),
    ("`dlcp = { ... }`", DlcpOptions, {}, {"hosts"}),
    ("`emulate = { ... }`", Emulation, EMULATE_OPTIONS, set()),
    ("`crash = { ... }`", Crash, {}, set()),
]


@pytest.mark.parametrize(("heading", "cls", "options", "skip"), TABLES, ids=[t[1].__name__ for t in TABLES])
def test_every_field_is_in_the_document_with_its_default_and_option(heading, cls, options, skip):
    documented = rows(heading)
    own = [f for f in fields(cls) if f.name not in skip]
    if cls is ExperimentSpec:  # a run's keys: its own (name) and each section's, flat (SECTIONS)
        own = [f for f in own if f.name in RUN_KEYS] + [f for c in SECTION_CLASSES.values() for f in fields(c)]
    if cls is DlcpOptions:  # DlcpPolicy's host fields sit flat beside DlcpOptions' own (spec.dataclass_from_dict)
        own += [f for f in fields(DlcpPolicy) if f.name not in ("drop", "reorder")]
    names = [f.name for f in own]
    assert sorted(documented) == sorted(names), (
        f"docs/specs.md, section {heading!r}: missing {sorted(set(names) - set(documented))}, "
        f"not fields of {cls.__name__}: {sorted(set(documented) - set(names))}")
    known = experiment_options() if options or cls is ExperimentSpec else set()
    for f in own:
        default, flag, what = documented[f.name]
        assert default == default_text(f), f"docs/specs.md: {f.name}'s default is {default}, the code's " \
                                           f"{default_text(f)}"
        expected = option(f.name, options, known) if known else "-"
        assert flag == expected, f"docs/specs.md: {f.name}'s command-line option is {flag}, the code's {expected}"
        assert what, f"docs/specs.md: {f.name} says nothing about what it is"


def test_every_top_level_key_of_a_compare_spec_is_in_the_document():
    documented = rows("The top level of a compare spec")
    assert sorted(documented) == sorted(SPEC_KEYS), (
        f"docs/specs.md: missing {sorted(set(SPEC_KEYS) - set(documented))}, "
        f"not keys of a compare spec: {sorted(set(documented) - set(SPEC_KEYS))}")


def test_the_document_explains_size_bytes_against_size():
    text = section("Sizes")
    assert "`size_bytes = 1048576`" in text and "`--size 1MiB`" in text


def subsection_rows(heading: str) -> dict[str, list[str]]:
    """A `### heading` table of the section "A run": its rows."""
    text = section("A run")
    start = text.index(f"\n### {heading}")
    end = text.find("\n### ", start + 1)
    out = {}
    for line in (text[start:] if end < 0 else text[start:end]).splitlines():
        match = re.match(r"^\| `(\w+)` \|(.*)\|$", line)
        if match:
            out[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return out


def test_every_run_key_is_in_one_section_and_the_document_says_which():
    """SECTIONS (from ExperimentSpec's section classes) is the one definition of where a run's keys go: every field
    of ExperimentSpec a section or a key at the run's top (RUN_KEYS), no key in two sections (a key's flat name
    names one value: ExperimentSpec.of/but, the flat form of a spec file), and docs/specs.md's table of each section
    lists exactly its keys."""
    placed = [k for keys in SECTIONS.values() for k in keys] + list(RUN_KEYS)
    assert not {k for k in placed if placed.count(k) > 1}, f"keys in two places: {placed}"
    assert [f.name for f in fields(ExperimentSpec)] == [*RUN_KEYS, *SECTIONS]
    assert all(SECTION_OF[k] == name for name, keys in SECTIONS.items() for k in keys)
    assert set(RUN_TABLES) <= set(SECTION_OF)
    headings = re.findall(r"^### `\[(\w+)\]`", section("A run"), re.M)
    assert headings == list(SECTIONS), f"docs/specs.md's sections of a run: {headings}, the code's {list(SECTIONS)}"
    for name, keys in SECTIONS.items():
        documented = list(subsection_rows(f"`[{name}]`"))
        assert sorted(documented) == sorted(keys), (
            f"docs/specs.md, [{name}]: missing {sorted(set(keys) - set(documented))}, "
            f"not in the code's [{name}]: {sorted(set(documented) - set(keys))}")
    assert list(subsection_rows("At the top of a run")) == list(RUN_KEYS)


def test_the_documents_example_of_a_sectioned_experiment_file_runs(tmp_path):
    (example,) = re.findall(r"```toml\n(name = \"ring-sr\".*?)```", section("A run"), re.S)
    path = tmp_path / "run.toml"
    path.write_text(example)
    spec = load_experiment(path)
    assert (spec.name, spec.network.topo, spec.network.workers, spec.network.bw_mbps, spec.network.sim.check,
            spec.transport.transport, spec.transport.dlcp.spray,
            spec.measurement.iterations) == ("ring-sr", "leafspine", 8, 20.0, "digest", "sr", True, 5)
