"""A fence around the switches' management ports: reachable from this machine only.

BMv2's Thrift server (tables, registers, queues: everything) listens on every address and has
no option to bind it elsewhere; gRPC is bound to 127.0.0.1 already. The switches live in the
root namespace, so while a network runs anyone who reaches the machine could rewrite them. Each
network therefore adds an nftables table of its own in the root namespace before its switches
start: its input chain rejects TCP to the switches' Thrift and gRPC ports unless the packet
arrives on loopback (a forged 127.0.0.1 source on another interface is rejected too). The
table is named after the run directory, removed at teardown, and by `gradswitch clean` (which
finds it by the same name) after a run killed outright.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FAMILY = "inet"  # IPv4 and IPv6
TABLE_PREFIX = "gradswitch_"


class FenceError(RuntimeError):
    """nftables refused the fence (the message is nft's)."""


def table_name(run_dir: Path) -> str:
    """The fence table of the network whose run directory this is (one per network)."""
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:12]
    return f"{TABLE_PREFIX}{digest}"


def _nft(args: list[str], script: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nft", *args], input=script, capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class ManagementFence:
    table: str
    ports: tuple[int, ...]

    @classmethod
    def for_run(cls, run_dir: Path, ports: Iterable[int]) -> ManagementFence:
        return cls(table_name(run_dir), tuple(sorted(set(ports))))

    def ruleset(self) -> str:
        """nft script: (re)create the table with its one rule, atomically."""
        ports = ", ".join(map(str, self.ports))
        return (f"table {FAMILY} {self.table} {{}}\n"
                f"delete table {FAMILY} {self.table}\n"
                f"table {FAMILY} {self.table} {{\n"
                "  chain input {\n"
                "    type filter hook input priority filter - 10; policy accept;\n"
                f'    iifname != "lo" tcp dport {{ {ports} }} counter reject with tcp reset\n'
                "  }\n"
                "}\n")

    def add(self) -> None:
        proc = _nft(["-f", "-"], self.ruleset())
        if proc.returncode != 0:
            raise FenceError(f"could not fence the switches' management ports with nftables: {proc.stderr.strip()}")


def remove_table(table: str) -> bool:
    """Delete one fence table; False when it was not there (one nft run either way)."""
    return _nft(["delete", "table", FAMILY, table]).returncode == 0


def fence_tables() -> list[str]:
    """The fence tables present in this namespace (`nft list tables`)."""
    proc = _nft(["list", "tables", FAMILY])
    return sorted(line.split()[-1] for line in proc.stdout.splitlines()
                  if line.startswith("table ") and line.split()[-1].startswith(TABLE_PREFIX))
