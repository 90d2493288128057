"""An in-process P4Runtime gRPC server that records every request, for exact-protobuf unit tests.

Like p4runtime-shell's and finsy's own tests: a real grpc server with a stub servicer, so the client's
requests are checked as the protobufs that actually went over the wire. It answers
arbitration (primary for the highest election id), accepts writes (or fails them with a
chosen per-update error), serves canned read responses and packet-ins. It is never the
proof that a feature works on a switch: tests/bmv2 does that against simple_switch_grpc.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import any_pb2

from gradswitch.control.p4rt.proto import code_pb2, p4runtime_pb2, p4runtime_pb2_grpc, status_pb2


class FakeP4Runtime(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        self.writes: list[Any] = []
        self.reads: list[Any] = []
        self.pipelines: list[Any] = []
        self.stream_requests: list[Any] = []
        self.read_responses: list[Any] = []
        self.write_errors: dict[int, tuple[int, str]] = {}  # update index -> (code, message)
        self.cookie: int | None = None
        self._streams: list[queue.Queue[Any]] = []  # one outbound queue per open stream
        self._best_election: tuple[int, int] = (0, 0)
        self.lock = threading.Lock()

    # ---- RPCs ----

    def Write(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.writes.append(request)
        if self.write_errors:
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="write failed")
            for i in range(len(request.updates)):
                code, message = self.write_errors.get(i, (code_pb2.OK, ""))
                detail = any_pb2.Any()
                detail.Pack(p4runtime_pb2.Error(canonical_code=code, message=message))
                status.details.append(detail)
            context.abort_with_status(_rpc_status(status))
        return p4runtime_pb2.WriteResponse()

    def Read(self, request: Any, context: Any) -> Iterator[Any]:
        with self.lock:
            self.reads.append(request)
        yield from self.read_responses

    def SetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.pipelines.append(request)
            self.cookie = request.config.cookie.cookie
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        if self.cookie is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set")
        rep = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        rep.config.cookie.cookie = self.cookie or 0
        return rep

    def Capabilities(self, request: Any, context: Any) -> Any:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version="1.4.1")

    def StreamChannel(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        outbound: queue.Queue[Any] = queue.Queue()
        with self.lock:
            self._streams.append(outbound)

        def consume() -> None:
            try:
                for req in request_iterator:
                    with self.lock:
                        self.stream_requests.append(req)
                    if req.HasField("arbitration"):
                        eid = (req.arbitration.election_id.high, req.arbitration.election_id.low)
                        self._best_election = max(self._best_election, eid)
                        rep = p4runtime_pb2.StreamMessageResponse()
                        rep.arbitration.CopyFrom(req.arbitration)
                        primary = eid >= self._best_election
                        rep.arbitration.status.code = code_pb2.OK if primary else code_pb2.ALREADY_EXISTS
                        outbound.put(rep)
            except grpc.RpcError:  # the client went away
                pass
            outbound.put(None)

        threading.Thread(target=consume, daemon=True).start()
        try:
            while True:
                item = outbound.get()
                if item is None:
                    return
                yield item
        finally:
            with self.lock:
                self._streams.remove(outbound)

    # ---- test helpers ----

    def send_packet_in(self, payload: bytes, metadata: dict[int, bytes]) -> None:
        rep = p4runtime_pb2.StreamMessageResponse()
        rep.packet.payload = payload
        for mid, value in metadata.items():
            md = rep.packet.metadata.add()
            md.metadata_id = mid
            md.value = value
        with self.lock:
            for stream in self._streams:
                stream.put(rep)

    def packet_outs(self) -> list[Any]:
        with self.lock:
            return [r.packet for r in self.stream_requests if r.HasField("packet")]


class _RpcStatus(grpc.Status):  # type: ignore[misc]
    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: Any) -> None:
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


def _rpc_status(status: Any) -> Any:
    details = (("grpc-status-details-bin", status.SerializeToString()),)
    return _RpcStatus(grpc.StatusCode.UNKNOWN, status.message, details)


class FakeServer:
    """Runs a FakeP4Runtime on a free loopback port."""

    def __init__(self, device_id: int = 0) -> None:
        self.servicer = FakeP4Runtime(device_id)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def __enter__(self) -> FakeServer:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(grace=0)
