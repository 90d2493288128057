"""The compare specs the project ships: gradswitch/specs/ of a checkout, the same files as package data of a wheel."""

from __future__ import annotations

from pathlib import Path

from gradswitch.protocol.paths import package_folder

EXPERIMENTS = package_folder("gradswitch", "specs")


def shipped_spec(name: str) -> Path | None:
    """The shipped spec called `name` (with or without .toml), or None."""
    path = EXPERIMENTS / f"{name.removesuffix('.toml')}.toml"
    return path if path.is_file() else None
