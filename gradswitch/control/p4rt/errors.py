"""Errors of the P4Runtime layer; each names the switch and what failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradswitch.control.p4rt.proto import code_pb2, p4runtime_pb2, status_pb2


class SwitchError(RuntimeError):
    """Something went wrong talking to one switch."""

    def __init__(self, switch: str, message: str) -> None:
        self.switch = switch
        self.detail = message
        super().__init__(f"switch {switch}: {message}")

    def __reduce__(self) -> tuple[object, ...]:  # picklable, for the controller's control socket
        return (type(self), (self.switch, self.detail))


class SwitchUnavailable(SwitchError):
    """The switch did not answer (not started, crashed, or wrong address)."""


class NotPrimary(SwitchError):
    """Another client holds primary arbitration on this switch, so writes are refused."""


@dataclass(frozen=True)
class UpdateFailure:
    """One refused update of a write batch."""

    index: int
    what: str  # the entry, as TableEntry.describe() shows it
    code: str  # canonical gRPC code name, e.g. ALREADY_EXISTS
    message: str  # the server's message

    def __str__(self) -> str:
        return f"{self.what}: {self.code}: {self.message}"


class WriteError(SwitchError):
    """A P4Runtime write failed: lists every refused update with the server's reason."""

    def __init__(self, switch: str, operation: str, failures: list[UpdateFailure]) -> None:
        self.operation = operation
        self.failures = failures
        lines = "\n".join(f"  - {f}" for f in failures)
        super().__init__(switch, f"{operation} failed for {len(failures)} update(s):\n{lines}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.switch, self.operation, self.failures))


def write_error_details(error: Any) -> list[tuple[int, int, str]]:
    """(update index, canonical code, message) of every refused update of a failed Write.

    P4Runtime puts one p4.v1.Error per update in the status details (OK for the accepted ones).
    """
    status = status_pb2.Status()
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status.ParseFromString(value)
            break
    out = []
    for index, detail in enumerate(status.details):
        err = p4runtime_pb2.Error()
        if detail.Unpack(err) and err.canonical_code != code_pb2.OK:
            out.append((index, err.canonical_code, err.message))
    return out


def code_name(code: int) -> str:
    try:
        return code_pb2.Code.Name(code)  # type: ignore[arg-type]
    except ValueError:
        return str(code)
