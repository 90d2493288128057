"""Chakra execution traces in and out (gradswitch/workload/chakra): framing, the round trip, every refusal in
one line naming the file, node and problem, and the quirks of what Chakra's tools write, accepted."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradswitch.workload.chakra import read_traces, schema, write_traces
from gradswitch.workload.chakra.framing import FramingError, encode_varint, frame, records
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    ProcessGroup,
    RankGraph,
    RecvNode,
    SendNode,
    to_dict,
)

T, C = schema.NODE_TYPES, schema.COLLECTIVE_COMM_TYPES


def attr(name: str, **value: Any) -> Any:
    return schema.AttributeProto(name=name, **value)


def comp(node_id: int, micros: int = 10, data: tuple[int, ...] = (), ctrl: tuple[int, ...] = ()) -> Any:
    return schema.Node(id=node_id, name=f"comp{node_id}", type=T["COMP_NODE"], duration_micros=micros,
                       data_deps=list(data), ctrl_deps=list(ctrl))


def coll(node_id: int, comm_type: str, size: int, data: tuple[int, ...] = (), pg: str | None = None) -> Any:
    n = schema.Node(id=node_id, name=f"{comm_type}{node_id}", type=T["COMM_COLL_NODE"], data_deps=list(data))
    n.attr.extend([attr("comm_type", int64_val=C[comm_type]), attr("comm_size", int64_val=size)])
    if pg is not None:
        n.attr.append(attr("pg_name", string_val=pg))
    return n


def write_raw(prefix: Path, per_rank: list[list[Any]]) -> None:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for rank, nodes in enumerate(per_rank):
        meta = schema.GlobalMetadata(version="1.0.0")
        (prefix.parent / f"{prefix.name}.{rank}.et").write_bytes(
            frame([meta.SerializeToString(), *(n.SerializeToString() for n in nodes)]))


def without_sources(graph: JobGraph) -> dict[str, Any]:
    d = to_dict(graph)
    for r in d["ranks"]:
        r["source"] = ""
    return d


def refusal(prefix: Path, **kw: Any) -> str:
    with pytest.raises(GraphError) as e:
        read_traces(prefix, **kw)
    line = str(e.value)
    assert "\n" not in line
    return line


# --- framing ---

def test_varints_are_protobufs():
    assert [encode_varint(v) for v in (0, 1, 127, 128, 300, 2**32)] == [
        b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xac\x02", b"\x80\x80\x80\x80\x10"]


def test_framed_records_read_back(tmp_path):
    payloads = [b"", b"a", b"x" * 300, b"y" * 70000]
    (tmp_path / "f").write_bytes(frame(payloads))
    assert list(records(tmp_path / "f")) == payloads


@given(st.lists(st.binary(max_size=400), max_size=12))
def test_any_messages_frame_and_read_back(payloads):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f"
        path.write_bytes(frame(payloads))
        assert list(records(path)) == payloads


def test_a_truncated_file_is_named(tmp_path):
    (tmp_path / "f").write_bytes(frame([b"x" * 300])[:-1])
    with pytest.raises(FramingError, match=r"/f: record 0 claims 300 bytes .* 299 left"):
        list(records(tmp_path / "f"))


# --- the round trip ---

def mixed_graph() -> JobGraph:
    groups = (ProcessGroup("world", (0, 1, 2, 3)), ProcessGroup("1", (0, 1)), ProcessGroup("2", (2, 3)))
    ranks = []
    for r in range(4):
        pair = "1" if r < 2 else "2"
        nodes = (ComputeNode(0, "fwd", 0.000125),
                 CollectiveNode(1, "ar", CollectiveKind.ALL_REDUCE, "world", 4096, (0,)),
                 CollectiveNode(2, "rs", CollectiveKind.REDUCE_SCATTER, pair, 8192, (1,)),
                 CollectiveNode(3, "ag", CollectiveKind.ALL_GATHER, pair, 1024, (2,)),
                 CollectiveNode(4, "a2a", CollectiveKind.ALL_TO_ALL, "world", 2048, (0,)),
                 CollectiveNode(5, "bc", CollectiveKind.BROADCAST, "world", 512, (4,), root=2),
                 SendNode(6, "send", (r + 1) % 4, 7, 100, (5,)),
                 RecvNode(7, "recv", (r - 1) % 4, 7, 100, (5,)),
                 ComputeNode(8, "bwd", 0.5, (3, 6, 7)))
        ranks.append(RankGraph(r, nodes))
    return JobGraph("mixed", tuple(ranks), groups)


def test_what_we_write_reads_back_the_same(tmp_path):
    graph = mixed_graph()
    files = write_traces(graph, tmp_path / "mixed")
    assert [f.name for f in files] == [f"mixed.{r}.et" for r in range(4)] + ["mixed.groups.json"]
    assert json.loads((tmp_path / "mixed.groups.json").read_text()) == {"1": [0, 1], "2": [2, 3]}
    back = read_traces(tmp_path / "mixed")
    assert without_sources(back) == without_sources(graph)
    assert back.ranks[3].source == str(tmp_path / "mixed.3.et")


def test_a_world_only_trace_has_no_groups_file_and_stale_files_go(tmp_path):
    write_traces(mixed_graph(), tmp_path / "t")
    (tmp_path / "t.4.et").write_bytes(b"")  # a rank file an earlier, larger trace left
    ranks = tuple(RankGraph(r, (CollectiveNode(0, "ar", CollectiveKind.ALL_REDUCE, "world", 64),)) for r in range(2))
    write_traces(JobGraph("t", ranks, (ProcessGroup("world", (0, 1)),)), tmp_path / "t")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.0.et", "t.1.et"]
    assert read_traces(tmp_path / "t").world_size == 2


def test_durations_are_whole_microseconds(tmp_path):
    ranks = (RankGraph(0, (ComputeNode(0, "c", 0.0000014),)),)
    write_traces(JobGraph("d", ranks, ()), tmp_path / "d")
    node = read_traces(tmp_path / "d").ranks[0].nodes[0]
    assert isinstance(node, ComputeNode) and node.duration_s == 0.000001


def test_a_gzipped_trace_is_read(tmp_path):
    write_traces(mixed_graph(), tmp_path / "z")
    for r in range(4):
        f = tmp_path / f"z.{r}.et"
        f.write_bytes(gzip.compress(f.read_bytes()))
    assert without_sources(read_traces(tmp_path / "z")) == without_sources(mixed_graph()) | {"name": "z"}


# --- mapping ---

def test_pg_names_without_a_groups_file_run_on_the_world(tmp_path):
    write_raw(tmp_path / "t", [[coll(0, "ALL_REDUCE", 64, pg="0")] for _ in range(3)])
    graph = read_traces(tmp_path / "t")
    assert graph.groups == (ProcessGroup("world", (0, 1, 2)),)
    assert {n.group for _, n in graph.collectives()} == {"world"}


def test_a_groups_file_given_elsewhere_and_an_absent_pg_name(tmp_path):
    write_raw(tmp_path / "t", [[coll(0, "ALL_GATHER", 64, pg="7"), coll(1, "ALL_REDUCE", 8, (0,))]
                               for _ in range(2)])
    groups = tmp_path / "comm_groups.json"
    groups.write_text('{"7": [1, 0]}')
    graph = read_traces(tmp_path / "t", groups_file=groups)
    assert [(n.group, n.collective) for r, n in graph.collectives() if r == 0] == [
        ("7", CollectiveKind.ALL_GATHER), ("world", CollectiveKind.ALL_REDUCE)]


def test_broadcast_without_root_is_from_the_groups_first_rank(tmp_path):
    write_raw(tmp_path / "t", [[coll(0, "BROADCAST", 64, pg="g")] for _ in range(4)])
    (tmp_path / "t.groups.json").write_text('{"g": [2, 3]}')
    with pytest.raises(GraphError, match="rank 0 runs a collective of group 'g'"):
        read_traces(tmp_path / "t")
    write_raw(tmp_path / "u", [[coll(0, "BROADCAST", 64)] for _ in range(4)])
    (tmp_path / "u.groups.json").write_text('{"g": [2, 3]}')
    assert {n.root for _, n in read_traces(tmp_path / "u").collectives()} == {0}


@pytest.mark.parametrize("ntype", ["METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE"])
def test_nodes_that_neither_compute_nor_communicate_are_kept_as_waits(tmp_path, ntype):
    other = schema.Node(id=1, name="m", type=T[ntype], duration_micros=3, data_deps=[0])
    write_raw(tmp_path / "t", [[comp(0), other, comp(2, data=(1,))]])
    nodes = read_traces(tmp_path / "t").ranks[0].nodes
    assert nodes[1] == ComputeNode(1, "m", 0.000003, (0,))


def test_num_ops_only_computation_needs_a_rate(tmp_path):
    n = schema.Node(id=0, name="gemm", type=T["COMP_NODE"])
    n.attr.append(attr("num_ops", int64_val=2_000_000))
    write_raw(tmp_path / "t", [[n]])
    assert "node 0 (gemm): COMP_NODE with num_ops 2000000 and no duration_micros" in refusal(tmp_path / "t")
    node = read_traces(tmp_path / "t", flops_per_s=1e12).ranks[0].nodes[0]
    assert isinstance(node, ComputeNode) and node.duration_s == pytest.approx(2e-6)


# --- refusals: one line, the file, the node, the problem ---

def test_a_missing_ranks_file_is_named(tmp_path):
    write_raw(tmp_path / "t", [[comp(0)]] * 4)
    (tmp_path / "t.2.et").unlink()
    line = refusal(tmp_path / "t")
    assert line.startswith(f"{tmp_path}/t.2.et: missing") and "0-1, 3" in line


def test_no_trace_at_all_is_named(tmp_path):
    assert refusal(tmp_path / "none").startswith(f"{tmp_path}/none.0.et: no trace file")


def test_a_dependency_on_a_node_that_does_not_exist(tmp_path):
    write_raw(tmp_path / "t", [[comp(0), comp(1, data=(5,))]])
    assert refusal(tmp_path / "t") == f"{tmp_path}/t.0.et: node 1 (comp1): depends on node 5, which does not exist"


def test_a_cycle(tmp_path):
    write_raw(tmp_path / "t", [[comp(0, data=(1,)), comp(1, data=(0,))]])
    assert refusal(tmp_path / "t") == f"{tmp_path}/t.0.et: node 0 (comp0): its dependencies form a cycle"


@pytest.mark.parametrize("comm_type", ["REDUCE", "GATHER", "SCATTER", "BARRIER", "REDUCE_SCATTER_BLOCK"])
def test_an_unsupported_collective_is_named(tmp_path, comm_type):
    write_raw(tmp_path / "t", [[coll(3, comm_type, 64)]])
    assert refusal(tmp_path / "t") == (
        f"{tmp_path}/t.0.et: node 3 ({comm_type}3): comm_type {comm_type} is not supported (gradswitch runs "
        "ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, BROADCAST)")


def test_a_group_naming_a_rank_out_of_range(tmp_path):
    write_raw(tmp_path / "t", [[coll(0, "ALL_REDUCE", 64, pg="1")] for _ in range(2)])
    (tmp_path / "t.groups.json").write_text('{"1": [0, 2]}')
    assert refusal(tmp_path / "t") == (f"{tmp_path}/t.groups.json: group '1' names rank 2, out of range "
                                       "(the trace has ranks 0..1)")


def test_a_pg_name_the_groups_file_does_not_define(tmp_path):
    write_raw(tmp_path / "t", [[coll(0, "ALL_REDUCE", 64, pg="9")] for _ in range(2)])
    (tmp_path / "t.groups.json").write_text('{"1": [0, 1]}')
    assert refusal(tmp_path / "t") == (f"{tmp_path}/t.0.et: node 0 (ALL_REDUCE0): pg_name '9' is not in "
                                       f"{tmp_path}/t.groups.json (groups: 1)")


def test_sizes_that_do_not_match_across_a_group(tmp_path):
    write_raw(tmp_path / "t", [[coll(0, "ALL_GATHER", 64)], [coll(0, "ALL_GATHER", 65)]])
    line = refusal(tmp_path / "t")
    assert line.startswith(f"{tmp_path}/t.1.et: node 0 (ALL_GATHER0): collective 0 of group 'world' is all_gather "
                           "of 65 bytes here and all_gather of 64 bytes on rank 0")


def test_a_pg_name_that_is_not_a_string(tmp_path):
    n = coll(0, "ALL_REDUCE", 64)
    n.attr.append(attr("pg_name", int64_val=1))
    write_raw(tmp_path / "t", [[n]])
    assert refusal(tmp_path / "t") == (f"{tmp_path}/t.0.et: node 0 (ALL_REDUCE0): attribute pg_name is 1; it must be "
                                       "a string (string_val) naming the group")


def test_a_collective_without_its_size(tmp_path):
    n = schema.Node(id=0, name="ar", type=T["COMM_COLL_NODE"])
    n.attr.append(attr("comm_type", int64_val=0))
    write_raw(tmp_path / "t", [[n]])
    assert refusal(tmp_path / "t") == f"{tmp_path}/t.0.et: node 0 (ar): COMM_COLL_NODE without attribute comm_size"


def test_send_and_receive_attributes(tmp_path):
    def p2p(kind: str, **ints: int) -> Any:
        n = schema.Node(id=0, name=kind, type=T[kind])
        n.attr.extend(attr(k, int64_val=v) for k, v in ints.items())
        return n
    write_raw(tmp_path / "ok", [[p2p("COMM_SEND_NODE", comm_src=0, comm_dst=1, comm_tag=4, comm_size=10)],
                                [p2p("COMM_RECV_NODE", comm_src=0, comm_dst=1, comm_tag=4, comm_size=10)]])
    graph = read_traces(tmp_path / "ok")
    assert graph.ranks[0].nodes[0] == SendNode(0, "COMM_SEND_NODE", 1, 4, 10)
    assert graph.ranks[1].nodes[0] == RecvNode(0, "COMM_RECV_NODE", 0, 4, 10)
    write_raw(tmp_path / "src", [[p2p("COMM_SEND_NODE", comm_src=1, comm_dst=1, comm_size=10)], []])
    assert refusal(tmp_path / "src") == (f"{tmp_path}/src.0.et: node 0 (COMM_SEND_NODE): COMM_SEND_NODE with "
                                         "comm_src 1 in the file of rank 0")
    write_raw(tmp_path / "nodst", [[p2p("COMM_SEND_NODE", comm_size=10)], []])
    assert refusal(tmp_path / "nodst") == (f"{tmp_path}/nodst.0.et: node 0 (COMM_SEND_NODE): COMM_SEND_NODE without "
                                           "attribute comm_dst")
    write_raw(tmp_path / "unmatched", [[p2p("COMM_SEND_NODE", comm_dst=1, comm_size=10)], []])
    assert "no matching receive on rank 1 with tag 0" in refusal(tmp_path / "unmatched")


def test_an_invalid_node_type(tmp_path):
    write_raw(tmp_path / "t", [[schema.Node(id=4, name="x", type=T["INVALID_NODE"])]])
    assert refusal(tmp_path / "t").startswith(f"{tmp_path}/t.0.et: node 4 (x): node type INVALID_NODE; a trace's "
                                              "nodes are METADATA_NODE, MEM_LOAD_NODE")


def test_a_file_that_is_not_a_trace(tmp_path):
    (tmp_path / "t.0.et").write_bytes(b"\xff\xff\xff")
    assert refusal(tmp_path / "t").startswith(f"{tmp_path}/t.0.et: ends inside the size of record 0")
    (tmp_path / "t.0.et").write_bytes(b"")
    assert refusal(tmp_path / "t") == (f"{tmp_path}/t.0.et: empty; a Chakra trace file starts with a GlobalMetadata "
                                       "message")


# --- quirks of what Chakra's tools write, accepted ---

def test_quirk_pytorch_converter_ctrl_dep_on_a_node_0_not_in_the_file(tmp_path):
    write_raw(tmp_path / "t", [[comp(5, ctrl=(0,)), comp(6, data=(5,), ctrl=(5,))]])
    nodes = read_traces(tmp_path / "t").ranks[0].nodes
    assert [n.deps for n in nodes] == [(), (5,)]
    write_raw(tmp_path / "u", [[comp(5, ctrl=(3,))]])  # any other missing node is still refused
    assert "node 5 (comp5): depends on node 3, which does not exist" in refusal(tmp_path / "u")


def test_quirk_data_deps_chaining_every_node(tmp_path):
    chain = [comp(0)] + [comp(i, data=(i - 1,)) for i in range(1, 500)]
    chain[250] = coll(250, "ALL_REDUCE", 64, (249,))
    write_raw(tmp_path / "t", [chain, chain])
    graph = read_traces(tmp_path / "t")
    assert len(graph.ranks[1].nodes) == 500 and sum(1 for _ in graph.collectives()) == 2


def test_quirk_durations_0_when_not_linked(tmp_path):
    write_raw(tmp_path / "t", [[comp(0, micros=0), coll(1, "ALL_REDUCE", 64, (0,))]] * 2)
    graph = read_traces(tmp_path / "t")
    assert [n.duration_s for r in graph.ranks for n in r.nodes if isinstance(n, ComputeNode)] == [0.0, 0.0]


def test_quirk_generator_node_ids_differ_between_ranks(tmp_path):
    """chakra_generator numbers nodes with one counter across ranks: rank r's only node is node r."""
    write_raw(tmp_path / "t", [[coll(r, "ALL_TO_ALL", 65536)] for r in range(4)])
    graph = read_traces(tmp_path / "t")
    assert [r.nodes[0].id for r in graph.ranks] == [0, 1, 2, 3]


def test_a_groups_file_that_is_missing_or_not_a_mapping(tmp_path):
    write_raw(tmp_path / "t", [[coll(0, "ALL_REDUCE", 64, pg="1")] for _ in range(2)])
    assert refusal(tmp_path / "t", groups_file=tmp_path / "nope.json") == f"{tmp_path}/nope.json: no such groups file"
    (tmp_path / "t.groups.json").write_text("[[0, 1]]")
    assert refusal(tmp_path / "t") == (f'{tmp_path}/t.groups.json: a list; a groups file is an object such as '
                                       '{"1": [0, 1]}')
    (tmp_path / "t.groups.json").write_text('{"1": [0, 0]}')
    assert refusal(tmp_path / "t") == f"{tmp_path}/t.groups.json: group '1' names a rank twice: [0, 0]"
    (tmp_path / "t.groups.json").write_text('{"1": "0,1"}')
    assert refusal(tmp_path / "t") == (f"{tmp_path}/t.groups.json: group '1' is '0,1'; give a non-empty list of "
                                       "rank numbers")
