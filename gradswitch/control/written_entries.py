"""What the controller wrote to each switch: the entries a switch must hold again after it restarts.

`WrittenEntries` keeps, per switch, every entity the controller's primary session wrote and did not delete since,
in the order first written (a MODIFY replaces the entity in place). It is kept by `TrackedSession`, the session
the fabric opens: every write of every feature (base entries, routes and ECMP groups, loss rules, DLCP, NetReduce
jobs) goes through it, so a switch whose process died is given back exactly what it held (Fabric.restore), and
the controller's rerouting compares what it wants with what a switch holds without reading it.

A session whose P4Runtime stream ended (its switch died) takes deletes without an error (what the switch held
went with its process: they only leave the record), refuses inserts and modifies with SwitchUnavailable, and
tells the fabric once (`on_stream_end`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence

from gradswitch.control.p4rt import (
    CloneSession,
    Entity,
    MulticastGroup,
    P4Info,
    SwitchAddress,
    SwitchSession,
    SwitchUnavailable,
    TableEntry,
)
from gradswitch.control.p4rt.entities import decode_table_entry, encode_table_entry, normalize
from gradswitch.control.p4rt.session import DELETE, INSERT, MODIFY, ElectionId


def entity_key(p4info: P4Info, entity: Entity) -> Hashable:
    """What identifies an entity on a switch: a table entry's table, match and priority (or its table's default);
    a multicast group's or clone session's id."""
    if isinstance(entity, TableEntry):
        n = decode_table_entry(p4info, encode_table_entry(p4info, entity, key_only=True))  # a delete has no action
        return ("table", n.table, n.is_default, n.priority, frozenset(n.match.items()))
    if isinstance(entity, MulticastGroup):
        return ("multicast", entity.group_id)
    if isinstance(entity, CloneSession):
        return ("clone", entity.session_id)
    raise TypeError(f"not an entity: {entity!r}")


def same_entity(p4info: P4Info, a: Entity, b: Entity) -> bool:
    """Whether two entities with one key hold the same action and parameters (as the switch would store them)."""
    if isinstance(a, TableEntry) and isinstance(b, TableEntry):
        return normalize(p4info, a) == normalize(p4info, b)
    return a == b


class WrittenEntries:
    """The entities one switch holds from the controller, in the order first written (thread safe)."""

    def __init__(self, p4info: P4Info) -> None:
        self.p4info = p4info
        self._entries: dict[Hashable, Entity] = {}
        self._lock = threading.Lock()

    def record(self, updates: Sequence[tuple[int, Entity]]) -> None:
        """Updates a switch accepted."""
        with self._lock:
            for op, entity in updates:
                key = entity_key(self.p4info, entity)
                if op == DELETE:
                    self._entries.pop(key, None)
                else:
                    self._entries[key] = entity

    def entities(self) -> list[Entity]:
        with self._lock:
            return list(self._entries.values())

    def table(self, table: str) -> list[TableEntry]:
        """The entries of one table (its name as written, or its full name)."""
        full = self.p4info.table(table).preamble.name
        return [e for e in self.entities()
                if isinstance(e, TableEntry) and self.p4info.table(e.table).preamble.name == full]

    def replay(self) -> list[tuple[int, Entity]]:
        """The writes that give a switch with an empty pipeline everything recorded: a table's default
        action is a MODIFY, the rest INSERTs."""
        return [(MODIFY if isinstance(e, TableEntry) and e.is_default else INSERT, e) for e in self.entities()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class TrackedSession(SwitchSession):
    """The fabric's primary session with one switch: every accepted write recorded in `written`, the end of its
    stream (the switch died) reported once to `on_stream_end`."""

    def __init__(self, address: SwitchAddress, p4info: P4Info, election_id: ElectionId, timeout: float,
                 written: WrittenEntries, on_stream_end: Callable[[str], None]) -> None:
        self.written = written
        self.dead = False  # its stream ended while the session was open
        self._on_stream_end = on_stream_end
        self._opened = False
        super().__init__(address, p4info, election_id, timeout)
        self._opened = True
        if self.dead:  # it ended between the handshake and now
            self._on_stream_end(self.name)

    def _receive(self) -> None:
        try:
            super()._receive()
        finally:
            if not self._closed:
                self.dead = True
                if self._opened:
                    self._on_stream_end(self.name)

    def abandon(self, why: str) -> None:
        """A hung switch given up: dead as a crashed one's session is (deletes only recorded, what else is
        written refused), its calls in flight ended (SwitchSession.abandon)."""
        self.dead = True
        super().abandon(why)

    def write(self, updates: Sequence[tuple[int, Entity]]) -> None:
        if self.dead:
            if all(op == DELETE for op, _ in updates):
                self.written.record(updates)  # gone with the switch's process (or refused by a hung one)
                return
            if self.abandoned is not None:
                raise SwitchUnavailable(self.name, f"{self.abandoned}; nothing can be written to it until it is "
                                                   "let go on (Testbed.release_switch) or restarted")
            raise SwitchUnavailable(self.name, "is down (its BMv2 process died); nothing can be written to it "
                                               "until it is restarted (Testbed.restart_switch)")
        super().write(updates)
        self.written.record(updates)
