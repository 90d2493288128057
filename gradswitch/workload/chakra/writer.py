"""Writing a JobGraph as a Chakra execution trace: PREFIX.{rank}.et per rank, and PREFIX.groups.json
when a collective runs on a group other than the world (docs/workloads.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradswitch.workload.chakra import schema
from gradswitch.workload.chakra.framing import frame
from gradswitch.workload.chakra.groups import groups_path, is_world, write_groups
from gradswitch.workload.chakra.reader import COLLECTIVES
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, JobGraph, Node, SendNode, validate

SCHEMA_VERSION = "1.0.0"  # GlobalMetadata.version, as mlc-chakra 1.0.0's chakra_generator writes it
COMM_TYPES: dict[CollectiveKind, int] = {kind: number for number, kind in COLLECTIVES.items()}
T = schema.NODE_TYPES


def _attr(name: str, value: int | str | bool) -> Any:
    if isinstance(value, bool):
        return schema.AttributeProto(name=name, bool_val=value)
    if isinstance(value, str):
        return schema.AttributeProto(name=name, string_val=value)
    return schema.AttributeProto(name=name, int64_val=value)


def _message(node: Node, rank: int, graph: JobGraph) -> Any:
    msg = schema.Node(id=node.id, name=node.name, data_deps=list(node.deps))
    msg.attr.append(_attr("is_cpu_op", False))
    if isinstance(node, ComputeNode):
        msg.type = T["COMP_NODE"]
        msg.duration_micros = round(node.duration_s * 1e6)
    elif isinstance(node, CollectiveNode):
        msg.type = T["COMM_COLL_NODE"]
        msg.attr.extend([_attr("comm_type", COMM_TYPES[node.collective]), _attr("comm_size", node.nbytes)])
        if not is_world(graph.group(node.group), graph.world_size):
            msg.attr.append(_attr("pg_name", node.group))
        if node.collective == CollectiveKind.BROADCAST:
            msg.attr.append(_attr("root", node.root))
        if node.layer_class:
            msg.attr.append(_attr("layer_class", node.layer_class))
        if node.droppable:
            msg.attr.append(_attr("droppable", True))
    else:
        send = isinstance(node, SendNode)
        msg.type = T["COMM_SEND_NODE"] if send else T["COMM_RECV_NODE"]
        src, dst = (rank, node.peer) if send else (node.peer, rank)
        msg.attr.extend([_attr("comm_src", src), _attr("comm_dst", dst), _attr("comm_tag", node.tag),
                         _attr("comm_size", node.nbytes)])
    return msg


def write_traces(graph: JobGraph, prefix: Path) -> list[Path]:
    """Write the (checked) graph as DIR/PREFIX.{rank}.et, and DIR/PREFIX.groups.json when it has groups
    other than the world; files of higher ranks and a groups file left by an earlier trace under the
    same prefix are removed (they would make another trace). Returns the files written."""
    validate(graph)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    meta = schema.GlobalMetadata(version=SCHEMA_VERSION, attr=[_attr("generator", "gradswitch")])
    written: list[Path] = []
    for r in graph.ranks:
        path = prefix.parent / f"{prefix.name}.{r.rank}.et"
        path.write_bytes(frame([meta.SerializeToString(),
                                *(_message(n, r.rank, graph).SerializeToString() for n in r.nodes)]))
        written.append(path)
    stale = graph.world_size
    while (old := prefix.parent / f"{prefix.name}.{stale}.et").exists():
        old.unlink()
        stale += 1
    groups = [g for g in graph.groups if not is_world(g, graph.world_size)]
    gfile = groups_path(prefix)
    if groups:
        write_groups(gfile, groups)
        written.append(gfile)
    elif gfile.exists():
        gfile.unlink()
    return written
