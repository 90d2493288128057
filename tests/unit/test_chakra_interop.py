"""gradswitch's Chakra traces against MLCommons Chakra itself (mlc-chakra 1.0.0): our schema is its
et_def.proto field for field; what we write its et_def_pb2/protolib and chakra_jsonizer read; what
chakra_generator, chakra_converter (Text) and a script on its et_def_pb2 write, we read.

Without mlc-chakra these tests skip with the reason; GRADSWITCH_REQUIRE_CHAKRA=1 (`.ci/run` sets it
after installing `mlc-chakra==1.0.0 --no-deps`) makes them fail instead."""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest

from gradswitch.workload.chakra import read_traces, schema, write_traces
from gradswitch.workload.generators import send_recv_graph, training_graph, training_job
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    ProcessGroup,
    RankGraph,
)
from tests.require import missing

INSTALL = "pip install --no-deps mlc-chakra==1.0.0"


def _missing(reason: str) -> NoReturn:
    missing("chakra", f"{reason} ({INSTALL})")  # fails instead with GRADSWITCH_REQUIRE_CHAKRA=1 (.ci/run)


@pytest.fixture(scope="module")
def et_def() -> ModuleType:
    try:
        return importlib.import_module("chakra.schema.protobuf.et_def_pb2")
    except ImportError as e:
        _missing(f"mlc-chakra is not installed: {e}")
        raise


@pytest.fixture(scope="module")
def protolib() -> ModuleType:
    try:
        return importlib.import_module("chakra.src.third_party.utils.protolib")
    except ImportError as e:
        _missing(f"mlc-chakra is not installed: {e}")
        raise


def tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        _missing(f"{name} is not installed beside {sys.executable} nor on PATH")
    assert found is not None
    return found


def describe(d: Any) -> dict[str, Any]:
    """A message or enum descriptor as plain data: what the wire format and JSON depend on."""
    if hasattr(d, "values_by_name"):
        return {v.name: v.number for v in d.values}
    return {f.name: (f.number, f.type, f.is_repeated,
                     f.message_type.name if f.message_type else None, f.enum_type.name if f.enum_type else None,
                     f.containing_oneof.name if f.containing_oneof else None) for f in d.fields}


def test_our_schema_is_chakras_et_def_field_for_field(et_def):
    theirs = et_def.DESCRIPTOR
    ours = schema.Node.DESCRIPTOR.file
    assert theirs.package == ours.package == "ChakraProtoMsg"
    assert set(theirs.message_types_by_name) == set(ours.message_types_by_name)
    assert set(theirs.enum_types_by_name) == set(ours.enum_types_by_name)
    for name, d in theirs.message_types_by_name.items():
        assert describe(ours.message_types_by_name[name]) == describe(d), name
    for name, d in theirs.enum_types_by_name.items():
        assert describe(ours.enum_types_by_name[name]) == describe(d), name
    assert describe(theirs.enum_types_by_name["NodeType"]) == schema.NODE_TYPES
    assert describe(theirs.enum_types_by_name["CollectiveCommType"]) == schema.COLLECTIVE_COMM_TYPES


def everything() -> JobGraph:
    """Every collective, send/recv, groups, computation."""
    groups = (ProcessGroup("world", (0, 1, 2, 3)), ProcessGroup("1", (0, 1)), ProcessGroup("2", (2, 3)))
    ranks = []
    for r in range(4):
        pg = "1" if r < 2 else "2"
        ranks.append(RankGraph(r, (
            ComputeNode(10, "fwd", 0.00125),
            *(CollectiveNode(11 + i, k.value, k, "world" if i % 2 else pg, 4096 * (i + 1), (10 + i,),
                             root=0 if i % 2 or r < 2 else 2)
              for i, k in enumerate(CollectiveKind)))))
    return JobGraph("everything", tuple(ranks), groups)


def read_with_chakra(et_def: ModuleType, protolib: ModuleType, path: Path) -> tuple[Any, list[Any]]:
    with open(path, "rb") as f:
        meta = et_def.GlobalMetadata()
        assert protolib.decodeMessage(f, meta)
        nodes: list[Any] = []
        while True:
            node = et_def.Node()
            if not protolib.decodeMessage(f, node):
                return meta, nodes
            nodes.append(node)


def test_chakra_reads_what_we_write(tmp_path, et_def, protolib):
    graph = everything()
    write_traces(graph, tmp_path / "e")
    for r in graph.ranks:
        meta, nodes = read_with_chakra(et_def, protolib, tmp_path / f"e.{r.rank}.et")
        assert meta.version == "1.0.0"
        assert [(n.id, n.name, list(n.data_deps)) for n in nodes] == [(x.id, x.name, list(x.deps)) for x in r.nodes]
        assert nodes[0].type == et_def.COMP_NODE and nodes[0].duration_micros == 1250
        names = {k: getattr(et_def, k.value.upper()) for k in CollectiveKind}
        for n, x in zip(nodes[1:], r.nodes[1:], strict=True):
            assert isinstance(x, CollectiveNode)
            attrs = {a.name: getattr(a, a.WhichOneof("value")) for a in n.attr}
            assert n.type == et_def.COMM_COLL_NODE
            assert (attrs["comm_type"], attrs["comm_size"]) == (names[x.collective], x.nbytes)
            assert attrs.get("pg_name") == (None if x.group == "world" else x.group)


def test_chakra_reads_our_send_recv_and_training(tmp_path, et_def, protolib):
    write_traces(send_recv_graph(2, 100), tmp_path / "p")
    _, nodes = read_with_chakra(et_def, protolib, tmp_path / "p.1.et")
    assert [n.type for n in nodes] == [et_def.COMM_SEND_NODE, et_def.COMM_RECV_NODE]
    attrs = [{a.name: a.int64_val for a in n.attr if a.name.startswith("comm")} for n in nodes]
    assert attrs == [{"comm_src": 1, "comm_dst": 0, "comm_tag": 0, "comm_size": 100},
                     {"comm_src": 0, "comm_dst": 1, "comm_tag": 0, "comm_size": 100}]
    graph = training_graph(training_job("resnet50", 2, 1))
    write_traces(graph, tmp_path / "rn")
    _, nodes = read_with_chakra(et_def, protolib, tmp_path / "rn.0.et")
    assert len(nodes) == len(graph.ranks[0].nodes)


def test_chakra_jsonizer_reads_what_we_write(tmp_path, et_def):
    write_traces(everything(), tmp_path / "e")
    out = tmp_path / "e.2.json"
    result = subprocess.run([tool("chakra_jsonizer"), "--input_filename", str(tmp_path / "e.2.et"),
                             "--output_filename", str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    decoder, pos, objects = json.JSONDecoder(), 0, []
    while pos < len(text):  # the jsonizer writes one JSON object per message, back to back
        obj, pos = decoder.raw_decode(text, pos)
        objects.append(obj)
        while pos < len(text) and text[pos].isspace():
            pos += 1
    assert objects[0]["version"] == "1.0.0"
    assert [o["name"] for o in objects[1:]] == ["fwd", *(k.value for k in CollectiveKind)]
    assert objects[2]["type"] == "COMM_COLL_NODE" and objects[1]["durationMicros"] == "1250"


def test_we_read_what_chakra_generator_writes(tmp_path, et_def):
    result = subprocess.run([tool("chakra_generator"), "--num_npus", "4", "--default_comm_size", "65536",
                             "--default_runtime", "7"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for kind in CollectiveKind:  # the generator names these files after the comm_type: ALL_GATHER.{rank}.et
        graph = read_traces(tmp_path / kind.value.upper())
        assert [(n.collective, n.nbytes, n.group) for _, n in graph.collectives()] == [(kind, 65536, "world")] * 4
    dependent = read_traces(tmp_path / "two_comp_nodes_dependent")
    assert [[(n.duration_s, len(n.deps)) for n in r.nodes if isinstance(n, ComputeNode)] for r in dependent.ranks] == [
        [(7e-6, 0), (7e-6, 1)]] * 4
    assert all(len(r.nodes) == 2 for r in dependent.ranks)
    for passive in ("one_metadata_node_all_types", "one_remote_mem_load_node", "one_remote_mem_store_node"):
        assert all(r.nodes[0] == ComputeNode(r.nodes[0].id, r.nodes[0].name, 0.0)
                   for r in read_traces(tmp_path / passive).ranks)
    with pytest.raises(GraphError, match=r"BARRIER.0.et: node \d+ \(BARRIER\): comm_type BARRIER is not supported"):
        read_traces(tmp_path / "BARRIER")
    with pytest.raises(GraphError, match="COMM_SEND_NODE without attribute comm_dst"):  # it writes no peer
        read_traces(tmp_path / "one_comm_send_node")


def test_we_read_what_chakra_converter_text_writes(tmp_path, et_def):
    (tmp_path / "dp.txt").write_text("DATA\n3\n"
                                     "conv1 -1 100 NONE 0 200 NONE 0 300 ALLREDUCE 4096 10\n"
                                     "conv2 -1 50 NONE 0 60 NONE 0 70 ALLREDUCE 8192 10\n"
                                     "fc -1 5 NONE 0 6 NONE 0 7 ALLREDUCE 1024 10\n")
    result = subprocess.run([tool("chakra_converter"), "--log-filename", str(tmp_path / "log"), "Text", "--input",
                             str(tmp_path / "dp.txt"), "--output", str(tmp_path / "dp"), "--num-npus", "4",
                             "--num-passes", "2"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    graph = read_traces(tmp_path / "dp")
    assert graph.world_size == 4
    sizes = [n.nbytes for r, n in graph.collectives() if r == 0]
    assert sizes == [1024, 8192, 4096] * 2  # backward order: the last layer's gradient first, each pass
    forward = [n for n in graph.ranks[0].nodes if isinstance(n, ComputeNode) and n.name == "COMP_NODE_conv1_FWD"]
    assert [n.duration_s for n in forward] == [0.0001, 0.0001]
    assert len(forward[1].deps) == 1  # the second pass's first layer waits for its all-reduce of the first


def test_we_read_a_trace_written_with_chakras_et_def(tmp_path, et_def, protolib):
    """As ASTRA-sim's examples write traces: et_def_pb2 and protolib.encodeMessage, with a groups JSON."""
    for rank in range(4):
        with open(tmp_path / f"tp.{rank}.et", "wb") as f:
            protolib.encodeMessage(f, et_def.GlobalMetadata(version="0.0.4"))
            comp = et_def.Node(id=1, name="mlp", type=et_def.COMP_NODE, duration_micros=40)
            protolib.encodeMessage(f, comp)
            ar = et_def.Node(id=2, name="tp_ar", type=et_def.COMM_COLL_NODE, data_deps=[1])
            ar.attr.extend([et_def.AttributeProto(name="comm_type", int64_val=et_def.ALL_REDUCE),
                            et_def.AttributeProto(name="comm_size", uint64_val=1 << 20),
                            et_def.AttributeProto(name="pg_name", string_val="1" if rank < 2 else "2")])
            protolib.encodeMessage(f, ar)
            p2p = et_def.Node(id=3, name="pp", type=et_def.COMM_SEND_NODE if rank < 2 else et_def.COMM_RECV_NODE,
                              ctrl_deps=[2])
            p2p.attr.extend([et_def.AttributeProto(name="comm_src", int32_val=rank if rank < 2 else rank - 2),
                             et_def.AttributeProto(name="comm_dst", int32_val=rank + 2 if rank < 2 else rank),
                             et_def.AttributeProto(name="comm_tag", int32_val=5),
                             et_def.AttributeProto(name="comm_size", int64_val=2048)])
            protolib.encodeMessage(f, p2p)
    (tmp_path / "groups.json").write_text('{"1": [0, 1], "2": [2, 3]}')
    graph = read_traces(tmp_path / "tp", groups_file=tmp_path / "groups.json")
    assert [(r, n.group, n.nbytes) for r, n in graph.collectives()] == [
        (0, "1", 1 << 20), (1, "1", 1 << 20), (2, "2", 1 << 20), (3, "2", 1 << 20)]
    assert [type(r.nodes[2]).__name__ for r in graph.ranks] == ["SendNode", "SendNode", "RecvNode", "RecvNode"]
    assert graph.ranks[3].nodes[2].deps == (2,)


DDP_STEPS = """
import sys
import torch
import torch.distributed as dist
from torch.profiler import ExecutionTraceObserver

rank, store, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
et = ExecutionTraceObserver().register_callback(out)
x = torch.randn(8, 16)
for step in range(2):
    if step == 1:
        et.start()
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    if step == 1:
        et.stop()
et.unregister_callback()  # the trace is written
# Both ranks are done with every collective before either goes; then each leaves without running gloo's C++
# teardown, which now and then aborts a rank ("terminate called without an active exception") as its peer's
# sockets close under it: what is tested is the trace, written above.
dist.barrier()
sys.stdout.flush()
import os
os._exit(0)
"""


def test_we_read_what_chakra_converter_pytorch_writes_of_a_gloo_ddp_run(tmp_path, et_def):
    """A 2-rank gloo DDP step recorded with ExecutionTraceObserver and converted with `chakra_converter
    PyTorch`, as a user would, unlinked: every node a COMP_NODE of 0 us, chained by data_deps (gloo's
    all-reduce is no NCCL kernel, so it stays a computation)."""
    if importlib.util.find_spec("torch") is None:
        missing("torch", "torch is not installed (pip install 'gradswitch[pytorch]')")
    script = tmp_path / "ddp.py"
    script.write_text(DDP_STEPS)
    ranks = [subprocess.Popen([sys.executable, str(script), str(r), str(tmp_path / "store"),
                               str(tmp_path / f"host_et.{r}.json")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for r in range(2)]
    for p in ranks:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0, out
    for r in range(2):
        result = subprocess.run([tool("chakra_converter"), "--log-filename", str(tmp_path / "log"), "PyTorch",
                                 "--input", str(tmp_path / f"host_et.{r}.json"), "--output",
                                 str(tmp_path / f"ddp.{r}.et")], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
    graph = read_traces(tmp_path / "ddp")
    assert graph.world_size == 2 and graph.groups == ()
    for rank_graph in graph.ranks:
        nodes = rank_graph.nodes
        assert len(nodes) > 50
        assert all(isinstance(n, ComputeNode) and n.duration_s == 0 for n in nodes)
        # gloo's all-reduce stays a computation: as many as the recording holds (gloo records it from its own
        # thread, which now and then finishes after the observer stopped: then there is none on either side)
        host = json.loads((tmp_path / f"host_et.{rank_graph.rank}.json").read_text())["nodes"]
        assert "c10d::allreduce_" in {n["name"] for n in host}  # DDP did all-reduce the bucket in the recorded step
        recorded = sum(1 for n in host if n["name"] == "gloo:all_reduce")
        assert sum(1 for n in nodes if "all_reduce" in n.name) == recorded, [n.name for n in nodes]
        assert sum(1 for n in nodes if n.deps) >= len(nodes) - 2  # the converter chains (nearly) every node
