"""One P4Runtime session with one switch: stream, arbitration, pipeline, writes, reads, packet I/O.

A gRPC channel and the P4Runtime stub (gradswitch/control/p4rt/proto.py) per switch: every switch of a
topology gets its own `SwitchSession`, with the device id and election id given explicitly.
The stream channel runs on a daemon thread that records arbitration changes (`is_primary`) and
hands packet-ins to subscribers.

Election ids (see docs/architecture.md, "Who is primary"):
- the controller of a running network connects with CONTROLLER_ELECTION_ID and is
  primary on every switch;
- `gradswitch repl --direct` (no controller running) connects with REPL_ELECTION_ID,
  lower, so a controller that starts later takes over and the REPL's writes are then
  refused with a clear NotPrimary error instead of the two fighting;
- `gradswitch shell` (p4runtime-shell) is a backup below both (SHELL_ELECTION_ID), or with
  --primary takes over above the controller (SHELL_PRIMARY_ELECTION_ID) until it exits.

Deadlines (docs/faults.md, "A switch that hangs"): no call waits unbounded on a switch that stopped answering.
Connecting (the channel ready, the arbitration answer) waits at most the session's `timeout`
(CONNECT_DEADLINE_S by default); every Read, Write and pipeline RPC carries CALL_DEADLINE_S (a unary ping,
`ping`, the heartbeat's deadline); closing waits STREAM_CLOSE_S for the stream's thread. The stream itself
lives as long as the session and has no deadline: a switch whose process is stopped keeps it open, which is
why the fabric's heartbeat (gradswitch/control/fabric.py) asks each switch every few seconds. `abandon` gives
a session up at once: its channel closed, every call in flight ended, every later call refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import text_format

from gradswitch.control.p4rt.entities import (
    CloneSession,
    Entity,
    MulticastGroup,
    TableEntry,
    decode_pre_entry,
    decode_table_entry,
    encode_entity,
    parse_int,
    to_bytes,
)
from gradswitch.control.p4rt.errors import (
    NotPrimary,
    SwitchUnavailable,
    UpdateFailure,
    WriteError,
    code_name,
    write_error_details,
)
from gradswitch.control.p4rt.p4info import P4Info
from gradswitch.control.p4rt.proto import code_pb2, p4runtime_pb2, p4runtime_pb2_grpc
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.paths import BMV2_JSON, P4INFO

log = logging.getLogger(__name__)

ElectionId = tuple[int, int]
CONTROLLER_ELECTION_ID: ElectionId = (0, 100)
REPL_ELECTION_ID: ElectionId = (0, 50)
# `gradswitch shell` (p4runtime-shell): a backup below both, or, with --primary, above the controller.
SHELL_ELECTION_ID: ElectionId = (0, 25)
SHELL_PRIMARY_ELECTION_ID: ElectionId = (0, 200)

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE
PACKET_IN_BACKLOG = 4096
CONNECT_DEADLINE_S = 10.0  # the channel ready and the arbitration answered (a session's `timeout` by default)
CALL_DEADLINE_S = 60.0  # every Read, Write, Get/SetForwardingPipelineConfig (a big batch on a loaded machine)
STREAM_CLOSE_S = 5.0  # close(): how long it waits for the stream's thread to end
_OPERATIONS: dict[int, str] = {INSERT: "insert", MODIFY: "modify", DELETE: "delete"}


@dataclass(frozen=True)
class SwitchAddress:
    """Where one BMv2 switch listens and who it is."""

    name: str
    device_id: int
    grpc_port: int
    thrift_port: int
    cpu_port: int = CONFIG.CPU_PORT
    host: str = "127.0.0.1"

    @property
    def grpc_addr(self) -> str:
        return f"{self.host}:{self.grpc_port}"


@dataclass(frozen=True)
class CounterValue:
    packets: int
    bytes: int


@dataclass(frozen=True)
class PacketIn:
    """A packet the switch sent to the controller, with its packet_in header fields."""

    switch: str
    payload: bytes
    metadata: dict[str, int]


def pipeline_cookie(device_config: bytes) -> int:
    """Cookie identifying a compiled program, so a pipeline is pushed only when it changed."""
    return int.from_bytes(hashlib.sha256(device_config).digest()[:8], "big")


class SwitchSession:
    """A P4Runtime client for one switch."""

    def __init__(
        self,
        address: SwitchAddress,
        p4info: P4Info,
        election_id: ElectionId = CONTROLLER_ELECTION_ID,
        timeout: float = CONNECT_DEADLINE_S,
    ) -> None:
        self.address = address
        self.name = address.name
        self.device_id = address.device_id
        self.election_id = election_id
        self.p4info = p4info
        self.is_primary = False
        self._timeout = timeout
        self._packet_handlers: list[Callable[[PacketIn], None]] = []
        self._closed = False
        self.abandoned: str | None = None  # given up (abandon): why; every call is refused at once
        self.stream_recv_thread: threading.Thread | None = None
        self.stream: Any = None
        self.stream_out_q: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        self.stream_in_q: dict[str, queue.Queue[Any]] = {
            k: queue.Queue() for k in ("arbitration", "digest", "idle_timeout_notification", "unknown")
        }
        # Packet-ins nobody takes are kept up to a bound, the oldest dropped first.
        self.stream_in_q["packet"] = queue.Queue(maxsize=PACKET_IN_BACKLOG)
        self.channel = grpc.insecure_channel(address.grpc_addr)
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            self.channel.close()
            raise SwitchUnavailable(
                self.name, f"no P4Runtime server at {address.grpc_addr} after {timeout:.0f} s") from None
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        try:
            self.set_up_stream()
        except BaseException:
            self.close()
            raise

    # ---- stream channel: a daemon thread that records arbitration and dispatches packet-ins ----

    def set_up_stream(self) -> None:
        def requests() -> Iterator[p4runtime_pb2.StreamMessageRequest]:
            while True:
                item = self.stream_out_q.get()
                if item is None:
                    return
                yield item

        self.stream = self.stub.StreamChannel(requests())
        self.stream_recv_thread = threading.Thread(
            target=self._receive, name=f"p4rt-stream-{self.name}", daemon=True
        )
        self.stream_recv_thread.start()
        self.handshake()

    def _receive(self) -> None:
        try:
            for msg in self.stream:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    self.is_primary = msg.arbitration.status.code == code_pb2.OK
                    self.stream_in_q["arbitration"].put(msg)
                elif kind == "packet":
                    self._dispatch_packet(msg.packet)
                elif kind == "error":
                    log.warning("switch %s: stream error: %s", self.name, msg.error)
                else:
                    self.stream_in_q.get(kind or "unknown", self.stream_in_q["unknown"]).put(msg)
        except grpc.RpcError as e:
            if not self._closed:
                log.warning("switch %s: stream closed: %s", self.name, e.details() if hasattr(e, "details") else e)
        finally:
            for q in self.stream_in_q.values():
                with contextlib.suppress(queue.Full):
                    q.put_nowait(None)

    def get_stream_packet(self, kind: str, timeout: float) -> Any | None:
        """The next stream message of a kind (arbitration, digest, ...), None after timeout or once closed."""
        try:
            return self.stream_in_q[kind].get(timeout=timeout)
        except queue.Empty:
            return None

    def handshake(self) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = self.election_id[0]
        req.arbitration.election_id.low = self.election_id[1]
        self.stream_out_q.put(req)
        rep = self.get_stream_packet("arbitration", timeout=self._timeout)
        if rep is None:
            raise SwitchUnavailable(
                self.name,
                f"no arbitration answer from device {self.device_id} at {self.address.grpc_addr} "
                "(wrong --device-id, or the election id is already taken)",
            )
        self.is_primary = rep.arbitration.status.code == code_pb2.OK
        log.debug("switch %s: session up, %s", self.name, "primary" if self.is_primary else "backup")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stream_out_q.put(None)
        if self.stream is not None:
            self.stream.cancel()
        if self.stream_recv_thread is not None and self.stream_recv_thread is not threading.current_thread():
            self.stream_recv_thread.join(timeout=STREAM_CLOSE_S)
        self.channel.close()

    def abandon(self, why: str) -> None:
        """Give the switch up now (it stopped answering): the channel closed, which ends every call in flight on
        it (each raises SwitchUnavailable naming `why`), and every later call refused at once."""
        self.abandoned = why
        self.close()

    def _check(self) -> None:
        if self.abandoned is not None:
            raise SwitchUnavailable(self.name, self.abandoned)

    def ping(self, deadline_s: float) -> Any:
        """A cheap unary read (the pipeline's cookie) with its deadline, as a future (the heartbeat's probe):
        its result() raises grpc.RpcError (DEADLINE_EXCEEDED: no answer in deadline_s)."""
        self._check()
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.response_type = p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY
        return self.stub.GetForwardingPipelineConfig.future(req, timeout=deadline_s)

    def __enter__(self) -> SwitchSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- pipeline ----

    def installed_cookie(self) -> int | None:
        """Cookie of the pipeline on the switch, None when it has none."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.response_type = p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY
        self._check()
        try:
            rep = self.stub.GetForwardingPipelineConfig(req, timeout=self._timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.FAILED_PRECONDITION:  # no pipeline yet
                return None
            self._check()
            raise SwitchUnavailable(self.name, f"GetForwardingPipelineConfig: {e.details()}") from None
        return int(rep.config.cookie.cookie) if rep.config.HasField("cookie") else None

    def push_pipeline(self, p4info_path: Path = P4INFO, json_path: Path = BMV2_JSON, force: bool = False) -> bool:
        """SetForwardingPipelineConfig from the compiled artifacts; False when already installed."""
        device_config = json_path.read_bytes()
        cookie = pipeline_cookie(device_config)
        if not force and self.installed_cookie() == cookie:
            return False
        self._require_primary("set the pipeline")
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.election_id.high = self.election_id[0]
        req.election_id.low = self.election_id[1]
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        text_format.Merge(p4info_path.read_text(), req.config.p4info)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        self._check()
        try:
            self.stub.SetForwardingPipelineConfig(req, timeout=CALL_DEADLINE_S)
        except grpc.RpcError as e:
            self._check()
            raise WriteError(
                self.name, "SetForwardingPipelineConfig", [UpdateFailure(0, json_path.name, e.code().name, e.details())]
            ) from None
        return True

    # ---- writes ----

    def _require_primary(self, what: str) -> None:
        if not self.is_primary:
            raise NotPrimary(
                self.name,
                f"cannot {what}: another client is primary (election id above {self.election_id}); "
                "send writes through the running controller (gradswitch repl attaches to it)",
            )

    def write(self, updates: Sequence[tuple[int, Entity]]) -> None:
        """Write a batch of (INSERT|MODIFY|DELETE, entity); WriteError lists each refused one."""
        if not updates:
            return
        self._check()
        self._require_primary("write")
        req = p4runtime_pb2.WriteRequest()
        for op, entity in updates:
            upd = req.updates.add()
            upd.type = p4runtime_pb2.Update.Type.ValueType(op)
            upd.entity.CopyFrom(encode_entity(self.p4info, entity, key_only=op == DELETE))
        self._send(req, "/".join(sorted({_OPERATIONS[op] for op, _ in updates})), [e.describe() for _, e in updates])

    def _send(self, req: p4runtime_pb2.WriteRequest, operation: str, described: list[str]) -> None:
        """Send a WriteRequest whose updates `described` names, as the primary client."""
        req.device_id = self.device_id
        req.election_id.high = self.election_id[0]
        req.election_id.low = self.election_id[1]
        self._check()
        try:
            self.stub.Write(req, timeout=CALL_DEADLINE_S)
        except grpc.RpcError as e:
            self._check()  # abandoned meanwhile: the switch is named, not a write's failure
            if e.code() == grpc.StatusCode.PERMISSION_DENIED:
                self.is_primary = False
                raise NotPrimary(self.name, f"{operation} refused: {e.details()}") from None
            details = write_error_details(e) if e.code() == grpc.StatusCode.UNKNOWN else []
            failures = [UpdateFailure(i, described[i], code_name(code), message)
                        for i, code, message in details if i < len(described)]
            if not failures:
                failures = [UpdateFailure(0, f"{len(described)} update(s)", e.code().name, e.details() or "")]
            raise WriteError(self.name, operation, failures) from None

    def clear_counter(self, counter: str, indices: Iterable[int]) -> None:
        """Set indexed counter cells back to zero (packets and bytes)."""
        self._check()
        self._require_primary("write")
        info = self.p4info.counter(counter)
        req = p4runtime_pb2.WriteRequest()
        described = []
        for index in indices:
            upd = req.updates.add()
            upd.type = MODIFY
            upd.entity.counter_entry.counter_id = info.preamble.id
            upd.entity.counter_entry.index.index = index
            upd.entity.counter_entry.data.packet_count = 0
            upd.entity.counter_entry.data.byte_count = 0
            described.append(f"{info.preamble.name}[{index}]")
        if described:
            self._send(req, "MODIFY", described)

    def insert(self, entities: Iterable[Entity]) -> None:
        self.write([(INSERT, e) for e in entities])

    def modify(self, entities: Iterable[Entity]) -> None:
        self.write([(MODIFY, e) for e in entities])

    def delete(self, entities: Iterable[Entity]) -> None:
        self.write([(DELETE, e) for e in entities])

    # ---- reads ----

    def _read(self, entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest()
        req.device_id = self.device_id
        req.entities.add().CopyFrom(entity)
        self._check()
        try:
            return [e for rep in self.stub.Read(req, timeout=CALL_DEADLINE_S) for e in rep.entities]
        except grpc.RpcError as e:
            self._check()
            raise SwitchUnavailable(self.name, f"read failed: {e.code().name}: {e.details()}") from None

    def read_table(self, table: str) -> list[TableEntry]:
        """Every entry of a table (the default entry is not included)."""
        entity = p4runtime_pb2.Entity()
        entity.table_entry.table_id = self.p4info.table(table).preamble.id
        return [decode_table_entry(self.p4info, e.table_entry) for e in self._read(entity)]

    def read_multicast_group(self, group_id: int) -> MulticastGroup | None:
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = group_id
        for e in self._read(entity):
            pre = decode_pre_entry(e.packet_replication_engine_entry)
            if isinstance(pre, MulticastGroup):
                return pre
        return None

    def read_clone_session(self, session_id: int) -> CloneSession | None:
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.clone_session_entry.session_id = session_id
        for e in self._read(entity):
            pre = decode_pre_entry(e.packet_replication_engine_entry)
            if isinstance(pre, CloneSession):
                return pre
        return None

    def read_counter(self, counter: str, index: int | None = None) -> dict[int, CounterValue]:
        """Indexed counter cells: every cell, or one when index is given."""
        info = self.p4info.counter(counter)
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = info.preamble.id
        if index is not None:
            if not 0 <= index < info.size:
                raise IndexError(f"{info.preamble.name} has {info.size} cells, no index {index}")
            entity.counter_entry.index.index = index
        cells = (e.counter_entry for e in self._read(entity))
        return {c.index.index: CounterValue(c.data.packet_count, c.data.byte_count) for c in cells}

    # ---- packet I/O ----

    def send_packet_out(self, payload: bytes, **metadata: int | str) -> None:
        """Inject a packet; metadata names the packet_out header fields (e.g. egress_port=1)."""
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.payload = payload
        fields = {f.name: f for f in self.p4info.packet_metadata("packet_out")}
        for name, value in metadata.items():
            if name not in fields:
                raise KeyError(f"packet_out has no field {name!r} (has {sorted(fields)})")
            md = req.packet.metadata.add()
            md.metadata_id = fields[name].id
            md.value = to_bytes(parse_int(value, fields[name].bitwidth, f"packet_out.{name}"), fields[name].bitwidth)
        for name, info in fields.items():  # padding fields the caller need not give
            if name not in metadata:
                md = req.packet.metadata.add()
                md.metadata_id = info.id
                md.value = b"\x00"
        self.stream_out_q.put(req)

    def on_packet_in(self, handler: Callable[[PacketIn], None]) -> None:
        """Call handler (on the stream thread) for every packet-in from now on."""
        self._packet_handlers.append(handler)

    def _dispatch_packet(self, packet: p4runtime_pb2.PacketIn) -> None:
        names = {f.id: f.name for f in self.p4info.packet_metadata("packet_in")}
        pin = PacketIn(
            self.name,
            bytes(packet.payload),
            {names.get(m.metadata_id, str(m.metadata_id)): int.from_bytes(m.value, "big") for m in packet.metadata},
        )
        backlog = self.stream_in_q["packet"]
        while True:
            try:
                backlog.put_nowait(pin)
                break
            except queue.Full:
                with contextlib.suppress(queue.Empty):
                    backlog.get_nowait()
        for handler in list(self._packet_handlers):
            try:
                handler(pin)
            except Exception:  # a handler's bug must not kill the stream
                log.exception("switch %s: packet-in handler failed", self.name)

    def next_packet_in(self, timeout: float) -> PacketIn | None:
        """The next packet-in not yet taken, waiting at most timeout seconds."""
        try:
            item = self.stream_in_q["packet"].get(timeout=timeout)
        except queue.Empty:
            return None
        return item if isinstance(item, PacketIn) else None
