"""The program's P4Info: every table, action, field and counter looked up by name.

Built on p4runtime-shell's `Context` (which also accepts any unique suffix of a name,
e.g. `ipv4_routes` for `GradswitchIngress.l3.ipv4_routes`) and its byte encoding.
A name that does not exist raises `UnknownName` listing the close matches.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4runtime_sh.context import Context, P4Type

from protocol.paths import P4INFO


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

    def __init__(self, message: Any) -> None:
        self.message = message
        self._ctx = Context()
        self._ctx.set_p4info(message)

    @classmethod
    def from_file(cls, path: Path = P4INFO) -> P4Info:
        message = p4info_pb2.P4Info()
        text_format.Merge(path.read_text(), message)
        return cls(message)

    # ---- objects by name ----

    def _get(self, p4type: Any, name: str) -> Any:
        obj = self._ctx.get_obj(p4type, name)
        if obj is None:
            # p4runtime-shell drops a suffix several names share: say so, and which they are.
            matches = [n for n in self.names(p4type) if n == name or n.endswith("." + name)]
            if len(matches) > 1:
                raise AmbiguousName(p4type.pretty_name, name, matches,
                                    [self.unique_name(p4type, n) for n in matches])
            raise UnknownName(p4type.pretty_name, name, self.unique_names(p4type))
        return obj

    def unique_name(self, p4type: Any, full: str) -> str:
        """The shortest suffix of a full name that names only it (`ipv4_routes`, `ingress_faults.faults`)."""
        parts = full.split(".")
        for i in range(len(parts) - 1, -1, -1):
            suffix = ".".join(parts[i:])
            if self._ctx.get_obj(p4type, suffix) is not None:
                return suffix
        return full

    def unique_names(self, p4type: Any) -> list[str]:
        """The shortest unambiguous name of every object of a type."""
        return [self.unique_name(p4type, n) for n in self.names(p4type)]

    def table_labels(self) -> list[str]:
        return self.unique_names(P4Type.table)

    def counter_labels(self) -> list[str]:
        return self.unique_names(P4Type.counter)

    def table_label(self, table: str) -> str:
        """How a table is shown to a person: its shortest unambiguous name."""
        return self.unique_name(P4Type.table, self.table(table).preamble.name)

    def names(self, p4type: Any) -> list[str]:
        """Full names of every object of a type."""
        return [name for name, _ in self._ctx.get_objs(p4type)]

    def table(self, name: str) -> Any:
        return self._get(P4Type.table, name)

    def action(self, name: str) -> Any:
        return self._get(P4Type.action, name)

    def counter(self, name: str) -> Any:
        return self._get(P4Type.counter, name)

    def direct_counter(self, name: str) -> Any:
        return self._get(P4Type.direct_counter, name)

    def table_names(self) -> list[str]:
        return self.names(P4Type.table)

    def counter_names(self) -> list[str]:
        return self.names(P4Type.counter)

    def name_of(self, obj_id: int) -> str:
        return str(self._ctx.get_name_from_id(obj_id))

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
        obj = self._get(P4Type.controller_packet_metadata, header)
        return [FieldInfo(m.id, m.name, m.bitwidth) for m in obj.metadata]

    def counter_size(self, name: str) -> int:
        return int(self.counter(name).size)
