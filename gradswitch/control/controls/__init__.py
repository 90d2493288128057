"""One module per control of the switch program: the entries it needs, and its runtime helpers.

`base_entries(topo, switch)` of every module together are what the controller installs
on a switch when a network comes up (see `all_base_entries`).
"""

from __future__ import annotations

from gradswitch.control.controls import acl, arp, dlcp, l2_forwarding, l3_forwarding, netreduce, packet_io
from gradswitch.control.p4rt import Entity
from gradswitch.topology.model import Topology

FEATURES = (packet_io, arp, l2_forwarding, l3_forwarding, acl, netreduce, dlcp)


def all_base_entries(topo: Topology, switch: str) -> list[Entity]:
    """Every entry the controller installs on a switch at start-up, in install order."""
    return [e for feature in FEATURES for e in feature.base_entries(topo, switch)]
