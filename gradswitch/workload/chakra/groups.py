"""Process groups of a Chakra trace: the ranks behind each `pg_name`.

Chakra's nodes name their process group (`pg_name`) and nothing else; ASTRA-sim takes each
group's ranks from a separate JSON (`--comm-group-configuration`): `{"1": [0, 1], "2": [2, 3]}`.
gradswitch reads the same JSON from `PREFIX.groups.json` beside the trace files (or a file
given). A collective without pg_name, or every collective of a trace without a groups file, runs
on the world group (every rank).

The file is ASTRA-sim's, so gradswitch writes it without `format` (ASTRA-sim would take the key for a group):
every file without one is GROUPS_FORMAT 1, this layout. A file with `format` is read only when it is 1
(gradswitch/formats.py), the key left out of the groups.
"""

from __future__ import annotations

import json
from pathlib import Path

from gradswitch.formats import FormatError, check_format
from gradswitch.workload.graph import GraphError, ProcessGroup

WORLD = "world"  # the name of the group of every rank
GROUPS_FORMAT = 1  # the layout above; written without `format` (ASTRA-sim's file), read as 1 without it
SUFFIX = ".groups.json"


def groups_path(prefix: Path) -> Path:
    """DIR/PREFIX -> DIR/PREFIX.groups.json"""
    return prefix.parent / f"{prefix.name}{SUFFIX}"


def read_groups(path: Path, ranks: int) -> dict[str, ProcessGroup]:
    """The groups a groups JSON defines, checked: names to lists of distinct ranks in 0..ranks-1."""
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise GraphError(f"{path}: not JSON ({e}); a groups file maps each pg_name to its ranks, "
                         'e.g. {"1": [0, 1], "2": [2, 3]}') from None
    if not isinstance(raw, dict):
        raise GraphError(f'{path}: a {type(raw).__name__}; a groups file is an object such as {{"1": [0, 1]}}')
    try:
        check_format(raw, path, "process groups file", GROUPS_FORMAT, missing_is=1)
    except FormatError as e:  # a trace's refusals are GraphErrors
        raise GraphError(str(e)) from None
    out: dict[str, ProcessGroup] = {}
    for name, members in raw.items():
        if name == "format":
            continue
        if not isinstance(members, list) or not members or not all(type(x) is int for x in members):
            raise GraphError(f"{path}: group {name!r} is {members!r}; give a non-empty list of rank numbers")
        bad = [x for x in members if not 0 <= x < ranks]
        if bad:
            raise GraphError(f"{path}: group {name!r} names rank {bad[0]}, out of range (the trace has ranks "
                             f"0..{ranks - 1})")
        if len(set(members)) != len(members):
            raise GraphError(f"{path}: group {name!r} names a rank twice: {members}")
        out[str(name)] = ProcessGroup(str(name), tuple(members))
    return out


def is_world(group: ProcessGroup, ranks: int) -> bool:
    """The default group a trace names by leaving pg_name out."""
    return group.name == WORLD and group.ranks == tuple(range(ranks))


def write_groups(path: Path, groups: list[ProcessGroup]) -> None:
    """ASTRA-sim's --comm-group-configuration, as it reads it: no `format` (GROUPS_FORMAT 1 all the same)."""
    path.write_text(json.dumps({g.name: list(g.ranks) for g in groups}, indent=1) + "\n")
