"""Errors of the P4Runtime layer; each names the switch and what failed."""

from __future__ import annotations

from dataclasses import dataclass

from google.rpc import code_pb2


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


def code_name(code: int) -> str:
    try:
        return str(code_pb2.Code.Name(code))
    except ValueError:
        return str(code)
