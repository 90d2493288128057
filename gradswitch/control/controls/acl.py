"""Control Acl: punt, copy or drop matching packets (no rules at start-up)."""

from __future__ import annotations

from gradswitch.control.p4rt import Entity, TableEntry
from gradswitch.control.p4rt.entities import MatchValue
from gradswitch.topology.model import Topology

ACL_RULES = "acl_rules"
ACTIONS = ("punt_to_cpu", "copy_to_cpu", "drop")


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    return []


def rule(action: str, priority: int = 10, **match: MatchValue) -> TableEntry:
    """An ACL rule; match keys are the short field names (ingress_port, ether_type, src_addr,
    dst_addr, protocol, l4_src_port, l4_dst_port), values exact or 'value&&&mask'."""
    if action not in ACTIONS:
        raise ValueError(f"ACL action {action!r} is not one of {ACTIONS}")
    return TableEntry(ACL_RULES, dict(match), action, {}, priority=priority)
