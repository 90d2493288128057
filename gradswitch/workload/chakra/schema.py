"""MLCommons Chakra's execution-trace messages, defined here with protobuf's descriptor API.

The messages, field numbers, types and enum values are those of Chakra's `et_def.proto`
(package ChakraProtoMsg, mlc-chakra 1.0.0), so what this module writes Chakra's own tools read
and the other way round; tests/unit/test_chakra_interop.py compares every field and value with
the real package's `et_def_pb2` when it is installed. Only protobuf is needed: a user reads and
writes traces without installing mlc-chakra (and its HolisticTraceAnalysis, jupyterlab, pandas).

The classes live in a descriptor pool of their own, so they do not collide with mlc-chakra's
generated module when both are imported in one process.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "ChakraProtoMsg"
F = descriptor_pb2.FieldDescriptorProto

# AttributeProto's `value` oneof: (name, number, scalar type or the list message it holds)
_SCALARS: tuple[tuple[str, int], ...] = (
    ("double", F.TYPE_DOUBLE), ("float", F.TYPE_FLOAT), ("int32", F.TYPE_INT32), ("int64", F.TYPE_INT64),
    ("uint32", F.TYPE_UINT32), ("uint64", F.TYPE_UINT64), ("sint32", F.TYPE_SINT32), ("sint64", F.TYPE_SINT64),
    ("fixed32", F.TYPE_FIXED32), ("fixed64", F.TYPE_FIXED64), ("sfixed32", F.TYPE_SFIXED32),
    ("sfixed64", F.TYPE_SFIXED64), ("bool", F.TYPE_BOOL), ("string", F.TYPE_STRING), ("bytes", F.TYPE_BYTES),
)
LIST_MESSAGES = {name: name.capitalize() + "List" for name, _ in _SCALARS}  # int64 -> Int64List
LIST_MESSAGES["uint32"], LIST_MESSAGES["uint64"] = "Uint32List", "Uint64List"
LIST_MESSAGES["sint32"], LIST_MESSAGES["sint64"] = "Sint32List", "Sint64List"
LIST_MESSAGES["sfixed32"], LIST_MESSAGES["sfixed64"] = "Sfixed32List", "Sfixed64List"

NODE_TYPES = {"INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3, "COMP_NODE": 4,
              "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7}
COLLECTIVE_COMM_TYPES = {"ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4, "BROADCAST": 5,
                         "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7, "REDUCE_SCATTER_BLOCK": 8, "BARRIER": 9}


def _field(msg: descriptor_pb2.DescriptorProto, name: str, number: int, ftype: int, *, repeated: bool = False,
           type_name: str = "", oneof: int | None = None) -> None:
    f = msg.field.add(name=name, number=number, type=ftype,
                      label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        f.type_name = f".{PACKAGE}.{type_name}"
    if oneof is not None:
        f.oneof_index = oneof


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """et_def.proto as a FileDescriptorProto."""
    fd = descriptor_pb2.FileDescriptorProto(name="gradswitch/chakra_et_def.proto", package=PACKAGE, syntax="proto3")

    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, F.TYPE_STRING)
    _field(attr, "doc_string", 2, F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, (name, ftype) in enumerate(_SCALARS):
        _field(attr, f"{name}_val", 3 + 2 * i, ftype, oneof=0)
        _field(attr, f"{name}_list", 4 + 2 * i, F.TYPE_MESSAGE, type_name=LIST_MESSAGES[name], oneof=0)
    for name, ftype in _SCALARS:
        _field(fd.message_type.add(name=LIST_MESSAGES[name]), "values", 1, ftype, repeated=True)

    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, F.TYPE_STRING)
    _field(meta, "attr", 2, F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")

    for enum_name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVE_COMM_TYPES)):
        enum = fd.enum_type.add(name=enum_name)
        for value_name, number in values.items():
            enum.value.add(name=value_name, number=number)

    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, F.TYPE_UINT64)
    _field(node, "name", 2, F.TYPE_STRING)
    _field(node, "type", 3, F.TYPE_ENUM, type_name="NodeType")
    _field(node, "ctrl_deps", 4, F.TYPE_UINT64, repeated=True)
    _field(node, "data_deps", 5, F.TYPE_UINT64, repeated=True)
    _field(node, "start_time_micros", 6, F.TYPE_UINT64)
    _field(node, "duration_micros", 7, F.TYPE_UINT64)
    _field(node, "inputs", 8, F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "outputs", 9, F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "attr", 10, F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")

    io = fd.message_type.add(name="IOInfo")
    for i, name in enumerate(("values", "shapes", "types")):
        _field(io, name, 1 + i, F.TYPE_STRING)

    tensor = fd.message_type.add(name="Tensor")
    for i, name in enumerate(("tensor_id", "storage_id", "offset", "num_elem", "elem_bytes")):
        _field(tensor, name, 1 + i, F.TYPE_UINT64)
    _field(tensor, "device", 6, F.TYPE_STRING)
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(file_descriptor())


def message_class(name: str) -> Any:
    """The class of one message of the schema (Node, GlobalMetadata, AttributeProto, IOInfo, Int64List, ...)."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


Node: Any = message_class("Node")
GlobalMetadata: Any = message_class("GlobalMetadata")
AttributeProto: Any = message_class("AttributeProto")
IOInfo: Any = message_class("IOInfo")
