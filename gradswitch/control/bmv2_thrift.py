"""BMv2's Thrift API, for what P4Runtime on BMv2 does not offer: registers and queues.

P4Runtime register reads/writes are UNIMPLEMENTED in BMv2's PI server (p4lang/PI#376) and
queue rate/depth are not in P4Runtime at all, so this small client speaks BMv2's Thrift
services ("standard" and "simple_switch", multiplexed, binary protocol) directly with the
`thrift` library; the handful of calls below are encoded by hand from BMv2's IDL
(thrift_src/standard.thrift, targets/simple_switch/thrift/simple_switch.thrift).
Tables are never written through Thrift: mixing Thrift and P4Runtime writes on one table
corrupts the PI server's state (p4lang/tutorials#285).

Every call is bounded (docs/faults.md, "A switch that hangs"): the socket's connect and each of its sends and
receives carry a deadline, THRIFT_DEADLINE_S unless the client is given another; a switch that does not answer in
time (its process stopped, or deadlocked) is a ThriftError naming the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport import TSocket, TTransport

REGISTER_ERRORS = {1: "invalid register name", 2: "invalid index", 3: "error"}
THRIFT_DEADLINE_S = 5.0  # a Thrift socket's connect, and each send and receive of a call


class ThriftError(RuntimeError):
    """A Thrift call failed: names the switch port, the call and the reason."""


Arg = tuple[int, int, Any]  # (field id, thrift type, value)


class Bmv2Thrift:
    """Client of one switch's Thrift server (context 0)."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = THRIFT_DEADLINE_S) -> None:
        self.port = port
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(int(timeout * 1000))
        self._transport = TTransport.TBufferedTransport(sock)
        try:
            self._transport.open()
        except (TTransport.TTransportException, OSError) as e:
            raise ThriftError(f"no BMv2 Thrift server on {host}:{port}: {e}") from None
        base = TBinaryProtocol.TBinaryProtocol(self._transport)
        self._protocols = {
            name: TMultiplexedProtocol.TMultiplexedProtocol(base, name) for name in ("standard", "simple_switch")
        }
        self._seq = 0

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Bmv2Thrift:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- wire ----

    def _call(self, service: str, method: str, args: list[Arg], result_type: int | None) -> Any:
        proto = self._protocols[service]
        self._seq += 1
        try:
            proto.writeMessageBegin(method, TMessageType.CALL, self._seq)
            proto.writeStructBegin(f"{method}_args")
            for fid, ttype, value in args:
                proto.writeFieldBegin(f"f{fid}", ttype, fid)
                _write(proto, ttype, value)
                proto.writeFieldEnd()
            proto.writeFieldStop()
            proto.writeStructEnd()
            proto.writeMessageEnd()
            proto.trans.flush()
            return self._reply(proto, method, result_type)
        except (TimeoutError, TTransport.TTransportException, OSError) as e:
            raise ThriftError(f"thrift port {self.port}: {method}: {e}") from None

    def _reply(self, proto: Any, method: str, result_type: int | None) -> Any:
        _, mtype, _ = proto.readMessageBegin()
        if mtype == TMessageType.EXCEPTION:
            exc = TApplicationException()
            exc.read(proto)
            proto.readMessageEnd()
            raise ThriftError(f"thrift port {self.port}: {method}: {exc.message}")
        result: Any = None
        error_code: int | None = None
        proto.readStructBegin()
        while True:
            _, ftype, fid = proto.readFieldBegin()
            if ftype == TType.STOP:
                break
            if fid == 0 and ftype == result_type:
                result = _read(proto, ftype)
            elif fid == 1 and ftype == TType.STRUCT:
                error_code = _read_exception_code(proto)
            else:
                proto.skip(ftype)
            proto.readFieldEnd()
        proto.readStructEnd()
        proto.readMessageEnd()
        if error_code is not None:
            reason = REGISTER_ERRORS.get(error_code, f"error code {error_code}")
            raise ThriftError(f"thrift port {self.port}: {method}: {reason}")
        return result

    # ---- registers (service "standard") ----

    def register_read(self, register: str, index: int) -> int:
        args = [(1, TType.I32, 0), (2, TType.STRING, register), (3, TType.I32, index)]
        return int(self._call("standard", "bm_register_read", args, TType.I64))

    def register_read_all(self, register: str) -> list[int]:
        args = [(1, TType.I32, 0), (2, TType.STRING, register)]
        return [int(v) for v in self._call("standard", "bm_register_read_all", args, TType.LIST)]

    def register_write(self, register: str, index: int, value: int) -> None:
        args = [(1, TType.I32, 0), (2, TType.STRING, register), (3, TType.I32, index), (4, TType.I64, value)]
        self._call("standard", "bm_register_write", args, None)

    def register_write_range(self, register: str, start: int, end: int, value: int) -> None:
        """`value` into every index from start to end, both included. (BMv2's end_index is exclusive: passed
        as it is, the last index kept its value, and a NetReduce job torn down left its last cell and context
        slots behind for the next job of that number: found by bench.crossval.)"""
        args = [
            (1, TType.I32, 0), (2, TType.STRING, register), (3, TType.I32, start), (4, TType.I32, end + 1),
            (5, TType.I64, value),
        ]
        self._call("standard", "bm_register_write_range", args, None)

    def register_reset(self, register: str) -> None:
        self._call("standard", "bm_register_reset", [(1, TType.I32, 0), (2, TType.STRING, register)], None)

    # ---- ports (service "standard"): what a link taken down and up again needs ----

    def port_remove(self, port: int) -> None:
        """Stop using a port (its interface is closed: it can then go down without stopping the switch's
        receive loop, which a packet socket on an interface taken down does)."""
        self._call("standard", "bm_dev_mgr_remove_port", [(1, TType.I32, port)], None)

    def port_add(self, interface: str, port: int) -> None:
        """Use an interface as a port again (no pcap)."""
        args = [(1, TType.STRING, interface), (2, TType.I32, port), (3, TType.STRING, "")]
        self._call("standard", "bm_dev_mgr_add_port", args, None)

    # ---- queues (service "simple_switch"); rates are packets per second ----

    def set_queue_rate(self, port: int, rate_pps: int, priority: int | None = None) -> None:
        if priority is None:
            self._call("simple_switch", "set_egress_queue_rate", [(1, TType.I32, port), (2, TType.I64, rate_pps)],
                       TType.I32)
        else:
            args = [(1, TType.I32, port), (2, TType.I32, priority), (3, TType.I64, rate_pps)]
            self._call("simple_switch", "set_egress_priority_queue_rate", args, TType.I32)

    def set_queue_depth(self, port: int, depth_pkts: int, priority: int | None = None) -> None:
        if priority is None:
            self._call("simple_switch", "set_egress_queue_depth", [(1, TType.I32, port), (2, TType.I32, depth_pkts)],
                       TType.I32)
        else:
            args = [(1, TType.I32, port), (2, TType.I32, priority), (3, TType.I32, depth_pkts)]
            self._call("simple_switch", "set_egress_priority_queue_depth", args, TType.I32)

    def set_all_queue_rates(self, rate_pps: int) -> None:
        self._call("simple_switch", "set_all_egress_queue_rates", [(1, TType.I64, rate_pps)], TType.I32)

    def set_all_queue_depths(self, depth_pkts: int) -> None:
        self._call("simple_switch", "set_all_egress_queue_depths", [(1, TType.I32, depth_pkts)], TType.I32)

    def elapsed_us(self) -> int:
        """Microseconds since the switch started (a cheap liveness check)."""
        return int(self._call("simple_switch", "get_time_elapsed_us", [], TType.I64))


def _write(proto: Any, ttype: int, value: Any) -> None:
    writers: dict[int, Callable[[Any], None]] = {
        TType.I32: proto.writeI32,
        TType.I64: proto.writeI64,
        TType.STRING: proto.writeString,
    }
    writers[ttype](value)


def _read(proto: Any, ttype: int) -> Any:
    if ttype == TType.I32:
        return proto.readI32()
    if ttype == TType.I64:
        return proto.readI64()
    if ttype == TType.LIST:
        etype, size = proto.readListBegin()
        items = [_read(proto, etype) for _ in range(size)]
        proto.readListEnd()
        return items
    proto.skip(ttype)
    return None


def _read_exception_code(proto: Any) -> int:
    """The `1: i32 code` of a BMv2 Invalid*Operation exception struct."""
    code = -1
    proto.readStructBegin()
    while True:
        _, ftype, fid = proto.readFieldBegin()
        if ftype == TType.STOP:
            break
        if fid == 1 and ftype == TType.I32:
            code = proto.readI32()
        else:
            proto.skip(ftype)
        proto.readFieldEnd()
    proto.readStructEnd()
    return code
