"""A job's workload as execution graphs: per rank, compute and communication nodes with dependencies.

This is the one model every backend runs (the Python hosts on BMv2, the C++ simulator) and every
source produces (Chakra traces, gradswitch's own generators, a traced PyTorch model). It follows
MLCommons Chakra's execution trace: a node starts once every node it depends on is done, several
collectives may be in flight at once on different process groups, and the k-th collective of a
process group is the same operation on every member (as in NCCL: members issue a group's
collectives in one order).

Sizes follow Chakra and ASTRA-sim: `nbytes` of a collective is the rank's input buffer for
all-reduce, reduce-scatter, all-to-all and broadcast, and the rank's own shard for all-gather (its
output then holds N times that). Times are real seconds of the emulated cluster.

`validate` refuses a graph that cannot run, in one line naming the rank's file, the node and the
problem (GraphError), before anything starts.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from gradswitch.protocol.choice import Choice
from gradswitch.protocol.dlcp import LAYER_CLASSES


class CollectiveKind(Choice):
    """The collectives a graph may hold (Chakra's CollectiveCommType names, lower case)."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"


# What NetReduce runs in the switches of a graph (each type on its own switch job): the world group's all-reduce,
# reduce-scatter and all-gather; the other collectives, and the ones of smaller groups, run on the hosts. Both
# backends read it: BMv2's graph engine (gradswitch/hosts/collectives/in_network.py) and the simulator's
# (gradswitch/sim/graph_run.py).
IN_NETWORK: tuple[CollectiveKind, ...] = (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER,
                                          CollectiveKind.ALL_GATHER)


class GraphError(ValueError):
    """A graph that cannot run: one line, naming where (the rank's file, the node) and what."""


@dataclass(frozen=True)
class ProcessGroup:
    """Ranks that run collectives together; `name` is the trace's pg_name."""

    name: str
    ranks: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(set(self.ranks)) != len(self.ranks):
            raise GraphError(f"process group {self.name!r}: a rank appears twice in {list(self.ranks)}")


@dataclass(frozen=True)
class ComputeNode:
    id: int
    name: str
    duration_s: float
    deps: tuple[int, ...] = ()


@dataclass(frozen=True)
class CollectiveNode:
    id: int
    name: str
    collective: CollectiveKind
    group: str  # a ProcessGroup's name
    nbytes: int  # see the module's docstring for what the size of each collective means
    deps: tuple[int, ...] = ()
    root: int = 0  # broadcast: the group's rank (a global rank) whose buffer every member receives
    # DLCP (docs/dlcp.md): the layer class its packets carry, 0 (the front layers: the top priority) to
    # LAYER_CLASSES - 1; switches with DLCP priority on schedule by it
    layer_class: int = 0
    # DLCP dropping: its packets may be marked droppable (the job's policy marks which: docs/dlcp.md); a training
    # graph's all-reduces are, as the loop's writes (not exponent codes); a trace's are not (every output exact)
    droppable: bool = False


@dataclass(frozen=True)
class SendNode:
    id: int
    name: str
    peer: int  # the receiving rank
    tag: int
    nbytes: int
    deps: tuple[int, ...] = ()


@dataclass(frozen=True)
class RecvNode:
    id: int
    name: str
    peer: int  # the sending rank
    tag: int
    nbytes: int
    deps: tuple[int, ...] = ()


Node = ComputeNode | CollectiveNode | SendNode | RecvNode
NODE_KINDS: dict[str, type[Node]] = {"compute": ComputeNode, "collective": CollectiveNode, "send": SendNode,
                                     "recv": RecvNode}


def node_kind(node: Node) -> str:
    return next(k for k, t in NODE_KINDS.items() if isinstance(node, t))


@dataclass(frozen=True)
class RankGraph:
    """One rank's nodes; `source` names where it came from (a trace file) for error messages."""

    rank: int
    nodes: tuple[Node, ...]
    source: str = ""

    def where(self) -> str:
        return self.source or f"rank {self.rank}"

    def by_id(self) -> dict[int, Node]:
        return {n.id: n for n in self.nodes}


@dataclass(frozen=True)
class JobGraph:
    """Every rank's graph and the process groups their collectives name."""

    name: str
    ranks: tuple[RankGraph, ...]
    groups: tuple[ProcessGroup, ...] = field(default_factory=tuple)

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def group(self, name: str) -> ProcessGroup:
        for g in self.groups:
            if g.name == name:
                return g
        raise GraphError(f"no process group {name!r} (groups: {', '.join(g.name for g in self.groups) or 'none'})")

    def dilated(self, factor: float) -> JobGraph:
        """The graph with every computation `factor` times as long (what a run dilated by it computes on the
        clock: a simulated twin of a dilated testbed run)."""
        return replace(self, ranks=tuple(replace(r, nodes=tuple(
            replace(n, duration_s=n.duration_s * factor) if isinstance(n, ComputeNode) else n for n in r.nodes))
            for r in self.ranks))

    def collectives(self) -> Iterator[tuple[int, CollectiveNode]]:
        for r in self.ranks:
            for n in r.nodes:
                if isinstance(n, CollectiveNode):
                    yield r.rank, n


def world_group(ranks: int, name: str = "world") -> ProcessGroup:
    return ProcessGroup(name, tuple(range(ranks)))


def topological_order(rank: RankGraph) -> list[Node]:
    """The rank's nodes, each after its dependencies (stable: file order where free); GraphError on
    a duplicate id, a dependency on a missing node or a cycle."""
    by_id: dict[int, Node] = {}
    for n in rank.nodes:
        if n.id in by_id:
            raise GraphError(f"{rank.where()}: node {n.id} ({n.name}): the id appears twice")
        by_id[n.id] = n
    for n in rank.nodes:
        for d in n.deps:
            if d not in by_id:
                raise GraphError(f"{rank.where()}: node {n.id} ({n.name}): depends on node {d}, which does not exist")
            if d == n.id:
                raise GraphError(f"{rank.where()}: node {n.id} ({n.name}): depends on itself")
    waiting = {n.id: len(set(n.deps)) for n in rank.nodes}
    users: dict[int, list[int]] = defaultdict(list)
    for n in rank.nodes:
        for d in set(n.deps):
            users[d].append(n.id)
    position = {n.id: i for i, n in enumerate(rank.nodes)}
    ready = sorted((position[i] for i, w in waiting.items() if w == 0))
    order: list[Node] = []
    heapq.heapify(ready)
    while ready:
        n = rank.nodes[heapq.heappop(ready)]
        order.append(n)
        for u in users[n.id]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, position[u])
    if len(order) != len(rank.nodes):
        stuck = min((n for n in rank.nodes if waiting[n.id] > 0), key=lambda n: position[n.id])
        raise GraphError(f"{rank.where()}: node {stuck.id} ({stuck.name}): its dependencies form a cycle")
    return order


def validate(graph: JobGraph) -> None:
    """GraphError (one line: file, node, problem) unless every rank's graph can run: ranks numbered
    0..N-1, ids unique, dependencies present and acyclic, sizes and durations sensible, groups known
    and within the job, each group's collectives the same sequence on every member, every send
    matched by a receive of the same size and tag."""
    n_ranks = graph.world_size
    if n_ranks == 0:
        raise GraphError(f"{graph.name}: no rank")
    for i, r in enumerate(graph.ranks):
        if r.rank != i:
            raise GraphError(f"{r.where()}: rank {r.rank} where rank {i} was expected (ranks are 0..{n_ranks - 1})")
    names = [g.name for g in graph.groups]
    for g in graph.groups:
        if names.count(g.name) > 1:
            raise GraphError(f"{graph.name}: process group {g.name!r} is defined twice")
        bad = [x for x in g.ranks if not 0 <= x < n_ranks]
        if bad:
            raise GraphError(f"{graph.name}: process group {g.name!r} names rank {bad[0]}, out of range "
                             f"(the job has ranks 0..{n_ranks - 1})")
        if not g.ranks:
            raise GraphError(f"{graph.name}: process group {g.name!r} has no rank")
    groups = {g.name: g for g in graph.groups}
    sequences: dict[str, dict[int, list[tuple[CollectiveNode, str]]]] = defaultdict(dict)
    sends: dict[tuple[int, int, int], list[tuple[SendNode, str]]] = defaultdict(list)
    recvs: dict[tuple[int, int, int], list[tuple[RecvNode, str]]] = defaultdict(list)
    for r in graph.ranks:
        where = r.where()
        for n in topological_order(r):
            at = f"{where}: node {n.id} ({n.name})"
            if isinstance(n, ComputeNode):
                if not n.duration_s >= 0:
                    raise GraphError(f"{at}: duration {n.duration_s} s; a computation takes 0 s or more")
                continue
            if n.nbytes <= 0:
                raise GraphError(f"{at}: {n.nbytes} bytes; communication moves at least 1 byte")
            if isinstance(n, CollectiveNode):
                pg = groups.get(n.group)
                if pg is None:
                    raise GraphError(f"{at}: process group {n.group!r} is not defined "
                                     f"(groups: {', '.join(groups) or 'none'})")
                if r.rank not in pg.ranks:
                    raise GraphError(f"{at}: rank {r.rank} runs a collective of group {n.group!r}, "
                                     f"which holds ranks {list(pg.ranks)}")
                if n.collective == CollectiveKind.BROADCAST and n.root not in pg.ranks:
                    raise GraphError(f"{at}: broadcast root {n.root} is not in group {n.group!r} {list(pg.ranks)}")
                if not 0 <= n.layer_class < LAYER_CLASSES:
                    raise GraphError(f"{at}: layer class {n.layer_class}; DLCP's layer classes are 0 (the front "
                                     f"layers) to {LAYER_CLASSES - 1}")
                sequences[n.group].setdefault(r.rank, []).append((n, at))
            else:
                if not 0 <= n.peer < n_ranks or n.peer == r.rank:
                    raise GraphError(f"{at}: peer rank {n.peer} (the job has ranks 0..{n_ranks - 1}, "
                                     f"and a rank does not send to itself)")
                if isinstance(n, SendNode):
                    sends[(r.rank, n.peer, n.tag)].append((n, at))
                else:
                    recvs[(n.peer, r.rank, n.tag)].append((n, at))
    for name, per_rank in sequences.items():
        _check_group(groups[name], per_rank)
    for key in sends.keys() | recvs.keys():
        s, v = sends.get(key, []), recvs.get(key, [])
        for (a, at), (b, _) in zip(s, v, strict=False):
            if a.nbytes != b.nbytes:
                raise GraphError(f"{at}: sends {a.nbytes} bytes to rank {key[1]} (tag {key[2]}), which receives "
                                 f"{b.nbytes}")
        if len(s) != len(v):
            extra = (s[len(v):] or v[len(s):])[0][1]
            missing = f"receive on rank {key[1]}" if len(s) > len(v) else f"send from rank {key[0]}"
            raise GraphError(f"{extra}: no matching {missing} with tag {key[2]} ({len(s)} sends, {len(v)} receives)")


def _check_group(group: ProcessGroup, per_rank: dict[int, list[tuple[CollectiveNode, str]]]) -> None:
    missing = [x for x in group.ranks if x not in per_rank]
    if missing:
        first = next(iter(per_rank.values()))[0][1]
        raise GraphError(f"{first}: a collective of group {group.name!r} that rank {missing[0]} never runs")
    ref_rank = group.ranks[0]
    ref = per_rank[ref_rank]
    for x in group.ranks[1:]:
        mine = per_rank[x]
        for k, ((a, _), (b, at)) in enumerate(zip(ref, mine, strict=False)):
            if (a.collective, a.nbytes, a.root) != (b.collective, b.nbytes, b.root):
                raise GraphError(f"{at}: collective {k} of group {group.name!r} is {b.collective} of {b.nbytes} "
                                 f"bytes here and {a.collective} of {a.nbytes} bytes on rank {ref_rank} "
                                 f"(every member runs the same sequence)")
        if len(mine) != len(ref):
            longer = (mine if len(mine) > len(ref) else ref)[min(len(mine), len(ref))][1]
            raise GraphError(f"{longer}: group {group.name!r} runs {len(ref)} collectives on rank {ref_rank} "
                             f"and {len(mine)} on rank {x}")


# --- a plain, versioned form (what the C++ simulator's configuration and the hosts' job files carry) ---

GRAPH_FORMAT = 1


def to_dict(graph: JobGraph) -> dict[str, Any]:
    """Every field written, ids as they are; `from_dict(to_dict(g)) == g`."""
    def node(n: Node) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": node_kind(n), "id": n.id, "name": n.name, "deps": list(n.deps)}
        if isinstance(n, ComputeNode):
            d["duration_s"] = n.duration_s
        elif isinstance(n, CollectiveNode):
            d.update(collective=n.collective.value, group=n.group, nbytes=n.nbytes, root=n.root,
                     layer_class=n.layer_class, droppable=n.droppable)
        else:
            d.update(peer=n.peer, tag=n.tag, nbytes=n.nbytes)
        return d
    return {"format": GRAPH_FORMAT, "name": graph.name,
            "groups": [{"name": g.name, "ranks": list(g.ranks)} for g in graph.groups],
            "ranks": [{"rank": r.rank, "source": r.source, "nodes": [node(n) for n in r.nodes]}
                      for r in graph.ranks]}


def from_dict(d: dict[str, Any]) -> JobGraph:
    if d.get("format") != GRAPH_FORMAT:
        raise GraphError(f"graph format {d.get('format')!r}; this gradswitch reads format {GRAPH_FORMAT}")

    def node(x: dict[str, Any]) -> Node:
        deps = tuple(int(v) for v in x["deps"])
        kind = x["kind"]
        if kind == "compute":
            return ComputeNode(int(x["id"]), str(x["name"]), float(x["duration_s"]), deps)
        if kind == "collective":
            return CollectiveNode(int(x["id"]), str(x["name"]), CollectiveKind(x["collective"]), str(x["group"]),
                                  int(x["nbytes"]), deps, int(x["root"]), int(x.get("layer_class", 0)),
                                  bool(x.get("droppable", False)))
        if kind in ("send", "recv"):
            cls = SendNode if kind == "send" else RecvNode
            return cls(int(x["id"]), str(x["name"]), int(x["peer"]), int(x["tag"]), int(x["nbytes"]), deps)
        raise GraphError(f"node {x.get('id')}: kind {kind!r}; one of {', '.join(NODE_KINDS)}")

    return JobGraph(str(d["name"]),
                    tuple(RankGraph(int(r["rank"]), tuple(node(n) for n in r["nodes"]), str(r.get("source", "")))
                          for r in d["ranks"]),
                    tuple(ProcessGroup(str(g["name"]), tuple(int(x) for x in g["ranks"])) for g in d["groups"]))

