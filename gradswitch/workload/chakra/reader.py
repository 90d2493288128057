"""Reading a Chakra execution trace (one file per rank, PREFIX.{rank}.et) into a checked JobGraph.

Every refusal is one line naming the file, the node and the problem (GraphError), raised before
anything runs. What Chakra's own tools write is accepted as they write it (docs/workloads.md,
"Quirks accepted"): a control dependency on a node 0 that is not in the file (the PyTorch
converter's), data dependencies chaining every node, durations 0 (a trace not linked with
chakra_trace_link), node ids shared out across ranks (chakra_generator's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from gradswitch.workload.chakra import schema
from gradswitch.workload.chakra.framing import FramingError, records
from gradswitch.workload.chakra.groups import WORLD, groups_path, read_groups
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    Node,
    ProcessGroup,
    RankGraph,
    RecvNode,
    SendNode,
    validate,
    world_group,
)

T = schema.NODE_TYPES
C = schema.COLLECTIVE_COMM_TYPES
# Chakra's comm_type -> the collective gradswitch runs; the others (REDUCE, GATHER, ...) are refused
COLLECTIVES: dict[int, CollectiveKind] = {
    C["ALL_REDUCE"]: CollectiveKind.ALL_REDUCE, C["REDUCE_SCATTER"]: CollectiveKind.REDUCE_SCATTER,
    C["ALL_GATHER"]: CollectiveKind.ALL_GATHER, C["ALL_TO_ALL"]: CollectiveKind.ALL_TO_ALL,
    C["BROADCAST"]: CollectiveKind.BROADCAST,
}
COMM_TYPE_NAMES = {v: k for k, v in C.items()}
NODE_TYPE_NAMES = {v: k for k, v in T.items()}
# node types that neither compute nor communicate: kept, as computations of their duration_micros
# (usually 0), so that the dependencies through them hold
PASSIVE_TYPES = (T["METADATA_NODE"], T["MEM_LOAD_NODE"], T["MEM_STORE_NODE"])
QUIRK_MISSING_CTRL_DEP = 0  # the PyTorch converter's control dependency on a node 0 it does not write


def rank_ranges(ranks: list[int]) -> str:
    out, start = [], ranks[0]
    for a, b in zip(ranks, [*ranks[1:], None], strict=True):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}-{a}")
            start = b if b is not None else a
    return ", ".join(out)


def trace_files(prefix: Path) -> list[Path]:
    """DIR/PREFIX.0.et .. DIR/PREFIX.{N-1}.et; GraphError naming the first missing rank's file."""
    folder, stem = prefix.parent, prefix.name
    if not folder.is_dir():
        raise GraphError(f"{folder}: no such directory (a trace is given as DIR/PREFIX, its files "
                         "DIR/PREFIX.{rank}.et)")
    found: dict[int, Path] = {}
    for p in folder.iterdir():
        middle = p.name[len(stem) + 1:-3]
        if p.name.startswith(stem + ".") and p.name.endswith(".et") and middle.isdigit():
            found[int(middle)] = p
    if not found:
        raise GraphError(f"{prefix}.0.et: no trace file {prefix.name}.{{rank}}.et in {folder} (a trace is one file "
                         "per rank, PREFIX.0.et, PREFIX.1.et, ...)")
    missing = [r for r in range(max(found) + 1) if r not in found]
    if missing:
        raise GraphError(f"{prefix}.{missing[0]}.et: missing (files of ranks {rank_ranges(sorted(found))} are there; "
                         "a trace has one file per rank, 0..N-1)")
    return [found[r] for r in range(len(found))]


def _attrs(node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        out[a.name] = getattr(a, kind) if kind else None
    return out


def _int(attrs: dict[str, Any], name: str, at: str) -> int | None:
    if name not in attrs:
        return None
    v = attrs[name]
    if isinstance(v, bool) or not isinstance(v, int):
        raise GraphError(f"{at}: attribute {name} is {v!r}; it must be an integer")
    return v


def _required(attrs: dict[str, Any], name: str, at: str, what: str) -> int:
    v = _int(attrs, name, at)
    if v is None:
        raise GraphError(f"{at}: {what} without attribute {name}")
    return v


class _Context:
    """What converting one rank's nodes needs: the rank, the world size, the groups."""

    def __init__(self, rank: int, ranks: int, groups: dict[str, ProcessGroup] | None, groups_file: Path,
                 flops_per_s: float | None) -> None:
        self.rank, self.ranks, self.groups, self.groups_file = rank, ranks, groups, groups_file
        self.flops_per_s = flops_per_s
        self.used: set[str] = set()

    def group(self, pg_name: str | None, at: str) -> ProcessGroup:
        if self.groups is None or not pg_name:
            self.used.add(WORLD)
            return world_group(self.ranks, WORLD)
        if pg_name not in self.groups:
            raise GraphError(f"{at}: pg_name {pg_name!r} is not in {self.groups_file} "
                             f"(groups: {', '.join(self.groups) or 'none'})")
        self.used.add(pg_name)
        return self.groups[pg_name]


def _node(msg: Any, at: str, deps: tuple[int, ...], ctx: _Context) -> Node:
    attrs = _attrs(msg)
    node_id, name, ntype = int(msg.id), msg.name or f"node {msg.id}", int(msg.type)
    if ntype == T["COMP_NODE"]:
        duration = msg.duration_micros / 1e6
        ops = attrs.get("num_ops")
        if msg.duration_micros == 0 and isinstance(ops, int) and not isinstance(ops, bool) and ops > 0:
            if ctx.flops_per_s is None:
                raise GraphError(f"{at}: COMP_NODE with num_ops {ops} and no duration_micros; gradswitch times "
                                 "computation by duration: give duration_micros, or a compute rate (flops_per_s)")
            duration = ops / ctx.flops_per_s
        return ComputeNode(node_id, name, duration, deps)
    if ntype in PASSIVE_TYPES:
        return ComputeNode(node_id, name, msg.duration_micros / 1e6, deps)
    if ntype == T["COMM_COLL_NODE"]:
        comm_type = _required(attrs, "comm_type", at, "COMM_COLL_NODE")
        kind = COLLECTIVES.get(comm_type)
        if kind is None:
            supported = ", ".join(COMM_TYPE_NAMES[k] for k in COLLECTIVES)
            raise GraphError(f"{at}: comm_type {COMM_TYPE_NAMES.get(comm_type, comm_type)} is not supported "
                             f"(gradswitch runs {supported})")
        nbytes = _required(attrs, "comm_size", at, "COMM_COLL_NODE")
        pg = attrs.get("pg_name")
        if pg is not None and not isinstance(pg, str):
            raise GraphError(f"{at}: attribute pg_name is {pg!r}; it must be a string (string_val) naming the group")
        group = ctx.group(pg, at)
        root = _int(attrs, "root", at)  # gradswitch's own attribute: Chakra's schema has no broadcast root
        if root is None:
            root = group.ranks[0] if kind == CollectiveKind.BROADCAST else 0
        layer = _int(attrs, "layer_class", at)  # gradswitch's own too: a DLCP layer class (validate checks it)
        droppable = attrs.get("droppable", False)  # and whether DLCP may drop its packets
        if not isinstance(droppable, bool):
            raise GraphError(f"{at}: attribute droppable is {droppable!r}; it must be a bool (bool_val)")
        return CollectiveNode(node_id, name, kind, group.name, nbytes, deps, root, layer or 0, droppable)
    if ntype in (T["COMM_SEND_NODE"], T["COMM_RECV_NODE"]):
        send = ntype == T["COMM_SEND_NODE"]
        what = NODE_TYPE_NAMES[ntype]
        peer_attr, own_attr = ("comm_dst", "comm_src") if send else ("comm_src", "comm_dst")
        peer = _required(attrs, peer_attr, at, what)
        own = _int(attrs, own_attr, at)
        if own is not None and own != ctx.rank:
            raise GraphError(f"{at}: {what} with {own_attr} {own} in the file of rank {ctx.rank}")
        nbytes = _required(attrs, "comm_size", at, what)
        tag = _int(attrs, "comm_tag", at) or 0
        return (SendNode if send else RecvNode)(node_id, name, peer, tag, nbytes, deps)
    known = ", ".join(k for k, v in T.items() if v != T["INVALID_NODE"])
    raise GraphError(f"{at}: node type {NODE_TYPE_NAMES.get(ntype, ntype)}; a trace's nodes are {known}")


def _read_rank(path: Path, ctx: _Context) -> RankGraph:
    try:
        raw = list(records(path))
    except FramingError as e:
        raise GraphError(str(e)) from None
    if not raw:
        raise GraphError(f"{path}: empty; a Chakra trace file starts with a GlobalMetadata message")
    meta = schema.GlobalMetadata()
    try:
        meta.ParseFromString(raw[0])
    except DecodeError as e:
        raise GraphError(f"{path}: record 0 is not Chakra's GlobalMetadata ({e})") from None
    messages = []
    for k, payload in enumerate(raw[1:], start=1):
        msg = schema.Node()
        try:
            msg.ParseFromString(payload)
        except DecodeError as e:
            raise GraphError(f"{path}: record {k} is not a Chakra Node ({e})") from None
        messages.append(msg)
    ids = {int(m.id) for m in messages}
    nodes: list[Node] = []
    for msg in messages:
        at = f"{path}: node {msg.id} ({msg.name or 'no name'})"
        ctrl = [int(d) for d in msg.ctrl_deps if not (d == QUIRK_MISSING_CTRL_DEP and d not in ids)]
        deps = tuple(dict.fromkeys([*(int(d) for d in msg.data_deps), *ctrl]))
        nodes.append(_node(msg, at, deps, ctx))
    return RankGraph(ctx.rank, tuple(nodes), str(path))


def read_traces(prefix: Path, groups_file: Path | None = None, flops_per_s: float | None = None) -> JobGraph:
    """The job a Chakra trace describes, checked (gradswitch.workload.graph.validate): GraphError, one line
    naming the file, node and problem, if it cannot run. `groups_file` (default
    PREFIX.groups.json, when there) maps pg_names to ranks; `flops_per_s` times COMP_NODEs that
    give num_ops and no duration."""
    files = trace_files(prefix)
    gfile = groups_file if groups_file is not None else groups_path(prefix)
    if groups_file is not None and not groups_file.exists():
        raise GraphError(f"{groups_file}: no such groups file")
    groups = read_groups(gfile, len(files)) if gfile.exists() else None
    used: set[str] = set()
    ranks = []
    for rank, path in enumerate(files):
        ctx = _Context(rank, len(files), groups, gfile, flops_per_s)
        ranks.append(_read_rank(path, ctx))
        used |= ctx.used
    defined = [world_group(len(files), WORLD)] if WORLD in used and (groups is None or WORLD not in groups) else []
    defined += list((groups or {}).values())
    graph = JobGraph(prefix.name, tuple(ranks), tuple(defined))
    validate(graph)
    return graph
