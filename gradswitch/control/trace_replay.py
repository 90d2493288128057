"""Trace replay: packets from pcap files through a real simple_switch_grpc, outputs back as pcaps.

The switch runs with `--use-files`: port N reads `pN_in.pcap` and writes `pN_out.pcap`.
The input files are FIFOs, so the switch blocks on them until this harness has pushed the
pipeline and installed the entries (over P4Runtime, exactly as the controller does) and
only then feeds the packets: no timing guess anywhere. Completion is polled: every
input packet counted by the switch's port_rx counter and the expected number of packets
written, then the switch is stopped and its output files read whole.
"""

from __future__ import annotations

import contextlib
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gradswitch.control.controls import port_counters
from gradswitch.control.p4rt import Entity, P4Info, SwitchAddress, SwitchSession
from gradswitch.control.pcap import GLOBAL_HEADER, PcapTail, read_pcap, record
from gradswitch.net.bmv2 import Bmv2Config, Bmv2Process, default_executable
from gradswitch.net.local_ports import free_ports
from gradswitch.protocol.paths import BMV2_JSON, P4INFO
from gradswitch.protocol.polling import wait_until


@dataclass
class ReplayResult:
    outputs: dict[int, list[bytes]]  # port -> packets written, in order
    drops: dict[str, int]  # drop reason -> packets
    packet_ins: list[tuple[dict[str, int], bytes]] = field(default_factory=list)
    counters: dict[str, dict[int, int]] = field(default_factory=dict)  # counter -> index -> packets

    def out(self, port: int) -> list[bytes]:
        return self.outputs.get(port, [])


class _FifoWriter(threading.Thread):
    """Opens one input FIFO (blocking until the switch opens it), writes the pcap header,
    then the pcap records it is handed, a chunk at a time (one write each), then closes it
    (EOF for the switch)."""

    def __init__(self, path: Path) -> None:
        super().__init__(name=f"pcap-{path.name}", daemon=True)
        self.path = path
        self.chunks: queue.Queue[Iterable[bytes] | None] = queue.Queue()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.path.open("wb", buffering=0) as f:
                f.write(GLOBAL_HEADER)
                for chunk in self.chunks.get() or []:
                    f.write(chunk)
        except BaseException as e:  # reported by TraceSwitch
            self.error = e


class TraceSwitch:
    """One BMv2 switch fed from pcaps, programmed over P4Runtime."""

    def __init__(self, ports: Sequence[int], run_dir: Path | None = None, log_level: str = "info",
                 grpc_port: int | None = None, thrift_port: int | None = None,
                 executable: str | None = None, launcher: tuple[str, ...] = (), timeout: float = 30.0) -> None:
        # Free ports by default: a replay needs no known address, and so never meets a network's switches.
        chosen = iter(free_ports(int(not grpc_port) + int(not thrift_port)))
        grpc_port = grpc_port or next(chosen)
        thrift_port = thrift_port or next(chosen)
        self.ports = sorted(ports)
        self._tmp = None if run_dir is not None else tempfile.TemporaryDirectory(prefix="gradswitch-trace-")
        self.run_dir = run_dir if run_dir is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.address = SwitchAddress("trace", 0, grpc_port, thrift_port)
        self.process = Bmv2Process(Bmv2Config(
            name="trace", device_id=0, grpc_port=grpc_port, thrift_port=thrift_port,
            ports={p: str(self.run_dir / f"p{p}") for p in self.ports}, run_dir=self.run_dir,
            log_level=log_level, use_files=True, executable=executable or default_executable(), launcher=launcher))
        self.timeout = timeout  # to start, and to stop (a switch under valgrind needs minutes)
        self.session: SwitchSession | None = None
        self._writers: dict[int, _FifoWriter] = {}
        self._fed = 0
        self.packet_ins: list[tuple[dict[str, int], bytes]] = []

    def in_path(self, port: int) -> Path:
        return self.run_dir / f"p{port}_in.pcap"

    def out_path(self, port: int) -> Path:
        return self.run_dir / f"p{port}_out.pcap"

    def start(self, entities: Iterable[Entity] = (), p4info: P4Info | None = None,
              p4info_path: Path = P4INFO, json_path: Path = BMV2_JSON) -> TraceSwitch:
        for p in self.ports:
            path = self.in_path(p)
            path.unlink(missing_ok=True)
            self.out_path(p).unlink(missing_ok=True)
            os.mkfifo(path)
            self._writers[p] = _FifoWriter(path)
            self._writers[p].start()
        try:
            self.process.start(self.timeout)
            self.session = SwitchSession(self.address, p4info or P4Info.from_file(p4info_path))
            self.session.on_packet_in(lambda pin: self.packet_ins.append((pin.metadata, pin.payload)))
            self.session.push_pipeline(p4info_path, json_path, force=True)
            self.session.insert(list(entities))
        except BaseException:
            self.stop()
            raise
        return self

    def replay(self, packets: Sequence[tuple[int, bytes]]) -> None:
        """Feed (ingress port, frame) in this order, then end every input; once per switch."""
        if self._fed:
            raise RuntimeError("a TraceSwitch replays one trace; start another for the next")
        per_port: dict[int, list[bytes]] = {p: [] for p in self.ports}
        for i, (port, frame) in enumerate(packets):
            if port not in per_port:
                raise ValueError(f"port {port} is not one of the switch's ports {self.ports}")
            per_port[port].append(record(frame, 1_000_000 + i))  # one µs apart: the reader merges by timestamp
        self._fed = len(packets)
        for p, writer in self._writers.items():
            writer.chunks.put([b"".join(per_port[p])])

    def replay_paced(self, port: int, frames: Sequence[bytes], out_port: int, ahead: int = 10,
                     interval: float = 0.01) -> None:
        """Feed frames into one port (and end every input), never more than `ahead` beyond what
        `out_port` has written (checked every `interval` s, reading only what is new; what may go
        goes in one write): a closed loop that keeps few packets in flight, so that BMv2 reuses their
        packet headers and metadata (PHVs) as in a steady state instead of allocating one per queued
        packet (bench/instructions.py), and that keeps the switch busy without overrunning it
        (bench/forwarding.py)."""
        if self._fed:
            raise RuntimeError("a TraceSwitch replays one trace; start another for the next")
        out = PcapTail(self.out_path(out_port))

        def paced() -> Iterator[bytes]:
            sent = 0
            try:
                while sent < len(frames):
                    if sent - out.poll() >= ahead:
                        room = sent - ahead  # the output that lets the next packet go
                        wait_until(lambda: out.poll() > room, 600, interval=interval,  # noqa: B023 (called here)
                                   what=f"port {out_port} to catch up with packet {sent}")
                    upto = min(len(frames), out.count + ahead)
                    yield b"".join(record(frames[i], 1_000_000 + i) for i in range(sent, upto))
                    sent = upto
            finally:
                out.close()

        self._fed = len(frames)
        for p, writer in self._writers.items():
            writer.chunks.put(paced() if p == port else [])

    def replay_bursts(self, port: int, bursts: Sequence[Sequence[bytes]], out_ports: Sequence[int], idle_s: float,
                      timeout: float = 60.0) -> None:
        """Feed bursts of frames into one port (and end every input): each burst in one write, the next
        one only once every packet fed so far has come out of `out_ports`, and `idle_s` after that. The
        switch sees each burst's packets back to back and an idle time of at least `idle_s` between
        bursts: the input flowlet switching decides on (the idle time is the stimulus, not a wait for
        the switch, which is polled)."""
        if self._fed:
            raise RuntimeError("a TraceSwitch replays one trace; start another for the next")
        tails = [PcapTail(self.out_path(p)) for p in out_ports]

        def timed() -> Iterator[bytes]:
            sent = 0
            try:
                for k, burst in enumerate(bursts):
                    if k:
                        wait_until(lambda: sum(t.poll() for t in tails) >= sent, timeout,  # noqa: B023 (called here)
                                   what=f"burst {k - 1} to leave the switch")
                        time.sleep(idle_s)
                    yield b"".join(record(f, 1_000_000 + sent + i) for i, f in enumerate(burst))
                    sent += len(burst)
            finally:
                for t in tails:
                    t.close()

        self._fed = sum(len(b) for b in bursts)
        for p, writer in self._writers.items():
            writer.chunks.put(timed() if p == port else [])

    def replay_stages(self, stages: Sequence[Sequence[tuple[int, bytes]]], between: Callable[[int], None],
                      timeout: float = 30.0) -> None:
        """Feed stages of (ingress port, frame), in order, and end every input: stage i + 1 only once the switch
        has taken in every packet fed so far (its port counters) and `between(i)` has returned (the stimulus
        between them, e.g. time passing for a deadline in the program).

        BMv2 reads its input files merged by timestamp, so it waits for the next record of every input that is
        not ended: the stages after the first are on one port, which also carries each stage's last packet, and
        every other input ends with the first stage."""
        if self._fed:
            raise RuntimeError("a TraceSwitch replays one trace; start another for the next")
        if not stages or not stages[0]:
            raise ValueError("no stage, or an empty first stage")
        port = stages[0][-1][0]
        for i, stage in enumerate(stages):
            if not stage or stage[-1][0] != port or (i and any(q != port for q, _ in stage)):
                raise ValueError(f"stage {i}: the stages after the first are on one port ({port}), which sends "
                                 "each stage's last packet")
        for q, _ in stages[0]:
            if q not in self._writers:
                raise ValueError(f"port {q} is not one of the switch's ports {self.ports}")
        later: queue.Queue[bytes | None] = queue.Queue()

        def continued(first: bytes) -> Iterator[bytes]:
            yield first
            while (chunk := later.get()) is not None:
                yield chunk

        first = {p: b"".join(record(f, 1_000_000 + n) for n, (q, f) in enumerate(stages[0]) if q == p)
                 for p in self._writers}
        self._fed = len(stages[0])
        for p, writer in self._writers.items():
            writer.chunks.put(continued(first[p]) if p == port else [first[p]])
        try:
            for i, stage in enumerate(stages[1:], start=1):
                fed = self._fed
                wait_until(lambda: (self.received() or 0) >= fed, timeout,  # noqa: B023 (called here)
                           what=f"stage {i - 1} to be taken in")
                between(i - 1)
                later.put(b"".join(record(f, 1_000_000 + self._fed + n) for n, (_, f) in enumerate(stage)))
                self._fed += len(stage)
        finally:
            later.put(None)

    def received(self) -> int | None:
        """Packets the switch has taken in (its port_rx counters); None for a program without them."""
        assert self.session is not None
        if not any(n.endswith(port_counters.PORT_RX) for n in self.session.p4info.counter_names()):
            return None
        return sum(c.packets for c in self.session.read_counter(port_counters.PORT_RX).values())

    def drops(self) -> dict[str, int]:
        assert self.session is not None
        return port_counters.drops(self.session)

    def wait(self, expected_out: dict[int, int], timeout: float = 30.0, drops: int = 0, packet_ins: int = 0) -> None:
        """Poll until the switch took every input packet, wrote at least the expected counts,
        counted at least `drops` dropped packets and sent at least `packet_ins` to the controller."""
        def done() -> bool:
            for w in self._writers.values():
                if w.error is not None:
                    raise RuntimeError(f"feeding {w.path} failed: {w.error}")
            received = self.received()
            if (received is not None and received < self._fed) or len(self.packet_ins) < packet_ins:
                return False
            if not all(len(read_pcap(self.out_path(p))) >= n for p, n in expected_out.items()):
                return False
            return drops == 0 or sum(self.drops().values()) >= drops

        try:
            wait_until(done, timeout, interval=0.05, what="the switch to process the trace")
        except TimeoutError as e:
            got = {p: len(read_pcap(self.out_path(p))) for p in self.ports}
            raise TimeoutError(f"{e}: received {self.received()}/{self._fed}, wrote {got}, "
                               f"expected at least {expected_out}; log {self.process.config.log_file}") from None

    def stop(self, counters: Sequence[str] = ()) -> ReplayResult:
        """Stop the switch; returns its outputs, drops and the named counters' non-zero cells."""
        drops: dict[str, int] = {}
        read: dict[str, dict[int, int]] = {}
        if self.session is not None:
            with contextlib.suppress(Exception):
                drops = port_counters.drops(self.session)
            for name in counters:
                read[name] = {i: c.packets for i, c in self.session.read_counter(name).items() if c.packets}
            self.session.close()
            self.session = None
        for w in self._writers.values():
            if w.is_alive():
                w.chunks.put(None)
                # Unblock a writer still waiting for the switch to open its FIFO.
                with contextlib.suppress(OSError):
                    fd = os.open(w.path, os.O_RDONLY | os.O_NONBLOCK)
                    os.close(fd)
        self.process.stop(self.timeout)
        outputs = {p: read_pcap(self.out_path(p)) if self.out_path(p).exists() else [] for p in self.ports}
        result = ReplayResult(outputs, drops, list(self.packet_ins), read)
        if self._tmp is not None and os.environ.get("GRADSWITCH_KEEP_TRACES") != "1":
            self._tmp.cleanup()
        return result


def run_trace(ports: Sequence[int], entities: Iterable[Entity], packets: Sequence[tuple[int, bytes]],
              expected_out: dict[int, int], timeout: float = 30.0, run_dir: Path | None = None, drops: int = 0,
              packet_ins: int = 0, counters: Sequence[str] = ()) -> ReplayResult:
    """Start a switch, program it, replay the packets, wait for the expected counts, stop."""
    switch = TraceSwitch(ports, run_dir=run_dir)
    switch.start(entities)
    try:
        switch.replay(packets)
        switch.wait(expected_out, timeout, drops, packet_ins)
    finally:
        result = switch.stop(counters)
    return result
