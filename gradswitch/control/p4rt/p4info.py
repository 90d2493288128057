"""The program's P4Info: every table, action, field and counter looked up by name.

A name is an object's full name (`GradswitchIngress.l3.ipv4_routes`) or any suffix of it, cut
at a dot, that no other object of its kind ends with (`ipv4_routes`, `l3.ipv4_routes`), as
p4runtime-shell and the P4Runtime CLI tools accept. A name that does not exist raises
`UnknownName` listing the close matches; a suffix several objects share raises `AmbiguousName`.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from gradswitch.control.p4rt.proto import p4info_pb2
from gradswitch.protocol.paths import P4INFO


class P4Kind(Enum):
    """A kind of P4Info object: the P4Info field that lists them and how a person calls one."""

    table = ("tables", "table")
    action = ("actions", "action")
    action_profile = ("action_profiles", "action profile")
    counter = ("counters", "counter")
    direct_counter = ("direct_counters", "direct counter")
    meter = ("meters", "meter")
    direct_meter = ("direct_meters", "direct meter")
    controller_packet_metadata = ("controller_packet_metadata", "controller packet metadata")
    value_set = ("value_sets", "value set")
    register = ("registers", "register")
    digest = ("digests", "digest")

    @property
    def p4info_name(self) -> str:
        return self.value[0]

    @property
    def pretty_name(self) -> str:
        return self.value[1]


def suffixes(name: str) -> list[str]:
    """Every suffix of a dotted name cut at a dot, shortest first: c, b.c, a.b.c."""
    parts = name.split(".")
    return [".".join(parts[i:]) for i in range(len(parts) - 1, -1, -1)]


class UnknownName(KeyError):
    """A table, action, field, parameter or counter name the P4Info does not have."""

    def __init__(self, kind: str, name: str, candidates: Iterable[str], where: str = "") -> None:
        self.kind = kind
        self.name = name
        names = sorted(set(candidates))
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        scope = f" of {where}" if where else ""
        listing = ", ".join(names) if len(names) <= 12 else f"{len(names)} names"
        self.message = f"no {kind} {name!r}{scope}{hint} (known: {listing})"
        self._args: tuple[object, ...] = (kind, name, names, where)
        super().__init__(self.message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), self._args)

    def __str__(self) -> str:
        return self.message


class AmbiguousName(UnknownName):
    """A short name that several objects of one kind end with (`faults`: the ingress and the egress
    fault-injection tables); the message lists them and the shortest names that tell them apart."""

    def __init__(self, kind: str, name: str, candidates: Iterable[str], unique: Iterable[str] = ()) -> None:
        self.kind = kind
        self.name = name
        self.candidates = sorted(set(candidates))
        self.unique = list(unique)
        choose = f"; give one of {', '.join(self.unique)}" if self.unique else ""
        self.message = (f"{kind} name {name!r} is ambiguous: it names {' and '.join(self.candidates)}{choose}")
        self._args = (kind, name, self.candidates, self.unique)
        KeyError.__init__(self, self.message)


@dataclass(frozen=True)
class FieldInfo:
    """A match field, action parameter or packet metadata field."""

    id: int
    name: str
    bitwidth: int
    match_type: str = ""  # EXACT, LPM, TERNARY, RANGE, OPTIONAL for match fields


_MATCH_TYPES = {
    p4info_pb2.MatchField.EXACT: "EXACT",
    p4info_pb2.MatchField.LPM: "LPM",
    p4info_pb2.MatchField.TERNARY: "TERNARY",
    p4info_pb2.MatchField.RANGE: "RANGE",
    p4info_pb2.MatchField.OPTIONAL: "OPTIONAL",
}


class P4Info:
    """Name-based view of one P4Info message."""

    def __init__(self, message: p4info_pb2.P4Info) -> None:
        self.message = message
        self._by_id: dict[int, tuple[P4Kind, str]] = {}
        self._full: dict[P4Kind, dict[str, Any]] = {kind: {} for kind in P4Kind}
        self._by_name: dict[tuple[P4Kind, str], Any] = {}  # full names and unique suffixes
        shared: Counter[tuple[P4Kind, str]] = Counter()
        for kind in P4Kind:
            for obj in getattr(message, kind.p4info_name):
                name = obj.preamble.name
                self._by_id[obj.preamble.id] = (kind, name)
                self._full[kind][name] = obj
                for suffix in suffixes(name):
                    self._by_name[(kind, suffix)] = obj
                    shared[(kind, suffix)] += 1
        for key, count in shared.items():
            if count > 1 and key[1] not in self._full[key[0]]:
                del self._by_name[key]

    @classmethod
    def from_file(cls, path: Path = P4INFO) -> P4Info:
        message = p4info_pb2.P4Info()
        text_format.Merge(path.read_text(), message)
        return cls(message)

    # ---- objects by name ----

    def find(self, kind: P4Kind, name: str) -> Any | None:
        """The object a full name or unique suffix names, None when none does."""
        return self._by_name.get((kind, name))

    def _get(self, kind: P4Kind, name: str) -> Any:
        obj = self.find(kind, name)
        if obj is None:
            matches = [n for n in self.names(kind) if n == name or n.endswith("." + name)]
            if len(matches) > 1:
                raise AmbiguousName(kind.pretty_name, name, matches, [self.unique_name(kind, n) for n in matches])
            raise UnknownName(kind.pretty_name, name, self.unique_names(kind))
        return obj

    def unique_name(self, kind: P4Kind, full: str) -> str:
        """The shortest suffix of a full name that names only it (`ipv4_routes`, `ingress_faults.faults`)."""
        for suffix in suffixes(full):
            if self.find(kind, suffix) is not None:
                return suffix
        return full

    def unique_names(self, kind: P4Kind) -> list[str]:
        """The shortest unambiguous name of every object of a kind."""
        return [self.unique_name(kind, n) for n in self.names(kind)]

    def table_labels(self) -> list[str]:
        return self.unique_names(P4Kind.table)

    def counter_labels(self) -> list[str]:
        return self.unique_names(P4Kind.counter)

    def table_label(self, table: str) -> str:
        """How a table is shown to a person: its shortest unambiguous name."""
        return self.unique_name(P4Kind.table, self.table(table).preamble.name)

    def names(self, kind: P4Kind) -> list[str]:
        """Full names of every object of a kind, in P4Info order."""
        return list(self._full[kind])

    def table(self, name: str) -> Any:
        return self._get(P4Kind.table, name)

    def action(self, name: str) -> Any:
        return self._get(P4Kind.action, name)

    def counter(self, name: str) -> Any:
        return self._get(P4Kind.counter, name)

    def direct_counter(self, name: str) -> Any:
        return self._get(P4Kind.direct_counter, name)

    def table_names(self) -> list[str]:
        return self.names(P4Kind.table)

    def counter_names(self) -> list[str]:
        return self.names(P4Kind.counter)

    def name_of(self, obj_id: int) -> str:
        try:
            return self._by_id[obj_id][1]
        except KeyError:
            raise UnknownName("object id", str(obj_id), []) from None

    # ---- fields ----

    def match_fields(self, table: str) -> list[FieldInfo]:
        return [
            FieldInfo(mf.id, mf.name, mf.bitwidth, _MATCH_TYPES.get(mf.match_type, "UNSPECIFIED"))
            for mf in self.table(table).match_fields
        ]

    def match_field(self, table: str, name: str) -> FieldInfo:
        fields = self.match_fields(table)
        for f in fields:
            if f.name == name or f.name.split(".")[-1] == name:
                return f
        raise UnknownName("match field", name, [f.name for f in fields], where=f"table {table}")

    def match_field_by_id(self, table: str, field_id: int) -> FieldInfo:
        for f in self.match_fields(table):
            if f.id == field_id:
                return f
        raise UnknownName("match field id", str(field_id), [], where=f"table {table}")

    def params(self, action: str) -> list[FieldInfo]:
        return [FieldInfo(p.id, p.name, p.bitwidth) for p in self.action(action).params]

    def param(self, action: str, name: str) -> FieldInfo:
        params = self.params(action)
        for p in params:
            if p.name == name:
                return p
        raise UnknownName("parameter", name, [p.name for p in params], where=f"action {action}")

    def table_actions(self, table: str) -> list[str]:
        """Full names of the actions a table may run."""
        return [self.name_of(ref.id) for ref in self.table(table).action_refs]

    def table_action(self, table: str, action: str) -> Any:
        """One of the table's actions, by full name or any suffix unique among the table's actions
        (so `drop_fraction` works for a table although two controls define one)."""
        names = self.table_actions(table)
        matches = [n for n in names if n == action or n.endswith("." + action)]
        if len(matches) != 1:
            raise UnknownName("action", action, [n.split(".")[-1] for n in names], where=f"table {table}")
        return self.action(matches[0])

    def table_is_ternary(self, table: str) -> bool:
        """True when entries of the table need a priority (ternary, range or optional keys)."""
        return any(f.match_type in ("TERNARY", "RANGE", "OPTIONAL") for f in self.match_fields(table))

    def direct_counter_of(self, table: str) -> Any | None:
        tid = self.table(table).preamble.id
        for dc in self.message.direct_counters:
            if dc.direct_table_id == tid:
                return dc
        return None

    def packet_metadata(self, header: str) -> list[FieldInfo]:
        """Fields of the packet_in or packet_out controller header."""
        obj = self._get(P4Kind.controller_packet_metadata, header)
        return [FieldInfo(m.id, m.name, m.bitwidth) for m in obj.metadata]

    def counter_size(self, name: str) -> int:
        return int(self.counter(name).size)
