"""A hung switch let go on goes through what it was sent while stopped before the controller takes it back
(gradswitch/control/drain.py), against an in-process P4Runtime server that behaves as BMv2 does there: one input
queue of bounded size, taken in order, for its ports' packets and the controller's packet-outs (a packet that finds
it full is dropped); its ports' reader moves what the kernel's rings hold into that queue a slice at a time as soon
as it goes on; its pipeline counts each port packet it takes (the rx counter) and sends a packet-out to its CPU port
back as a packet-in. The same on BMv2: tests/mininet/test_switch_hang.py (the spine let
go on, and the NetReduce run whose aggregation spine is let go on)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from gradswitch.control.controls.port_counters import PORT_RX
from gradswitch.control.drain import PROBE_WAIT_S, drain, probe_frame
from gradswitch.control.p4rt import P4Info, SwitchAddress
from gradswitch.control.p4rt.proto import code_pb2, p4runtime_pb2, p4runtime_pb2_grpc
from gradswitch.control.p4rt.session import SwitchSession
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.paths import P4INFO

P4 = P4Info.from_file(P4INFO)
PER_PACKET_S = 0.0005  # the pipeline's time for one packet
SLICE = 16  # port packets the reader moves from the kernel's rings into the input queue at a time
INPUT_QUEUE = 256  # packets the input queue holds


@dataclass
class BacklogSwitch(p4runtime_pb2_grpc.P4RuntimeServicer):
    """`ring`: port packets the kernel holds for the switch (`endless`: more keep coming); `rx`: the port packets
    its pipeline took, `dropped`: those that found the input queue full."""

    ring: int = 0
    endless: bool = False
    rx: int = 0
    dropped: int = 0
    # None: a port packet; bytes: a packet-out
    inputs: queue.Queue[bytes | None] = field(default_factory=lambda: queue.Queue(INPUT_QUEUE))
    out: queue.Queue[p4runtime_pb2.StreamMessageResponse] = field(default_factory=queue.Queue)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        threading.Thread(target=self._kernel, daemon=True).start()
        threading.Thread(target=self._pipeline, daemon=True).start()

    def _put(self, item: bytes | None) -> bool:
        try:
            self.inputs.put_nowait(item)
            return True
        except queue.Full:
            return False

    def _kernel(self) -> None:
        while not self.stop.wait(0.0002):
            moved = SLICE if self.endless else min(SLICE, self.ring)
            self.ring -= moved
            self.dropped += sum(1 for _ in range(moved) if not self._put(None))

    def _pipeline(self) -> None:
        port_out = {f.id for f in P4.packet_metadata("packet_out") if f.name == "egress_port"}
        while not self.stop.is_set():
            try:
                item = self.inputs.get(timeout=0.05)
            except queue.Empty:
                continue
            time.sleep(PER_PACKET_S)
            if item is None:
                self.rx += 1
                continue
            request = p4runtime_pb2.PacketOut.FromString(item)
            port = next(int.from_bytes(m.value, "big") for m in request.metadata if m.metadata_id in port_out)
            if port == CONFIG.CPU_PORT:
                reply = p4runtime_pb2.StreamMessageResponse()
                reply.packet.payload = request.payload
                self.out.put(reply)

    def StreamChannel(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        def take() -> None:
            try:
                for req in requests:
                    if req.HasField("arbitration"):
                        rep = p4runtime_pb2.StreamMessageResponse()
                        rep.arbitration.CopyFrom(req.arbitration)
                        rep.arbitration.status.code = code_pb2.OK
                        self.out.put(rep)
                    elif req.HasField("packet"):
                        self._put(req.packet.SerializeToString())  # behind every packet queued before it
            except grpc.RpcError:  # (the session closed)
                return

        threading.Thread(target=take, daemon=True).start()
        while context.is_active() and not self.stop.is_set():
            try:
                yield self.out.get(timeout=0.05)
            except queue.Empty:
                continue

    def Read(self, request: Any, context: Any) -> Iterator[Any]:
        reply = p4runtime_pb2.ReadResponse()
        for asked in request.entities:
            if asked.counter_entry.counter_id == P4.counter(PORT_RX).preamble.id:
                cell = reply.entities.add().counter_entry
                cell.counter_id = asked.counter_entry.counter_id
                cell.index.index = 1
                cell.data.packet_count = self.rx
        yield reply

    def Write(self, request: Any, context: Any) -> Any:
        return p4runtime_pb2.WriteResponse()

    def GetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        return p4runtime_pb2.GetForwardingPipelineConfigResponse()

    def SetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def Capabilities(self, request: Any, context: Any) -> Any:
        return p4runtime_pb2.CapabilitiesResponse()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[tuple[grpc.Server, BacklogSwitch]] = []

    def start(switch: BacklogSwitch) -> SwitchSession:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(switch, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append((server, switch))
        session = SwitchSession(SwitchAddress("spine1", 3, port, 1), P4, timeout=5.0)
        switch.run()
        return session

    yield start
    for server, switch in servers:
        switch.stop.set()
        server.stop(grace=None)


def test_a_drain_ends_only_once_the_switch_went_through_every_packet_it_was_sent(serve: Any) -> None:
    """More than its input queue holds: a probe that came back says only that what was queued before it went
    through (some of its probes are dropped, the queue full); the drain ends on a probe's round trip with no packet
    in, every packet taken (or dropped for a full queue) by then."""
    held = 1500
    switch = BacklogSwitch(ring=held)
    session = serve(switch)
    drained = drain(session)
    print(drained, switch.rx, switch.dropped)
    assert drained.quiet and switch.ring == 0 and switch.rx + switch.dropped == held and drained.counted == switch.rx
    assert switch.rx >= INPUT_QUEUE and drained.probes >= 2 and drained.packets <= switch.rx
    assert drained.describe().startswith(f"{drained.packets} packets it held gone through first")


def test_a_switch_that_is_always_sent_packets_is_drained_until_the_limit(serve: Any) -> None:
    switch = BacklogSwitch(endless=True)
    session = serve(switch)
    started = time.monotonic()
    drained = drain(session, limit_s=0.5)
    took = time.monotonic() - started
    assert not drained.quiet and drained.packets > 0 and 0.5 <= took <= 0.5 + PROBE_WAIT_S + 0.5
    assert "not quiet" in drained.describe()


def test_a_probe_is_a_frame_naming_its_drain_and_its_number() -> None:
    a, b = probe_frame(1, b"12345678"), probe_frame(2, b"12345678")
    assert a != b and a[12:14] == (0x88B5).to_bytes(2, "big") and b"12345678" in a
