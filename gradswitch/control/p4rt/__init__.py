"""P4Runtime layer: P4Info by name, entries as data, one session per switch."""

from gradswitch.control.p4rt.entities import (
    CloneSession,
    Entity,
    EntryError,
    Lpm,
    MulticastGroup,
    Range,
    Replica,
    TableEntry,
    Ternary,
)
from gradswitch.control.p4rt.errors import NotPrimary, SwitchError, SwitchUnavailable, UpdateFailure, WriteError
from gradswitch.control.p4rt.p4info import AmbiguousName, P4Info, UnknownName
from gradswitch.control.p4rt.session import (
    CONTROLLER_ELECTION_ID,
    REPL_ELECTION_ID,
    CounterValue,
    PacketIn,
    SwitchAddress,
    SwitchSession,
)

__all__ = [
    "CONTROLLER_ELECTION_ID",
    "REPL_ELECTION_ID",
    "AmbiguousName",
    "CloneSession",
    "CounterValue",
    "Entity",
    "EntryError",
    "Lpm",
    "MulticastGroup",
    "NotPrimary",
    "P4Info",
    "PacketIn",
    "Range",
    "Replica",
    "SwitchAddress",
    "SwitchError",
    "SwitchSession",
    "SwitchUnavailable",
    "TableEntry",
    "Ternary",
    "UnknownName",
    "UpdateFailure",
    "WriteError",
]
