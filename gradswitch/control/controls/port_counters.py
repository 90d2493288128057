"""Controls PortRxCounters, PortTxCounters and DropCounters: reading them by port and by reason."""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.control.p4rt import Entity, SwitchSession
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.topology.model import Topology

PORT_RX = "port_rx"
PORT_TX = "port_tx"
INGRESS_DROPS = "GradswitchIngress.drop_counters.drops"
EGRESS_DROPS = "GradswitchEgress.drop_counters.drops"


def drop_reason_names() -> dict[int, str]:
    """Index of the drop counters -> reason, from the DROP_* constants of config.p4."""
    return {
        value: name.removeprefix("DROP_").lower().replace("_", "-")
        for name, value in CONFIG.values.items()
        if name.startswith("DROP_") and name != "DROP_REASONS"
    }


@dataclass(frozen=True)
class PortStats:
    port: int
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    return []


def port_stats(session: SwitchSession, ports: list[int]) -> list[PortStats]:
    rx = session.read_counter(PORT_RX)
    tx = session.read_counter(PORT_TX)
    zero = (0, 0)
    out = []
    for p in ports:
        r = (rx[p].packets, rx[p].bytes) if p in rx else zero
        t = (tx[p].packets, tx[p].bytes) if p in tx else zero
        out.append(PortStats(p, r[0], r[1], t[0], t[1]))
    return out


def drops(session: SwitchSession) -> dict[str, int]:
    """Packets dropped so far by reason (ingress and egress together), reasons with drops only."""
    names = drop_reason_names()
    total: dict[str, int] = {}
    for counter in (INGRESS_DROPS, EGRESS_DROPS):
        for index, value in session.read_counter(counter).items():
            if value.packets:
                reason = names.get(index, f"reason-{index}")
                total[reason] = total.get(reason, 0) + value.packets
    return total
