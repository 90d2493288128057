"""Entries as data: table entries, multicast groups and clone sessions, and their protobufs.

A `TableEntry` names its table, match fields, action and parameters as in the P4 source.
Values may be ints, bytes, or strings in the usual notations ("10.0.0.1",
"00:00:0a:00:00:01", "0x0800", "10.0.0.0/8" for LPM, "0x10&&&0xf0" for ternary,
"1..5" for range). `encode_*` turns them into P4Runtime messages through a `P4Info`,
`decode_*` turns messages read from a switch back into the same dataclasses with
canonical (integer) values, so an entry written and read back compares equal after
`normalize`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gradswitch.control.p4rt.p4info import FieldInfo, P4Info
from gradswitch.control.p4rt.proto import p4runtime_pb2


class EntryError(ValueError):
    """An entry that cannot be encoded: names the table, the field and what is wrong."""


@dataclass(frozen=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True)
class Ternary:
    value: int
    mask: int


@dataclass(frozen=True)
class Range:
    low: int
    high: int


Value = int | str | bytes
MatchValue = Value | Lpm | Ternary | Range


@dataclass(frozen=True)
class TableEntry:
    """One entry of a table, or its default action when `is_default`."""

    table: str
    match: Mapping[str, MatchValue] = field(default_factory=dict)
    action: str = ""
    params: Mapping[str, Value] = field(default_factory=dict)
    priority: int = 0
    is_default: bool = False

    def describe(self, table_label: str | None = None) -> str:
        """One line a person can read: table, match, action and parameters (a key alone, for a
        delete). `table_label` shows the table by that name (P4Info.table_label: unambiguous)."""
        if self.is_default:
            key = "default"
        else:
            key = " ".join(f"{short(k)}={format_match(v)}" for k, v in self.match.items())
            if self.priority:
                key += f" priority={self.priority}"
        entry = f"{table_label or short(self.table)}[{key}]"
        if not self.action:
            return entry if not self.is_default else f"{entry} -> (no action)"
        args = ", ".join(f"{k}={format_value(v)}" for k, v in self.params.items())
        return f"{entry} -> {short(self.action)}({args})"


@dataclass(frozen=True, order=True)
class Replica:
    port: int
    instance: int = 0


@dataclass(frozen=True)
class MulticastGroup:
    group_id: int
    replicas: tuple[Replica, ...] = ()  # a set: kept sorted, as switches return them in any order

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", tuple(sorted(self.replicas)))

    def describe(self) -> str:
        ports = ", ".join(f"{r.port}/{r.instance}" for r in self.replicas)
        return f"multicast group {self.group_id}: [{ports}]"


@dataclass(frozen=True)
class CloneSession:
    session_id: int
    replicas: tuple[Replica, ...] = ()
    class_of_service: int = 0
    packet_length_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", tuple(sorted(self.replicas)))

    def describe(self) -> str:
        ports = ", ".join(f"{r.port}/{r.instance}" for r in self.replicas)
        return f"clone session {self.session_id}: [{ports}]"


Entity = TableEntry | MulticastGroup | CloneSession


def short(name: str) -> str:
    return name.split(".")[-1]


# ---- values ----


def parse_int(value: Value, bitwidth: int, what: str) -> int:
    """An integer from an int, big-endian bytes, or a string (decimal, hex, IPv4, MAC)."""
    if isinstance(value, bool):
        raise EntryError(f"{what}: {value!r} is not a number")
    if isinstance(value, int):
        result = value
    elif isinstance(value, bytes):
        result = int.from_bytes(value, "big")
    else:
        text = value.strip()
        try:
            if text.count(".") == 3 and bitwidth == 32:
                result = int(ipaddress.IPv4Address(text))
            elif text.count(":") == 5 and bitwidth == 48:
                result = int(text.replace(":", ""), 16)
            else:
                result = int(text, 0)
        except ValueError:
            raise EntryError(f"{what}: cannot read {value!r} as a {bitwidth}-bit value") from None
    if result < 0 or result >= 1 << bitwidth:
        raise EntryError(f"{what}: {value!r} does not fit in {bitwidth} bits")
    return result


def to_bytes(value: int, bitwidth: int) -> bytes:
    """Canonical P4Runtime bytestring of a value: no leading zero bytes, one byte for 0
    (P4Runtime 1.x, "Bytestrings"); a value wider than its field raises EntryError."""
    if value < 0 or value.bit_length() > bitwidth:
        raise EntryError(f"{value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def format_value(value: object) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return str(value)


def format_match(value: MatchValue) -> str:
    if isinstance(value, Lpm):
        return f"{value.value:#x}/{value.prefix_len}"
    if isinstance(value, Ternary):
        return f"{value.value:#x}&&&{value.mask:#x}"
    if isinstance(value, Range):
        return f"{value.low}..{value.high}"
    return format_value(value)


def pretty(value: int, bitwidth: int, name: str) -> str:
    """A value in the notation a person expects for its field (IPv4, MAC or number)."""
    lowered = name.lower()
    if bitwidth == 32 and ("addr" in lowered or "ip" in lowered.split(".")[-1].split("_")):
        return str(ipaddress.IPv4Address(value))
    if bitwidth == 48:
        return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))
    return str(value)


# ---- match fields ----


def _parse_match(value: MatchValue, info: FieldInfo, what: str) -> MatchValue:
    """The match value as Lpm/Ternary/Range/int according to the field's match type."""
    width = info.bitwidth
    kind = info.match_type
    if kind == "LPM":
        if isinstance(value, Lpm):
            lpm = value
        elif isinstance(value, str) and "/" in value:
            addr, plen = value.split("/", 1)
            lpm = Lpm(parse_int(addr, width, what), parse_int(plen, 16, what))
        else:
            lpm = Lpm(parse_int(_plain(value, what), width, what), width)
        if not 0 <= lpm.prefix_len <= width:
            raise EntryError(f"{what}: prefix length {lpm.prefix_len} outside 0..{width}")
        mask = ((1 << lpm.prefix_len) - 1) << (width - lpm.prefix_len)
        return Lpm(lpm.value & mask, lpm.prefix_len)
    if kind == "TERNARY":
        if isinstance(value, Ternary):
            tern = value
        elif isinstance(value, str) and "&&&" in value:
            v, m = value.split("&&&", 1)
            tern = Ternary(parse_int(v, width, what), parse_int(m, width, what))
        else:
            tern = Ternary(parse_int(_plain(value, what), width, what), (1 << width) - 1)
        return Ternary(tern.value & tern.mask, tern.mask)
    if kind == "RANGE":
        if isinstance(value, Range):
            rng = value
        elif isinstance(value, str) and ".." in value:
            low, high = value.split("..", 1)
            rng = Range(parse_int(low, width, what), parse_int(high, width, what))
        else:
            single = parse_int(_plain(value, what), width, what)
            rng = Range(single, single)
        if rng.low > rng.high:
            raise EntryError(f"{what}: empty range {rng.low}..{rng.high}")
        return rng
    return parse_int(_plain(value, what), width, what)


def _plain(value: MatchValue, what: str) -> Value:
    if isinstance(value, (Lpm, Ternary, Range)):
        raise EntryError(f"{what}: {value} does not suit this field's match type")
    return value


def _is_wildcard(value: MatchValue, info: FieldInfo) -> bool:
    """P4Runtime omits don't-care fields: /0 LPM, zero-mask ternary, full range."""
    if isinstance(value, Lpm):
        return value.prefix_len == 0
    if isinstance(value, Ternary):
        return value.mask == 0
    if isinstance(value, Range):
        return value.low == 0 and value.high == (1 << info.bitwidth) - 1
    return False


def _encode_field_match(value: MatchValue, info: FieldInfo) -> p4runtime_pb2.FieldMatch:
    fm = p4runtime_pb2.FieldMatch()
    fm.field_id = info.id
    width = info.bitwidth
    if isinstance(value, Lpm):
        fm.lpm.value = to_bytes(value.value, width)
        fm.lpm.prefix_len = value.prefix_len
    elif isinstance(value, Ternary):
        fm.ternary.value = to_bytes(value.value, width)
        fm.ternary.mask = to_bytes(value.mask, width)
    elif isinstance(value, Range):
        fm.range.low = to_bytes(value.low, width)
        fm.range.high = to_bytes(value.high, width)
    elif info.match_type == "OPTIONAL":
        fm.optional.value = to_bytes(int(value), width)
    else:
        fm.exact.value = to_bytes(int(value), width)
    return fm


# ---- table entries ----


def encode_table_entry(p4info: P4Info, entry: TableEntry, key_only: bool = False) -> p4runtime_pb2.TableEntry:
    """The P4Runtime TableEntry message of an entry; EntryError names what is wrong.

    `key_only` is for a DELETE: P4Runtime identifies the entry by its match and priority alone,
    so no action is needed (one given is encoded and ignored by the switch)."""
    table = p4info.table(entry.table)
    tname = table.preamble.name
    msg = p4runtime_pb2.TableEntry()
    msg.table_id = table.preamble.id
    if entry.is_default:
        msg.is_default_action = True
        if entry.match:
            raise EntryError(f"{short(tname)}: a default entry has no match fields")
    else:
        for name, value in entry.match.items():
            info = p4info.match_field(tname, name)
            parsed = _parse_match(value, info, f"{short(tname)}.{name}")
            if not _is_wildcard(parsed, info):
                msg.match.append(_encode_field_match(parsed, info))
        msg.match.sort(key=lambda m: m.field_id)
        needs_priority = p4info.table_is_ternary(tname)
        if needs_priority and entry.priority <= 0:
            raise EntryError(f"{short(tname)}: entries of this table need a priority > 0")
        if not needs_priority and entry.priority:
            raise EntryError(f"{short(tname)}: this table takes no priority (it has no ternary/range key)")
        msg.priority = entry.priority
    if entry.action:
        action = p4info.table_action(tname, entry.action)
        aname = action.preamble.name
        msg.action.action.action_id = action.preamble.id
        given = dict(entry.params)
        for param in p4info.params(aname):
            if param.name not in given:
                raise EntryError(f"{short(tname)}: action {short(aname)} needs parameter {param.name!r}")
            value = parse_int(given.pop(param.name), param.bitwidth, f"{short(aname)}.{param.name}")
            p = msg.action.action.params.add()
            p.param_id = param.id
            p.value = to_bytes(value, param.bitwidth)
        if given:
            known = [p.name for p in p4info.params(aname)]
            raise EntryError(f"{short(tname)}: action {short(aname)} has no parameter {sorted(given)} (has {known})")
    elif not entry.is_default and not key_only:
        raise EntryError(f"{short(tname)}: an entry needs an action (only a delete is identified by its key alone)")
    return msg


def decode_table_entry(p4info: P4Info, msg: p4runtime_pb2.TableEntry) -> TableEntry:
    """A TableEntry message read from a switch, with integer values."""
    tname = p4info.name_of(msg.table_id)
    match: dict[str, MatchValue] = {}
    for fm in msg.match:
        info = p4info.match_field_by_id(tname, fm.field_id)
        which = fm.WhichOneof("field_match_type")
        if which == "lpm":
            match[info.name] = Lpm(int.from_bytes(fm.lpm.value, "big"), fm.lpm.prefix_len)
        elif which == "ternary":
            match[info.name] = Ternary(int.from_bytes(fm.ternary.value, "big"), int.from_bytes(fm.ternary.mask, "big"))
        elif which == "range":
            match[info.name] = Range(int.from_bytes(fm.range.low, "big"), int.from_bytes(fm.range.high, "big"))
        elif which == "optional":
            match[info.name] = int.from_bytes(fm.optional.value, "big")
        else:
            match[info.name] = int.from_bytes(fm.exact.value, "big")
    action = ""
    params: dict[str, Value] = {}
    if msg.HasField("action") and msg.action.WhichOneof("type") == "action":
        action = p4info.name_of(msg.action.action.action_id)
        by_id = {p.id: p for p in p4info.params(action)}
        for p in msg.action.action.params:
            params[by_id[p.param_id].name] = int.from_bytes(p.value, "big")
    return TableEntry(
        table=tname,
        match=match,
        action=action,
        params=params,
        priority=msg.priority,
        is_default=msg.is_default_action,
    )


def normalize(p4info: P4Info, entry: TableEntry) -> TableEntry:
    """The entry as a switch would return it: full names, integer values, wildcards omitted."""
    return decode_table_entry(p4info, encode_table_entry(p4info, entry))


def format_entry(p4info: P4Info, entry: TableEntry) -> str:
    """Like `TableEntry.describe`, with IPv4 and MAC values in their usual notation."""
    tname = p4info.table(entry.table).preamble.name
    shown = normalize(p4info, entry)
    match: dict[str, MatchValue] = {}
    for name, value in shown.match.items():
        info = p4info.match_field(tname, name)
        if isinstance(value, Lpm):
            match[name] = f"{pretty(value.value, info.bitwidth, name)}/{value.prefix_len}"
        elif isinstance(value, Ternary):
            match[name] = f"{pretty(value.value, info.bitwidth, name)}&&&{value.mask:#x}"
        elif isinstance(value, int):
            match[name] = pretty(value, info.bitwidth, name)
        else:
            match[name] = value
    params: dict[str, Value] = {}
    if shown.action:
        for pinfo in p4info.params(shown.action):
            raw = shown.params[pinfo.name]
            params[pinfo.name] = pretty(int(raw), pinfo.bitwidth, pinfo.name)
    return replace(shown, match=match, params=params).describe(p4info.table_label(tname))


# ---- packet replication engine ----


def encode_multicast_group(group: MulticastGroup) -> p4runtime_pb2.PacketReplicationEngineEntry:
    if group.group_id <= 0:
        raise EntryError(f"multicast group id must be > 0 (got {group.group_id})")
    msg = p4runtime_pb2.PacketReplicationEngineEntry()
    mg = msg.multicast_group_entry
    mg.multicast_group_id = group.group_id
    for r in group.replicas:
        rep = mg.replicas.add()
        rep.egress_port = r.port
        rep.instance = r.instance
    return msg


def encode_clone_session(session: CloneSession) -> p4runtime_pb2.PacketReplicationEngineEntry:
    if session.session_id <= 0:
        raise EntryError(f"clone session id must be > 0 (got {session.session_id})")
    msg = p4runtime_pb2.PacketReplicationEngineEntry()
    cs = msg.clone_session_entry
    cs.session_id = session.session_id
    cs.class_of_service = session.class_of_service
    cs.packet_length_bytes = session.packet_length_bytes
    for r in session.replicas:
        rep = cs.replicas.add()
        rep.egress_port = r.port
        rep.instance = r.instance
    return msg


def decode_pre_entry(msg: p4runtime_pb2.PacketReplicationEngineEntry) -> MulticastGroup | CloneSession:
    if msg.HasField("clone_session_entry"):
        cs = msg.clone_session_entry
        return CloneSession(
            cs.session_id,
            tuple(Replica(r.egress_port, r.instance) for r in cs.replicas),
            cs.class_of_service,
            cs.packet_length_bytes,
        )
    mg = msg.multicast_group_entry
    return MulticastGroup(mg.multicast_group_id, tuple(Replica(r.egress_port, r.instance) for r in mg.replicas))


def encode_entity(p4info: P4Info, entity: Entity, key_only: bool = False) -> p4runtime_pb2.Entity:
    """The p4runtime Entity message of any entry (`key_only`: for a DELETE, see encode_table_entry)."""
    msg = p4runtime_pb2.Entity()
    if isinstance(entity, TableEntry):
        msg.table_entry.CopyFrom(encode_table_entry(p4info, entity, key_only))
    elif isinstance(entity, MulticastGroup):
        msg.packet_replication_engine_entry.CopyFrom(encode_multicast_group(entity))
    else:
        msg.packet_replication_engine_entry.CopyFrom(encode_clone_session(entity))
    return msg


def describe(entity: Entity) -> str:
    return entity.describe()
