"""The control plane and a switch that stops answering (docs/faults.md, "A switch that hangs"),
against an in-process P4Runtime server that can be made to hang (its handlers block, its connections stay open,
as a BMv2 stopped by SIGSTOP does): the heartbeat names it hung within its bound, a call in flight to it ends at
once, every later call is refused at once, a Thrift call to a server that never answers ends at its deadline. The
same on BMv2: tests/mininet/test_switch_hang.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from gradswitch.control.bmv2_thrift import THRIFT_DEADLINE_S, Bmv2Thrift, ThriftError
from gradswitch.control.controls import all_base_entries
from gradswitch.control.fabric import Fabric
from gradswitch.control.health import HealthEvent, HealthKind
from gradswitch.control.p4rt import P4Info, SwitchAddress, SwitchUnavailable, TableEntry
from gradswitch.control.p4rt.proto import code_pb2, p4runtime_pb2, p4runtime_pb2_grpc
from gradswitch.control.p4rt.session import CALL_DEADLINE_S, DELETE, INSERT, SwitchSession
from gradswitch.protocol.heartbeat import (
    HEARTBEAT_DEADLINE_S,
    HEARTBEAT_INTERVAL_S,
    HEARTBEAT_MISSES,
    HUNG_DETECT_BOUND_S,
)
from gradswitch.protocol.paths import P4INFO
from gradswitch.topology.generators import leafspine

P4 = P4Info.from_file(P4INFO)
TOPO = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
ENTRY = next(e for e in all_base_entries(TOPO, "spine1") if isinstance(e, TableEntry))


class HangingSwitch(p4runtime_pb2_grpc.P4RuntimeServicer):
    """A P4Runtime server that answers (arbitration: primary; reads: nothing; writes: accepted) until `hang` is set,
    then answers nothing more, its streams and connections open, until it is cleared."""

    def __init__(self) -> None:
        self.hang = threading.Event()
        self.calls = 0

    def _block(self, context: Any) -> None:
        self.calls += 1
        while self.hang.is_set() and context.is_active():
            time.sleep(0.005)

    def StreamChannel(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        for req in requests:
            if req.HasField("arbitration"):
                rep = p4runtime_pb2.StreamMessageResponse()
                rep.arbitration.CopyFrom(req.arbitration)
                rep.arbitration.status.code = code_pb2.OK
                yield rep

    def GetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        self._block(context)
        return p4runtime_pb2.GetForwardingPipelineConfigResponse()

    def Read(self, request: Any, context: Any) -> Iterator[Any]:
        self._block(context)
        yield p4runtime_pb2.ReadResponse()

    def Write(self, request: Any, context: Any) -> Any:
        self._block(context)
        return p4runtime_pb2.WriteResponse()

    def SetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        self._block(context)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def Capabilities(self, request: Any, context: Any) -> Any:
        return p4runtime_pb2.CapabilitiesResponse()


@pytest.fixture
def switch() -> Iterator[tuple[HangingSwitch, SwitchAddress]]:
    servicer = HangingSwitch()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, SwitchAddress("spine1", 3, port, 1)
    servicer.hang.clear()
    server.stop(grace=None)


def test_the_heartbeat_s_bound_is_its_interval_and_its_deadlines_in_a_row() -> None:
    assert HUNG_DETECT_BOUND_S == HEARTBEAT_INTERVAL_S + HEARTBEAT_MISSES * HEARTBEAT_DEADLINE_S == 5.0
    assert HEARTBEAT_MISSES >= 2  # one late answer on a loaded machine never names a switch hung


def test_a_call_in_flight_to_a_hung_switch_ends_when_the_session_is_abandoned_and_later_ones_at_once(
        switch: tuple[HangingSwitch, SwitchAddress]) -> None:
    servicer, address = switch
    session = SwitchSession(address, P4, timeout=5.0)
    assert session.is_primary and session.read_table(P4.table_names()[0]) == []
    servicer.hang.set()
    failed: list[BaseException] = []
    started = time.monotonic()

    def read() -> None:
        try:
            session.read_table(P4.table_names()[0])
        except BaseException as e:
            failed.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    assert reader.is_alive() and not failed  # waiting on the hung switch (its deadline: CALL_DEADLINE_S)
    session.abandon("hung: no answer to 2 heartbeats in a row")
    reader.join(timeout=5)
    took = time.monotonic() - started
    assert not reader.is_alive() and took < 2.0 < CALL_DEADLINE_S
    (error,) = failed
    assert isinstance(error, SwitchUnavailable) and "hung" in str(error)
    asked = time.monotonic()
    with pytest.raises(SwitchUnavailable, match="spine1: hung"):
        session.write([(INSERT, ENTRY)])
    assert time.monotonic() - asked < 0.1


def test_the_heartbeat_names_a_hung_switch_within_its_bound_and_the_fabric_refuses_calls_to_it(
        switch: tuple[HangingSwitch, SwitchAddress]) -> None:
    servicer, address = switch
    fabric = Fabric(TOPO, {"spine1": address}, p4info=P4)
    events: list[HealthEvent] = []
    fabric.health.subscribe(events.append)
    fabric.connect(timeout=5.0)
    interval, deadline, misses = 0.1, 0.3, 2
    try:
        fabric.watch_heartbeat(interval, deadline, misses)
        time.sleep(5 * interval)  # answering: never named hung
        assert events == [] and fabric.is_up("spine1") and servicer.calls >= 3
        hung_at = time.monotonic()
        servicer.hang.set()
        deadline_at = hung_at + interval + misses * deadline + 1.0  # the bound, and the loaded machine's second
        while not any(e.kind == HealthKind.SWITCH_HUNG for e in events) and time.monotonic() < deadline_at:
            time.sleep(0.01)
        named = [e for e in events if e.kind == HealthKind.SWITCH_HUNG]
        assert named, f"not named hung within {deadline_at - hung_at:.1f} s"
        (event,) = named
        assert event.target == "spine1" and "no answer to 2 heartbeats in a row" in event.detail
        # From below: a heartbeat already on its way when the servicer hung is the first one missed, its deadline
        # counted from its sending, up to one interval before hung_at (seen once: 0.588 s for 0.6).
        assert misses * deadline - interval <= event.at - hung_at <= interval + misses * deadline + 1.0
        assert [e.kind for e in events] == [HealthKind.SWITCH_HUNG, HealthKind.REROUTED]
        assert not fabric.is_up("spine1") and fabric.switch_names() == []
        entry = ENTRY
        asked = time.monotonic()
        with pytest.raises(SwitchUnavailable, match="hung"):
            fabric.read_entries("spine1", P4.table_names()[0])
        with pytest.raises(SwitchUnavailable, match="let go on"):
            fabric.insert("spine1", [entry])
        fabric.session("spine1").write([(DELETE, entry)])  # a delete is only recorded, as for a dead switch
        assert time.monotonic() - asked < 0.5
        assert fabric.heartbeat_round(deadline, misses) == []  # an abandoned switch is asked no more
    finally:
        fabric.close()


def test_a_thrift_call_to_a_switch_that_never_answers_ends_at_its_deadline() -> None:
    assert THRIFT_DEADLINE_S == 5.0
    with socket.socket() as listener:  # accepts (the kernel does, for a stopped process too), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ThriftError, match=f"thrift port {port}: bm_register_read"), \
                Bmv2Thrift(port, timeout=0.3) as thrift:
            thrift.register_read("r", 0)
        assert 0.3 <= time.monotonic() - started < 2.0
