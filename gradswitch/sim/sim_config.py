"""A simulated run's configuration (the JSON gradswitch-sim reads, docs/simulator.md "Configuration"),
from what the orchestration already has: the topology, the jobs' JobConfig (with their training plan,
gradswitch/workload/plan.py) and the run's SimSettings.

The configuration carries every value the simulator reads: gradswitch-sim has no defaults of its own, refuses
a document without one of them, with a key it does not know, or of another `format` than FORMAT. Its sections and
keys, their types and meanings are gradswitch/sim/sim_schema.py CONFIG (docs/simulator-keys.md), from which C++
takes them; tests/unit/test_sim_schema.py checks what this module writes against it. The defaults are Python's
alone (SimSettings, JobConfig, DlcpPolicy, roce's header sizes). A job of execution graphs
(gradswitch/workload/graph.py) carries them in its `graph` section (graph_job_json)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

from gradswitch.protocol.dlcp import default_thresholds
from gradswitch.protocol.ecmp import hash_multiplier
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.queues import buffer_bytes
from gradswitch.roce.headers import AETH_LEN, IMM_LEN, RETH_LEN
from gradswitch.roce.qp import Mode, QpConfig
from gradswitch.roce.wire import ETH_HEADER_LEN, IPV4_HEADER_LEN, ROCE_OVERHEAD
from gradswitch.sim.faults import SimFaultError, schedule_json
from gradswitch.sim.sim_keys import (
    CfgCrash,
    CfgDlcp,
    CfgGraph,
    CfgGraphNetreduce,
    CfgGraphNode,
    CfgJob,
    CfgLink,
    CfgLoss,
    CfgOp,
    CfgRankGraph,
    CfgRun,
    CfgTopology,
    CfgTraining,
    CfgTransport,
    CfgWire,
)
from gradswitch.sim.sim_schema import CONFIG_FORMAT
from gradswitch.sim.sim_settings import EXACT_LIMIT, CheckMode, DlcpSwitch, SimSettings
from gradswitch.topology.model import Topology
from gradswitch.workload import broadcast_chain
from gradswitch.workload.dlcp import DlcpPolicy, layer_class
from gradswitch.workload.encoding import job_profile
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, JobGraph, Node, node_kind
from gradswitch.workload.graph_iterations import crash_node
from gradswitch.workload.job import Algorithm, JobConfig, Role
from gradswitch.workload.plan import Plan, op_mark, plan

SACK_LEN = 4  # a selective-repeat NAK's SACK after the AETH (gradswitch/roce/qp.py)
TCP_HEADER_LEN = 32  # TCP with the timestamp option, as Linux sends it
# the graph section's `netreduce` keys: each in-network collective type's switch job (gs-graph-spec.h)
NETREDUCE_KEYS: dict[CollectiveKind, Literal["job_id", "reduce_scatter_job_id", "all_gather_job_id"]] = {
    CollectiveKind.ALL_REDUCE: "job_id", CollectiveKind.REDUCE_SCATTER: "reduce_scatter_job_id",
    CollectiveKind.ALL_GATHER: "all_gather_job_id"}
# the configuration's format: gradswitch-sim refuses any other (gradswitch/sim/sim_schema.py defines it and every key
# of the configuration; gs-keys.h, generated from it, gives C++ the same)
FORMAT = CONFIG_FORMAT


class SimConfigError(ValueError):
    """A run the simulator cannot take: names the value."""


def check_mode(cfg: JobConfig, settings: SimSettings) -> CheckMode:
    """The check a job's packets carry: AUTO is exact while its workers' checks stay small (EXACT_LIMIT)."""
    if settings.check != CheckMode.AUTO:
        return settings.check
    workers = len(cfg.workers)
    elements = sum(t.elements for t in job_profile(cfg).tensors)
    return CheckMode.EXACT if workers * workers * elements <= EXACT_LIMIT else CheckMode.DIGEST


def topology_json(topo: Topology, settings: SimSettings) -> CfgTopology:
    links: list[CfgLink] = []
    for lk in topo.links:
        mbps = lk.bw_mbps if lk.bw_mbps else settings.unshaped_mbps
        queue = settings.queue_bytes if settings.queue_bytes is not None else buffer_bytes(mbps)
        links.append({"a": lk.a, "a_port": lk.a_port, "b": lk.b, "b_port": lk.b_port, "rate_bps": mbps * 1e6,
                      "delay_s": settings.link_delay_s, "queue_bytes": queue, "shaped": settings.shaped_links})
    return {"name": topo.name, "hosts": [{"name": h.name, "ip": h.ip} for h in topo.hosts],
            "switches": [{"name": s.name, "device_id": s.device_id, "role": s.role} for s in topo.switches],
            "links": links}


def transport_json(cfg: JobConfig) -> CfgTransport:
    """The QP settings every node of the job uses (gradswitch/hosts/comm.py Comm.qp)."""
    dlcp = cfg.dlcp
    order_tolerant = dlcp is not None and dlcp.order_tolerant and cfg.transport == Mode.SR
    if dlcp is None or not dlcp.reorder:
        reorder = 0.0
    elif order_tolerant and cfg.reorder_window is not None:
        reorder = cfg.reorder_window
    else:
        reorder = cfg.rto / 4
    return {"mode": str(cfg.transport), "mtu": cfg.mtu, "window": cfg.window, "ack_every": max(1, cfg.window // 4),
            "rto_s": cfg.rto, "rto_max_s": QpConfig.rto_max, "retry_limit": cfg.retry_limit,
            "loss_budget": dlcp.loss_budget if dlcp is not None and dlcp.drop else 0.0,
            "reorder_delay_s": reorder, "order_tolerant": order_tolerant}


def training_json(cfg: JobConfig, p: Plan) -> CfgTraining:
    """The plan as the simulator's scheduler needs it: layers' times, ops' sizes, the layers whose gradients
    each carries, the ops it waits for (exponent codes before values), its DLCP class."""
    tr = cfg.training
    assert tr is not None
    tensors = len(job_profile(cfg).tensors)
    codes_of: dict[int, int] = {}
    ops: list[CfgOp] = []
    for op in p.ops:
        if op.codes:
            codes_of.update({t: op.index for t in op.tensors})
            deps: list[int] = []
        else:
            deps = sorted({codes_of[t] for t in op.tensors if t in codes_of})
        ops.append({"elements": op.elements, "layers": sorted({p.tensor_layer[t] for t in op.tensors}), "deps": deps,
                    "layer_class": layer_class(op_mark(cfg, op), tensors), "droppable": not op.codes})
    return {"dilation": tr.dilation, "sync": str(tr.sync), "in_flight": tr.in_flight,
            "layers": [{"name": layer.name, "forward_s": layer.forward_s, "backward_s": layer.backward_s}
                       for layer in p.layers],
            "ops": ops}


def dlcp_json(switch: DlcpSwitch, policy: DlcpPolicy) -> CfgDlcp:
    """A job's `dlcp` section: the switches' features and the job's host policy."""
    return {"priority": switch.priority, "drop": switch.drop, "spray": switch.spray, "loss_budget": policy.loss_budget,
            "drop_min_layer_class": policy.drop_min_layer_class,
            "drop_max_magnitude_class": policy.drop_max_magnitude_class,
            "max_relative_error": policy.max_relative_error}


def job_json(cfg: JobConfig, settings: SimSettings) -> CfgJob:
    if cfg.workload == "train-digits":
        raise SimConfigError(f"job {cfg.job_id}: workload train-digits trains a real model in Python: BMv2 only")
    profile = job_profile(cfg)
    tensors = len(profile.tensors)
    out: CfgJob = {
        "job_id": cfg.job_id, "algo": str(cfg.algo), "check": str(check_mode(cfg, settings)), "seed": cfg.seed,
        "nodes": [{"node_id": n.node_id, "role": str(n.role), "host": n.host} for n in cfg.nodes],
        "iterations": cfg.iterations, "transport": transport_json(cfg), "ps_key_bytes": cfg.ps_key_bytes,
        "credits": cfg.credits, "iteration_timeout_s": cfg.iteration_timeout,
    }
    if cfg.training is not None:
        out["training"] = training_json(cfg, plan(cfg))
    else:
        out["reductions"] = [{"elements": t.elements, "layer_class": layer_class(i, tensors),
                              "droppable": t.kind != "exponents"} for i, t in enumerate(profile.tensors)]
    if cfg.crash is not None:
        out["crash"] = {"node": cfg.crash.node, "after": cfg.crash.after}
    if cfg.dlcp is not None:
        out["dlcp"] = dlcp_json(settings.dlcp, cfg.dlcp)
    nodes = [n.node_id for n in cfg.nodes]
    pairs = zip(cfg.nodes, cfg.nodes[1:], strict=False)
    servers_first = any(a.role == Role.SERVER and b.role == Role.WORKER for a, b in pairs)
    if nodes != list(range(len(nodes))) or servers_first:
        raise SimConfigError(f"job {cfg.job_id}: node ids must be 0, 1, ... with the workers first")
    return out


def dlcp_thresholds(topo: Topology, settings: SimSettings) -> dict[str, list[int]]:
    """Per switch, per priority: the virtual-queue bytes from which droppable packets are trimmed (-1: never):
    the spec's threshold for every priority, else gradswitch/protocol/dlcp.py default_thresholds for the
    switch's slowest link (priorities 6 and 7 never)."""
    out: dict[str, list[int]] = {}
    for s in topo.switches:
        if settings.dlcp.threshold_bytes is not None:
            out[s.name] = [settings.dlcp.threshold_bytes] * CONFIG.PRIORITY_QUEUES
            continue
        rate = topo.slowest_link_mbps(s.name) or settings.unshaped_mbps
        defaults = default_thresholds(rate)
        out[s.name] = [defaults.get(p, -1) for p in range(CONFIG.PRIORITY_QUEUES)]
    return out


def wire_json(framing_bytes: int) -> CfgWire:
    """The header sizes the simulator counts on the wire (gradswitch/roce/headers.py, gradswitch/roce/wire.py): the
    configuration's and a transport scenario's `wire` (tests/ns3/qp_script.py)."""
    return {"roce_overhead": ROCE_OVERHEAD, "reth": RETH_LEN, "imm": IMM_LEN, "aeth": AETH_LEN, "sack": SACK_LEN,
            "tcp_overhead": ETH_HEADER_LEN + IPV4_HEADER_LEN + TCP_HEADER_LEN, "framing": framing_bytes}


def base_config(topo: Topology, settings: SimSettings, time_limit_s: float) -> dict[str, Any]:
    """Everything of a run's configuration but its jobs (built as the schema's CfgRun; a plain dict to its callers,
    which add jobs and sections)."""
    out: CfgRun = {
        "format": FORMAT, "seed": settings.seed, "time_limit_s": time_limit_s, "progress_s": settings.progress_s,
        "scheduler": str(settings.scheduler), "wire": wire_json(settings.framing_bytes),
        "topology": topology_json(topo, settings),
        "switch": {"processing_delay_s": settings.switch_delay_s,
                   "ecmp_multiplier": hash_multiplier(settings.ecmp_seed),
                   "load_balance": str(settings.load_balance), "flowlet_gap_s": settings.flowlet_gap_us * 1e-6,
                   "roce_class": settings.roce_class, "dlcp_thresholds": dlcp_thresholds(topo, settings)},
        "host": {"message_delay_s": settings.host_message_delay_s},
        "jobs": [],
    }
    if settings.background is not None:
        b = settings.background
        out["background"] = {"sender": b.sender, "receiver": b.receiver, "flows": b.flows, "mss": b.mss,
                             "rwnd_bytes": b.rwnd_bytes, "min_rto_s": b.min_rto_s}
    if settings.tensorlights is not None:
        t = settings.tensorlights
        out["tensorlights"] = {"host": t.host, "rotate_s": t.rotate_s,
                               "servers": [{"job": j, "node": n} for j, n in t.servers]}
    return cast("dict[str, Any]", out)


def run_config(topo: Topology, jobs: list[JobConfig], settings: SimSettings) -> dict[str, Any]:
    """The whole run as gradswitch-sim reads it."""
    if not jobs:
        raise SimConfigError("no job to run")
    for cfg in jobs:
        for n in cfg.nodes:
            if not topo.is_host(n.host):
                raise SimConfigError(f"job {cfg.job_id}: node {n.node_id} is on {n.host!r}, not a host of {topo.name}")
        if cfg.algo == Algorithm.NETREDUCE and len({n.host for n in cfg.workers}) != len(cfg.workers):
            raise SimConfigError(f"job {cfg.job_id}: NetReduce needs every worker on a host of its own")
    limit = settings.time_limit_s
    if limit is None:
        limit = max(cfg.iterations * cfg.iteration_timeout for cfg in jobs)
    out = base_config(topo, settings, limit)
    out["jobs"] = [job_json(cfg, settings) for cfg in jobs]
    if settings.loss_pct > 0:
        loss: CfgLoss = {"fraction": settings.loss_pct / 100.0,
                         "hosts": sorted({n.host for cfg in jobs for n in cfg.workers})}
        out["loss"] = loss
    if settings.faults:
        try:
            out["fault_schedule"] = schedule_json(settings.faults, topo, jobs, settings.switch_detect_s,
                                                  settings.link_detect_s)
        except SimFaultError as e:
            raise SimConfigError(str(e)) from None
    return out


# --- a job of execution graphs (gradswitch/workload/graph.py; the simulator's graph engine, gs-graph-rank.h) ---


def graph_json(graph: JobGraph, in_network: Mapping[CollectiveKind, int] | None = None,
               placeholders: bool = False, grow_placeholders: bool = False) -> CfgGraph:
    """The job's `graph` section: gradswitch.workload.graph.to_dict's content, compact (what the C++ executes and no
    more: process groups by index, no names or sources; the results name nodes by their ids). `in_network`:
    the world group's collectives of these types run through the switches, each type as its NetReduce job
    (the `netreduce` section: all-reduce's job_id, reduce_scatter_job_id, all_gather_job_id; `placeholders` and
    `grow_placeholders`: SimSettings' gather_placeholders and grow_placeholders)."""
    index = {g.name: i for i, g in enumerate(graph.groups)}

    def node(n: Node) -> CfgGraphNode:
        d: CfgGraphNode = {"id": n.id, "kind": node_kind(n), "deps": list(n.deps)}
        if isinstance(n, ComputeNode):
            d["duration_s"] = n.duration_s
        elif isinstance(n, CollectiveNode):
            d["collective"], d["group"], d["nbytes"] = n.collective.value, index[n.group], n.nbytes
            d["root"], d["layer_class"], d["droppable"] = n.root, n.layer_class, n.droppable
        else:
            d["peer"], d["tag"], d["nbytes"] = n.peer, n.tag, n.nbytes
        return d

    # a broadcast's chain is cut as the hosts cut it (gradswitch/workload/broadcast_chain.py)
    out: CfgGraph = {"broadcast_chunk_bytes": broadcast_chain.CHUNK_BYTES,
                     "broadcast_max_chunks": broadcast_chain.MAX_CHUNKS,
                     "groups": [{"ranks": list(g.ranks)} for g in graph.groups],
                     "ranks": shared_ranks([node(n) for n in r.nodes] for r in graph.ranks)}
    if in_network:
        section: CfgGraphNetreduce = {}
        for k, j in in_network.items():
            section[NETREDUCE_KEYS[k]] = j
        section["placeholders"], section["grow_placeholders"] = placeholders, grow_placeholders
        out["netreduce"] = section
    return out


def shared_ranks(ranks: Iterable[list[CfgGraphNode]]) -> list[CfgRankGraph]:
    """The ranks' graphs, each rank whose nodes are an earlier rank's as `same_as` that rank (the first with them):
    a data-parallel job's ranks run the same nodes, which the simulator then reads once."""
    out: list[CfgRankGraph] = []
    first: dict[int, list[int]] = {}  # by node count: the ranks that give their nodes
    for r, nodes in enumerate(ranks):
        same = next((k for k in first.get(len(nodes), ()) if out[k].get("nodes") == nodes), None)
        if same is None:
            out.append({"nodes": nodes})
            first.setdefault(len(nodes), []).append(r)
        else:
            out.append({"same_as": same})
    return out


def graph_check_mode(graph: JobGraph, settings: SimSettings) -> CheckMode:
    """AUTO: exact while the ranks' checks stay small (EXACT_LIMIT generated values: each communication node's
    elements times its group's size, over every rank), else digest."""
    if settings.check != CheckMode.AUTO:
        return settings.check
    sizes = {g.name: len(g.ranks) for g in graph.groups}
    values = 0
    for r in graph.ranks:
        for n in r.nodes:
            if isinstance(n, CollectiveNode):
                values += (n.nbytes + 3) // 4 * sizes[n.group]
            elif not isinstance(n, ComputeNode):
                values += (n.nbytes + 3) // 4
    return CheckMode.EXACT if values <= EXACT_LIMIT else CheckMode.DIGEST


def graph_job_json(graph: JobGraph, cfg: JobConfig, settings: SimSettings,
                   in_network: Mapping[CollectiveKind, int] | None = None) -> CfgJob:
    """A job of algo graph: rank r is cfg's worker r (its host), every node's transport is cfg's; the job runs
    its graphs once (1 iteration). `in_network`: its world collectives of these types run through the switches,
    each type as its NetReduce job (cfg's credits; the same transport on that job's queue pairs). With algo = ps,
    cfg's servers (nodes after the ranks) run its world all-reduces in keys of cfg's ps_key_bytes."""
    if len(cfg.workers) != graph.world_size or (cfg.servers and cfg.algo != Algorithm.PS):
        raise SimConfigError(f"graph {graph.name}: {graph.world_size} ranks on {len(cfg.workers)} workers and "
                             f"{len(cfg.servers)} servers: give one worker per rank, and servers only with algo = ps")
    out: CfgJob = {"job_id": cfg.job_id, "algo": "graph", "check": str(graph_check_mode(graph, settings)),
                   "seed": cfg.seed, "nodes": [{"node_id": n.node_id, "role": str(n.role), "host": n.host}
                                               for n in cfg.nodes],
                   "iterations": 1, "transport": transport_json(cfg), "ps_key_bytes": cfg.ps_key_bytes,
                   "credits": cfg.credits, "iteration_timeout_s": cfg.iteration_timeout,
                   "graph": graph_json(graph, in_network, settings.gather_placeholders, settings.grow_placeholders)}
    if cfg.crash is not None:  # its rank dies where the loop's worker dies (graph_iterations.crash_node)
        crash: CfgCrash = {"node": cfg.crash.node, "after": cfg.crash.after}
        at = crash_node(graph.ranks[cfg.crash.node], cfg.crash.after) if cfg.crash.node < graph.world_size else None
        if at is not None:  # (none: a training's last iteration, or a server's: as the loop, it never crashes)
            crash["graph_node"] = at
        out["crash"] = crash
    if cfg.dlcp is not None:  # the switches' DLCP for the graph's job (its collectives' layer classes)
        out["dlcp"] = dlcp_json(settings.dlcp, cfg.dlcp)
    return out
