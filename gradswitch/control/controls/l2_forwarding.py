"""Control L2Forwarding: non-IP frames to local hosts by MAC; broadcast to local hosts.

Broadcast is flooded to the switch's host ports only (never to the fabric, so no loop
can form); the egress pipeline prunes the copy for the ingress port.
"""

from __future__ import annotations

from gradswitch.control.p4rt import Entity, MulticastGroup, Replica, TableEntry
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.topology.model import Topology

MAC_FORWARDING = "mac_forwarding"
BROADCAST_MAC = "ff:ff:ff:ff:ff:ff"


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    local = topo.hosts_of(switch)
    entries: list[Entity] = [
        MulticastGroup(CONFIG.BROADCAST_GROUP_ID, tuple(Replica(port, 0) for _, port in local)),
        TableEntry(MAC_FORWARDING, {"hdr.ethernet.dst_addr": BROADCAST_MAC}, "flood"),
    ]
    entries += [
        TableEntry(MAC_FORWARDING, {"hdr.ethernet.dst_addr": h.mac}, "forward", {"port": port}) for h, port in local
    ]
    return entries
