"""Control Ipv4Routing and SourceMacRewrite: routes, ECMP groups and how they balance, port MACs."""

from __future__ import annotations

from gradswitch.control.p4rt import Entity, TableEntry
from gradswitch.control.routing import NOTHING_OUT, NextHop, Outage, Route, compute_routes, ecmp_groups, switch_port_mac
from gradswitch.protocol.ecmp import Balancing, LoadBalance, hash_multiplier, seed_of
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.topology.model import Topology, TopologyError

ROUTES = "ipv4_routes"
ECMP_MEMBERS = "ecmp_members"
PORT_MACS = "port_macs"
ECMP_ACTION = "set_ecmp_group"
FLOWLET_ACTION = "set_flowlet_group"
FLOWLET_REGISTERS = ("flowlet_time", "flowlet_member")


def _groups(topo: Topology, switch: str, outage: Outage = NOTHING_OUT
            ) -> tuple[list[Route], dict[tuple[NextHop, ...], int]]:
    routes = compute_routes(topo, outage)[switch]
    groups = ecmp_groups(routes)
    if len(groups) > CONFIG.ECMP_GROUPS_SIZE:
        raise TopologyError(f"{switch}: {len(groups)} ECMP groups, the program holds {CONFIG.ECMP_GROUPS_SIZE}")
    return routes, groups


def group_action(group: int, size: int, balancing: Balancing) -> tuple[str, dict[str, int]]:
    """The route action of an ECMP group and its parameters under a load-balancing setting."""
    params = {"group": group, "size": size, "multiplier": hash_multiplier(balancing.seed)}
    if balancing.mode == LoadBalance.FLOWLET:
        return FLOWLET_ACTION, {**params, "gap_us": balancing.flowlet_gap_us}
    return ECMP_ACTION, params


PLAIN = Balancing()  # what a network starts with: ECMP, the plain hash


def route_entries(topo: Topology, switch: str, balancing: Balancing = PLAIN, outage: Outage = NOTHING_OUT
                  ) -> list[TableEntry]:
    """The switch's ipv4_routes entries (around what `outage` says is out); its ECMP groups' as `balancing` says."""
    routes, groups = _groups(topo, switch, outage)
    entries: list[TableEntry] = []
    for route in routes:
        match = {"hdr.ipv4.dst_addr": route.prefix}
        if route.is_ecmp:
            action, params = group_action(groups[route.next_hops], len(route.next_hops), balancing)
            entries.append(TableEntry(ROUTES, match, action, params))
        else:
            hop = route.next_hops[0]
            entries.append(TableEntry(ROUTES, match, "set_next_hop", {"port": hop.port, "dst_mac": hop.mac}))
    return entries


def balancing_of(entry: TableEntry) -> Balancing | None:
    """The load-balancing setting an ECMP route entry (as read from a switch) carries; None for another."""
    short = entry.action.split(".")[-1]
    if short not in (ECMP_ACTION, FLOWLET_ACTION):
        return None
    seed = seed_of(int(entry.params["multiplier"]))
    if short == FLOWLET_ACTION:
        return Balancing(LoadBalance.FLOWLET, int(entry.params["gap_us"]), seed)
    return Balancing(LoadBalance.ECMP, seed=seed)


def member_entries(topo: Topology, switch: str, outage: Outage = NOTHING_OUT) -> list[TableEntry]:
    """The switch's ecmp_members entries: every next hop of every ECMP group (around what is out)."""
    _, groups = _groups(topo, switch, outage)
    entries: list[TableEntry] = []
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
    return entries


def forwarding_entries(topo: Topology, switch: str, balancing: Balancing = PLAIN, outage: Outage = NOTHING_OUT
                       ) -> list[TableEntry]:
    """ECMP members, then routes: what the controller recomputes and rewrites when something fails or returns."""
    return [*member_entries(topo, switch, outage), *route_entries(topo, switch, balancing, outage)]


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    entries: list[Entity] = [*forwarding_entries(topo, switch)]
    device = topo.switch(switch).device_id
    for port in topo.ports_of(switch):
        entries.append(TableEntry(PORT_MACS, {"std_meta.egress_port": port}, "set_source_mac",
                                  {"mac": switch_port_mac(device, port)}))
    return entries
