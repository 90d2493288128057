"""Controls NetReduce / NetReduceEgress: the entries, groups and registers of an aggregation job.

`plan_job` turns a job (its workers, by host, in rank order, and its credits) into what each
switch must hold: a flat job on one switch, or a hierarchical one (leaves sum their local
workers, one aggregation spine sums the leaves). Addresses, QPs and the window come from
gradswitch/protocol/netreduce.py, the same conventions the workers use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gradswitch.control.p4rt import Entity, MulticastGroup, Replica, TableEntry
from gradswitch.control.routing import switch_port_mac
from gradswitch.protocol.netreduce import PACKET_BYTES, JobLayout, group_base, peer_group, up_group
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import qpn, udp_source_port
from gradswitch.roce.headers import BTH_LEN, IMM_LEN, RETH_LEN
from gradswitch.roce.wire import icrc_connection_delta
from gradswitch.topology.model import Topology, TopologyError

MEMBERS = "nr_members"
JOBS = "nr_jobs"
JOB_KEYS = "nr_job_keys"
JOB_CONNECTIONS = "nr_job_connections"
HOST_PORTS = "nr_host_ports"
CONNECTIONS = "nr_connections"
JOB_EVENTS = "nr_job_events"
PORT_EVENTS = "nr_port_events"
# A cell's state (bitmap, message number, count, final flag: one 64-bit cell, layout in config.p4).
CELLS = "nr_cells"
REGISTERS_PER_CELL = (CELLS,)
# The sums: word q of every cell in register nr_values<q> (wide; the Thrift API can only clear them).
VALUES = tuple(f"nr_values{q}" for q in range(CONFIG.AGG_WORDS_PER_PACKET))
QP_CONTEXT = "nr_qp_context"
ROLE_NAMES = {CONFIG.NR_ROLE_FLAT: "flat", CONFIG.NR_ROLE_LEAF: "leaf", CONFIG.NR_ROLE_SPINE: "spine"}


# The events of packets NetReduce drops (the refusals; the others count what it did).
REFUSALS = frozenset({"duplicate", "no-credit", "not-member", "malformed", "no-context", "stale", "bad-icrc",
                      "placeholder-last", "late"})


def event_names() -> dict[int, str]:
    """Index within a job's (or port's) block of event counters -> event name, from config.p4."""
    return {v: k.removeprefix("NR_EV_").lower().replace("_", "-") for k, v in CONFIG.values.items()
            if k.startswith("NR_EV_")}


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    """Host-facing ports: where a packet claiming a job it is not a member of is refused."""
    return [TableEntry(HOST_PORTS, {"std_meta.ingress_port": port}, "NoAction") for _, port in topo.hosts_of(switch)]


# Transport bytes (BTH, extension header, payload) of the three kinds of aggregation packets.
KIND_LENGTHS = {"icrc_first": BTH_LEN + RETH_LEN + PACKET_BYTES, "icrc_middle": BTH_LEN + PACKET_BYTES,
                "icrc_last": BTH_LEN + IMM_LEN + PACKET_BYTES}


def rewrite(job: int, rid: int, src_addr: str, dst_addr: str, dst_mac: str, dest_qp: int, src_port: int,
            receiver: int = CONFIG.NR_RECEIVER_SWITCH) -> TableEntry:
    """Egress rewrite of a result (or partial) copy with egress_rid `rid` into one connection, with the
    connection's ICRC deltas for each kind of packet (controls/icrc.p4), and the rank that receives it
    (NR_RECEIVER_SWITCH: a switch; reduce-scatter trims a worker's copy of a message it does not own)."""
    deltas = {k: icrc_connection_delta(src_addr, dst_addr, src_port, dest_qp, n) for k, n in KIND_LENGTHS.items()}
    return TableEntry(CONNECTIONS, {"meta.nr.job": job, "std_meta.egress_rid": rid}, "rewrite", {
        "src_addr": src_addr, "dst_addr": dst_addr, "dst_mac": dst_mac, "dest_qp": dest_qp, "src_port": src_port,
        **deltas, "receiver": receiver})


def events_by_owner(cells: Mapping[int, int]) -> dict[int, dict[str, int]]:
    """Packets per cell of JOB_EVENTS (or PORT_EVENTS) -> job (or ingress port) -> event name, the
    non-zero ones. Owner 0 is left out: there is no job 0 and no port 0, and its first cell counts
    the event slots a packet leaves unused (NetReduceIngress counts NR_TALLY per packet)."""
    names = event_names()
    out: dict[int, dict[str, int]] = {}
    for index, packets in cells.items():
        owner, event = divmod(index, CONFIG.NR_EVENTS)
        if packets and owner != 0 and event in names:
            out.setdefault(owner, {})[names[event]] = packets
    return out


def job_event_indices(job: int) -> range:
    """The cells of JOB_EVENTS that count job `job`'s events, in event-number order."""
    return range(job * CONFIG.NR_EVENTS, (job + 1) * CONFIG.NR_EVENTS)


def switch_address(device_id: int, job: int) -> str:
    """The address a switch uses on its job's switch-to-switch connections (never routed)."""
    return f"10.255.{device_id}.{job}"


def up_qp(job: int, leaf_device: int) -> int:
    return 0xF00000 | job << 8 | leaf_device


def down_qp(job: int, leaf_device: int) -> int:
    return 0xF10000 | job << 8 | leaf_device


@dataclass
class SwitchPlan:
    """What one switch holds for a job."""

    switch: str
    role: int
    members: int  # contributions completing a cell here
    entries: list[Entity] = field(default_factory=list)
    # One per member QP, by key: its `set_member` entry without `member_id`, the context slot that
    # `bind` fills in once the job's slots on this switch are allocated.
    member_entries: dict[str, TableEntry] = field(default_factory=dict)

    @property
    def member_keys(self) -> list[str]:
        return list(self.member_entries)

    @property
    def role_name(self) -> str:
        return ROLE_NAMES[self.role]


@dataclass(frozen=True)
class JobPlan:
    layout: JobLayout
    workers: tuple[str, ...]  # host of each rank
    switches: dict[str, SwitchPlan]
    aggregation_switch: str  # the flat switch, or the aggregation spine


def _spines_of(topo: Topology, edges: list[str]) -> list[str]:
    """The switches, in switch order, linked to every one of these edge switches (a job's candidate aggregators)."""
    return [s.name for s in topo.switches if s.name not in edges
            and all(any(lk.other(s.name)[0] == e for lk in topo.links_of(s.name)) for e in edges)]


def aggregation_spine(topo: Topology, job: int, workers: tuple[str, ...]) -> str | None:
    """The spine that aggregates job `job` on these worker hosts by default (the (job - 1)-th, in switch order, of
    those linked to every leaf of the job, as `plan_job` chooses it and the simulator's Topology::Tree); None when
    the workers share one switch (it aggregates them alone) or no switch links their leaves (`plan_job` refuses)."""
    edges = sorted({topo.attachment(w)[0] for w in workers})
    candidates = _spines_of(topo, edges) if len(edges) > 1 else []
    return candidates[(job - 1) % len(candidates)] if candidates else None


def plan_job(topo: Topology, layout: JobLayout, workers: tuple[str, ...], spine: str | None = None) -> JobPlan:
    """Entries (without region base or member ids: see `bind`) for every switch of the job; `spine`: the switch that
    aggregates it when its workers sit on several (default: `aggregation_spine` of its job number)."""
    if len(workers) != layout.workers:
        raise TopologyError(f"job {layout.job}: {len(workers)} hosts for {layout.workers} workers")
    if len(set(workers)) != len(workers):
        raise TopologyError(f"job {layout.job}: a host appears twice in {workers}")
    hosts = [topo.host(w) for w in workers]
    edge_of = {r: topo.attachment(w) for r, w in enumerate(workers)}  # rank -> (switch, port)
    edges = sorted({sw for sw, _ in edge_of.values()})
    job = layout.job
    n = layout.workers
    plans: dict[str, SwitchPlan] = {}

    def connection(j: int, dst_mac: str) -> TableEntry:
        """Egress rewrite of a copy into worker j's connection to its peer."""
        p = layout.peer(j)
        return rewrite(job, j, hosts[j].ip, hosts[p].ip, dst_mac, qpn(p, j, job), udp_source_port(qpn(j, p, job)), p)

    def claims() -> list[Entity]:
        out: list[Entity] = [TableEntry(JOB_KEYS, {"hdr.reth.rkey": layout.rkey}, "claim", {"job": job})]
        for r in range(n):
            out.append(TableEntry(JOB_CONNECTIONS, {"hdr.ipv4.dst_addr": hosts[r].ip,
                                                    "hdr.bth.dest_qp": qpn(r, layout.sender_to(r), job)},
                                  "claim", {"job": job}))
        return out

    def member(plan: SwitchPlan, port: int, src: str, dest_qp: int, bit: int, peer_index: int, kind: int,
               key: str) -> None:
        plan.member_entries[key] = TableEntry(MEMBERS, {"std_meta.ingress_port": port, "hdr.ipv4.src_addr": src,
                                                        "hdr.bth.dest_qp": dest_qp}, "set_member", {
            "job": job, "member_bit": bit, "peer_index": peer_index, "kind": kind})

    if len(edges) == 1:
        sw = edges[0]
        plan = SwitchPlan(sw, CONFIG.NR_ROLE_FLAT, n)
        for r in range(n):
            member(plan, edge_of[r][1], hosts[r].ip, qpn(layout.peer(r), r, job), r, r, CONFIG.NR_MEMBER_CONTRIBUTOR,
                   f"worker{r}")
        plan.entries += claims()
        plan.entries.append(MulticastGroup(group_base(job), tuple(
            Replica(edge_of[r][1], layout.sender_to(r)) for r in range(n))))
        for j in range(n):
            p = layout.peer(j)
            plan.entries.append(MulticastGroup(peer_group(job, j), (Replica(edge_of[p][1], j),)))
            plan.entries.append(connection(j, hosts[p].mac))
        plans[sw] = plan
        return JobPlan(layout, workers, plans, sw)

    # Hierarchical: a spine linked to every edge switch of the job aggregates the leaves.
    if layout.k_of_n:
        raise TopologyError(f"job {job}: k = {layout.need} of {n} needs every worker on one switch (its hosts "
                            f"{', '.join(workers)} are on {', '.join(edges)}): a leaf cannot tell which k of the job's "
                            "N are in; use a rack topology or k = N")
    candidates = _spines_of(topo, edges)
    if spine is not None:
        if spine not in candidates:
            raise TopologyError(f"job {job}: {spine} is not linked to every leaf of the job ({edges})")
        agg = spine
    elif candidates:
        agg = candidates[(job - 1) % len(candidates)]
    else:
        raise TopologyError(f"job {job}: no switch is linked to all of {edges}; NetReduce needs one to aggregate")
    agg_dev = topo.switch(agg).device_id
    spine_plan = SwitchPlan(agg, CONFIG.NR_ROLE_SPINE, len(edges))
    for i, leaf in enumerate(edges):
        leaf_dev = topo.switch(leaf).device_id
        up_port, spine_port = topo.ports_between(leaf, agg)
        locals_ = [r for r in range(n) if edge_of[r][0] == leaf]
        plan = SwitchPlan(leaf, CONFIG.NR_ROLE_LEAF, len(locals_))
        for bit, r in enumerate(locals_):
            member(plan, edge_of[r][1], hosts[r].ip, qpn(layout.peer(r), r, job), bit, r,
                   CONFIG.NR_MEMBER_CONTRIBUTOR, f"worker{r}")
        member(plan, up_port, switch_address(agg_dev, job), down_qp(job, leaf_dev), 0, 0, CONFIG.NR_MEMBER_PARENT,
               "parent")
        plan.entries += claims()
        plan.entries.append(MulticastGroup(group_base(job), tuple(
            Replica(edge_of[r][1], layout.sender_to(r)) for r in locals_)))
        plan.entries.append(MulticastGroup(up_group(job), (Replica(up_port, CONFIG.NR_RID_UP),)))
        spine_mac = switch_port_mac(agg_dev, spine_port)
        rewrites = set(locals_) | {layout.sender_to(r) for r in locals_}
        for j in sorted(rewrites):
            p = layout.peer(j)
            local_peer = edge_of[p][0] == leaf
            plan.entries.append(connection(j, hosts[p].mac if local_peer else spine_mac))
            if j in locals_:
                port = edge_of[p][1] if local_peer else up_port
                plan.entries.append(MulticastGroup(peer_group(job, j), (Replica(port, j),)))
        plan.entries.append(rewrite(job, CONFIG.NR_RID_UP, switch_address(leaf_dev, job), switch_address(agg_dev, job),
                                    spine_mac, up_qp(job, leaf_dev), udp_source_port(up_qp(job, leaf_dev))))
        plans[leaf] = plan
        # The spine's side of this leaf.
        member(spine_plan, spine_port, switch_address(leaf_dev, job), up_qp(job, leaf_dev), i, i,
               CONFIG.NR_MEMBER_CONTRIBUTOR, f"child{i}")
        rid = CONFIG.NR_RID_CHILD_BASE + i
        spine_plan.entries.append(MulticastGroup(peer_group(job, i), (Replica(spine_port, rid),)))
        spine_plan.entries.append(rewrite(job, rid, switch_address(agg_dev, job), switch_address(leaf_dev, job),
                                          switch_port_mac(leaf_dev, up_port), down_qp(job, leaf_dev),
                                          udp_source_port(down_qp(job, leaf_dev))))
    spine_plan.entries.append(MulticastGroup(group_base(job), tuple(
        Replica(topo.ports_between(agg, leaf)[0], CONFIG.NR_RID_CHILD_BASE + i) for i, leaf in enumerate(edges))))
    plans[agg] = spine_plan
    return JobPlan(layout, workers, plans, agg)


def bind(plan: SwitchPlan, layout: JobLayout, base_cell: int, member_ids: dict[str, int]) -> list[Entity]:
    """The switch's entries with its region and member context slots filled in, job entry first."""
    job, credits = layout.job, layout.credits
    out: list[Entity] = [TableEntry(JOBS, {"meta.nr_state.job": job}, "set_job", {
        "base_cell": base_cell, "credits": credits, "members": plan.members,
        "quorum": plan.members if layout.quorum is None else layout.quorum, "partial": int(layout.k_of_n),
        "deadline_us": layout.deadline_us, "role": plan.role,
        "group_base": group_base(job), "owners": layout.owners,
        "gather": int(layout.gather)})]
    out += [TableEntry(e.table, e.match, e.action, {**e.params, "member_id": member_ids[key]})
            for key, e in plan.member_entries.items()]
    return out + plan.entries
