"""Control PacketIo: the clone session that copies packets to the CPU port; punt reasons."""

from __future__ import annotations

from gradswitch.control.p4rt import CloneSession, Entity, Replica
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.topology.model import Topology

PUNT_REASONS = {
    CONFIG.PUNT_ARP_MISS: "arp-miss",
    CONFIG.PUNT_ACL: "acl",
}


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    return [CloneSession(CONFIG.CPU_CLONE_SESSION_ID, (Replica(CONFIG.CPU_PORT, 0),))]


def punt_reason(code: int) -> str:
    return PUNT_REASONS.get(code, f"reason-{code}")
