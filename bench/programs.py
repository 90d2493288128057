"""What bench.forwarding and bench.instructions compare: gradswitch.p4 and a one-table program,
each with the entries that forward plain UDP from port 1 to port 2, and the packets they forward."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from gradswitch.cli.p4_compile import compile_program
from gradswitch.control.controls import all_base_entries
from gradswitch.control.p4rt import Entity, TableEntry
from gradswitch.protocol.paths import BMV2_JSON, P4INFO
from gradswitch.topology.generators import rack

ONE_TABLE_P4 = Path(__file__).parent / "p4" / "minimal.p4"
TOPOLOGY = rack(hosts=2)  # the switch's port 1 and port 2, as a rack of two hosts has them


@dataclass(frozen=True)
class Program:
    name: str
    p4info: Path
    json: Path
    entries: Sequence[Entity]


def compiled_option(parser: argparse.ArgumentParser) -> None:
    """--compiled JSON P4INFO: another compile of gradswitch.p4 to measure (default: gradswitch/p4src/build's)."""
    parser.add_argument("--compiled", nargs=2, metavar=("JSON", "P4INFO"), type=Path, default=(BMV2_JSON, P4INFO),
                        help="another compile of gradswitch.p4 to measure (default: gradswitch/p4src/build's)")


def gradswitch(compiled: Sequence[Path]) -> Program:
    """gradswitch.p4 (JSON, P4Info) with every control's base entries for a rack of two hosts."""
    return Program("gradswitch", compiled[1], compiled[0], all_base_entries(TOPOLOGY, "s1"))


def one_table(work: Path) -> Program:
    """bench/p4/minimal.p4, compiled into `work`: one exact table, port 1 to port 2."""
    built = compile_program(ONE_TABLE_P4, work / "minimal.json", work / "minimal.p4info.txtpb")
    return Program("one-table", built.p4info, built.json,
                   [TableEntry("port_map", {"ingress_port": 1}, "forward", {"port": 2})])


def plain_udp(n: int) -> list[bytes]:
    """n UDP packets from the rack's h1 to h2 (100 flows), 64 bytes of payload each."""
    h1, h2 = TOPOLOGY.hosts
    return [bytes(Ether(src=h1.mac, dst=h2.mac) / IP(src=h1.ip, dst=h2.ip) / UDP(sport=1000 + i % 100, dport=9)
                  / (b"x" * 64)) for i in range(n)]
