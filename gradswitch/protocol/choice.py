"""Values chosen from a fixed set (an algorithm, a transport mode, a topology kind...), spelled as
in specs, on the command line and in JSON: a `str` enum that prints its value."""

from __future__ import annotations

from enum import Enum


class Choice(str, Enum):
    """A value chosen from a fixed set, spelled as in specs and on the command line."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def names(cls) -> list[str]:
        return [str(m.value) for m in cls]
