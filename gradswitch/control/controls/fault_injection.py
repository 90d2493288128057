"""Control FaultInjection: drop, or corrupt, a fraction of the packets entering and/or leaving a port."""

from __future__ import annotations

from typing import Literal

from gradswitch.control.p4rt import TableEntry, Ternary
from gradswitch.control.p4rt.entities import MatchValue
from gradswitch.protocol.p4_constants import CONFIG

INGRESS_FAULTS = "ingress_faults.faults"
EGRESS_FAULTS = "egress_faults.faults"
Direction = Literal["in", "out", "both"]


def loss_entries(
    port: int,
    fraction: float,
    direction: Direction = "both",
    ip_protocol: int | None = None,
    l4_dst_port: int | None = None,
    priority: int = 10,
    corrupt: bool = False,
) -> list[TableEntry]:
    """Rules dropping (or, with corrupt, flipping a bit of) `fraction` (0..1) of the packets on a switch port.

    direction "in" acts on packets arriving on the port, "out" on packets leaving by it,
    "both" both. ip_protocol / l4_dst_port narrow the rule (e.g. 17 / 4791 for RoCE v2).
    A corrupted packet goes on with one bit flipped after its sender's checksums (the
    aggregation payload, else a RoCE PSN, else the TCP/UDP checksum: fault_injection.p4),
    as a bit error on the link would; its receiver (or NetReduce's ICRC check) must drop it.
    One rule per port, direction and match: a corruption rule replaces a loss rule and back.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"loss fraction must be within 0..1, got {fraction}")
    ppm = round(fraction * CONFIG.FAULT_SCALE)
    tables = {"in": [INGRESS_FAULTS], "out": [EGRESS_FAULTS], "both": [INGRESS_FAULTS, EGRESS_FAULTS]}[direction]
    match: dict[str, MatchValue] = {"port": port}
    match["hdr.ipv4.protocol"] = Ternary(ip_protocol, 0xFF) if ip_protocol is not None else Ternary(0, 0)
    match["meta.l4_dst_port"] = Ternary(l4_dst_port, 0xFFFF) if l4_dst_port is not None else Ternary(0, 0)
    action = "corrupt_fraction" if corrupt else "drop_fraction"
    return [TableEntry(table, dict(match), action, {"ppm": ppm}, priority=priority) for table in tables]
