"""Control Ipv4Routing and SourceMacRewrite: routes, ECMP groups, port MACs."""

from __future__ import annotations

from controller.p4rt import Entity, TableEntry
from controller.routing import compute_routes, ecmp_groups, switch_port_mac
from mininet_topos.topology import Topology, TopologyError
from protocol.config import CONFIG

ROUTES = "ipv4_routes"
ECMP_MEMBERS = "ecmp_members"
PORT_MACS = "port_macs"


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    routes = compute_routes(topo)[switch]
    groups = ecmp_groups(routes)
    if len(groups) > CONFIG.ECMP_GROUPS_SIZE:
        raise TopologyError(f"{switch}: {len(groups)} ECMP groups, the program holds {CONFIG.ECMP_GROUPS_SIZE}")
    entries: list[Entity] = []
    for hops, group in groups.items():
        if len(hops) > CONFIG.ECMP_MAX_MEMBERS:
            raise TopologyError(f"{switch}: ECMP group of {len(hops)} next hops, at most {CONFIG.ECMP_MAX_MEMBERS}")
        for index, hop in enumerate(hops):
            entries.append(
                TableEntry(
                    ECMP_MEMBERS,
                    {"meta.ecmp_group": group, "meta.ecmp_index": index},
                    "set_next_hop",
                    {"port": hop.port, "dst_mac": hop.mac},
                )
            )
    for route in routes:
        match = {"hdr.ipv4.dst_addr": route.prefix}
        if route.is_ecmp:
            size = len(route.next_hops)
            entries.append(
                TableEntry(ROUTES, match, "set_ecmp_group", {"group": groups[route.next_hops], "size": size})
            )
        else:
            hop = route.next_hops[0]
            entries.append(TableEntry(ROUTES, match, "set_next_hop", {"port": hop.port, "dst_mac": hop.mac}))
    device = topo.switch(switch).device_id
    for port in topo.ports_of(switch):
        entries.append(TableEntry(PORT_MACS, {"std_meta.egress_port": port}, "set_source_mac",
                                  {"mac": switch_port_mac(device, port)}))
    return entries
