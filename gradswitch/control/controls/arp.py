"""Control ArpResponder: every switch answers ARP for every host of the topology."""

from __future__ import annotations

from gradswitch.control.p4rt import Entity, TableEntry
from gradswitch.topology.model import Topology

ARP_REPLIES = "arp_replies"


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    return [TableEntry(ARP_REPLIES, {"hdr.arp.target_ip": h.ip}, "answer", {"target_mac": h.mac}) for h in topo.hosts]
