"""Constants shared with the switch program, read from its single source, gradswitch/p4src/include/config.p4.

Every `#define NAME VALUE` line of config.p4 becomes an attribute of `CONFIG`; the comment
lines above a define are its documentation. Python code uses `CONFIG.ROCE_V2_UDP_PORT`
and never repeats a number the switch also knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from gradswitch.protocol.paths import P4_CONFIG

_DEFINE = re.compile(r"^#define\s+([A-Z][A-Z0-9_]*)\s+(0x[0-9a-fA-F]+|\d+)\s*$")
_COMMENT = re.compile(r"^//\s?(.*)$")


class ConfigError(ValueError):
    """config.p4 is missing a constant or holds one Python cannot read."""


@dataclass(frozen=True)
class SharedConfig:
    """Values of config.p4 with their comments."""

    values: dict[str, int]
    docs: dict[str, str] = field(default_factory=dict)
    source: Path = P4_CONFIG

    def __getattr__(self, name: str) -> int:
        try:
            return self.values[name]
        except KeyError:
            raise ConfigError(f"{self.source} defines no constant {name!r}") from None

    def doc(self, name: str) -> str:
        return self.docs.get(name, "")


def parse_config(path: Path = P4_CONFIG) -> SharedConfig:
    """Read the numeric `#define`s of a config.p4-style file."""
    values: dict[str, int] = {}
    docs: dict[str, str] = {}
    comment: list[str] = []
    for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if m := _COMMENT.match(line):
            comment.append(m.group(1))
            continue
        if line.startswith("#define"):
            if m := _DEFINE.match(line):
                name = m.group(1)
                if name in values:
                    raise ConfigError(f"{path}:{lineno}: {name} is defined twice")
                values[name] = int(m.group(2), 0)
                docs[name] = " ".join(comment)
            elif not line.startswith("#define _"):  # include guards are not constants
                raise ConfigError(f"{path}:{lineno}: cannot read constant from {line!r}")
        comment = []
    return SharedConfig(values=values, docs=docs, source=path)


@cache
def load_config() -> SharedConfig:
    return parse_config()


CONFIG = load_config()
