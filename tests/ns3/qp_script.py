"""Scripted exchanges between one requester QP and one responder QP, run over both transports.

The RC transport has two implementations: gradswitch/roce/qp.py (the testbed's hosts) and the simulator's RcQp
(gradswitch/sim/ns3/model/gs-qp.cc). A `Scenario` is one exchange: the transport's settings, the RDMA WRITEs the
requester posts, and a scripted wire between the two QPs: a fixed one-way delay, optionally a rate, and
what happens to the k-th packet of each direction (`WireRule`: drop, duplicate, delay, trim). `run_python`
runs it over gradswitch/roce/qp.py with a small event loop of its own; `run_simulator` runs the simulator's
`gs-qp-script` on it (tests/ns3/gs-qp-script/gs-qp-script.cc: the same wire, in ns-3's simulator). Both return a
`Trace`: every packet each side put on the wire, the completions each side reported, the counters, and
whether and why the requester failed. `differences` says where two traces disagree on what both must agree
on (docs/simulator.md, "The transport's conformance test"; tests/ns3/test_transport_conformance.py).

The wire, the same in both drivers:
- A packet goes onto its direction's link when its end hands it over (all of a QP's packets at once without
  a rate; with `rate_bps` one at a time, each for its wire bytes' time). Its index on that direction (0 the
  first, retransmissions counted) picks the first rule whose [first, last] holds it. It arrives `delay_s`
  after its last bit left: dropped never, delayed `by_s` later, duplicated twice (the copy `by_s` after the
  original), trimmed as its headers alone with the TRIMMED bit (a DLCP switch cut its payload).
- A QP hands over its packets after the event that gave it something to send (a post, an ACK, a timeout), at
  the same instant. Events at one instant run in the order they were scheduled (as ns-3 runs them).
- Without a rate, gradswitch/roce/qp.py's batch (`Requester.transmit`) and the simulator's pulls (`RcQp::NextPacket`
until
  it has nothing) put the same packets on the wire at the same instant. With a rate they differ by design: the
  simulator's NIC pulls one packet when its link is free (an ACK that arrives meanwhile changes what it
  pulls next), gradswitch/roce/qp.py hands its whole batch to the kernel's queue. Paced scenarios are therefore compared
  on their outcome only (`Level.OUTCOME`).
"""

from __future__ import annotations

import functools
import heapq
import json
import math
import struct
import subprocess
import tempfile
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from gradswitch.protocol.choice import Choice
from gradswitch.protocol.dlcp import TRIMMED
from gradswitch.protocol.qpn import qpn
from gradswitch.roce.headers import AETH_LEN, IMM_LEN, RETH_LEN, AckType, Transport
from gradswitch.roce.order_tolerant import make_responder
from gradswitch.roce.qp import MemoryRegion, Mode, QpConfig, Requester, Responder, TransportError
from gradswitch.roce.wire import ROCE_OVERHEAD
from gradswitch.sim.build import qp_script_binary, status
from gradswitch.sim.run import SimError
from gradswitch.sim.sim_config import SACK_LEN, wire_json

RKEY = 1
JOB = 1
TIME_TOLERANCE_PS = 1000  # emission and completion times agree within 1 ns (both clocks are picoseconds)
# Counted by gradswitch/roce/qp.py only (tests/unit/test_sim_counters.py PYTHON_ONLY says why): not compared.
PYTHON_ONLY_COUNTERS = frozenset({"rnr_naks", "placed_ahead"})


class ScenarioError(ValueError):
    """A scenario the drivers cannot run the same way (a timer due at the same instant as a packet: which
    goes first is the event lists' business, not the transport's)."""


class WireAction(Choice):
    DROP = "drop"  # never arrives
    DUPLICATE = "duplicate"  # arrives, and a copy by_s later
    DELAY = "delay"  # arrives by_s late
    TRIM = "trim"  # arrives as its headers, marked trimmed (data packets only)


@dataclass(frozen=True)
class WireRule:
    """What the wire does to the packets of one direction whose index is within [first, last] (no end without
    last)."""

    first: int
    action: WireAction
    last: int | None = None
    by_s: float = 0.0

    def matches(self, index: int) -> bool:
        return index >= self.first and (self.last is None or index <= self.last)


def on(index: int, action: WireAction, by_s: float = 0.0) -> WireRule:
    """A rule for one packet: the index-th of its direction."""
    return WireRule(index, action, index, by_s)


@dataclass(frozen=True)
class TransportSettings:
    """A job's transport, as gradswitch/sim/sim_config.py `transport_json` writes it for the simulator."""

    mode: Mode = Mode.GBN
    mtu: int = 1024
    window: int = 16
    ack_every: int = 4
    rto_s: float = 1e-3
    rto_max_s: float = 1.0
    retry_limit: int = 7
    loss_budget: float = 0.0
    reorder_delay_s: float = 0.0
    order_tolerant: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"mode": str(self.mode), "mtu": self.mtu, "window": self.window, "ack_every": self.ack_every,
                "rto_s": self.rto_s, "rto_max_s": self.rto_max_s, "retry_limit": self.retry_limit,
                "loss_budget": self.loss_budget, "reorder_delay_s": self.reorder_delay_s,
                "order_tolerant": self.order_tolerant}

    def qp_config(self, local: int, remote: int, peer: str, initial_psn: int, remote_initial_psn: int) -> QpConfig:
        """gradswitch/roce/qp.py's configuration of node `local`'s QP (gradswitch/hosts/comm.py Comm.qp makes it the
        same way)."""
        return QpConfig(qpn=qpn(local, remote, JOB), remote_qpn=qpn(remote, local, JOB), mode=self.mode, mtu=self.mtu,
                        window=self.window, ack_every=self.ack_every, rto=self.rto_s, rto_max=self.rto_max_s,
                        retry_limit=self.retry_limit, initial_psn=initial_psn, remote_initial_psn=remote_initial_psn,
                        peer=peer, loss_budget=self.loss_budget, reorder_delay=self.reorder_delay_s,
                        order_tolerant=self.order_tolerant)


@dataclass(frozen=True)
class Message:
    """An RDMA WRITE the requester posts at at_s (bytes: a positive multiple of 4), or, with `after`, as soon as the
    completion of that earlier message (its index) is reported: the simulator's job nodes post from within
    RcQp's callback, gradswitch/roce/qp.py's applications once they collected the completion."""

    bytes: int
    at_s: float = 0.0
    imm: int | None = None
    after: int | None = None


class NicPull(Choice):
    """When the simulator's NIC takes a QP's packets (gradswitch/roce/qp.py's engine always transmits after the
    event)."""

    AFTER_EVENT = "after_event"  # after the event that activated the QP, at the same instant
    AT_ONCE = "at_once"  # within the activation, when the link is free (GsDevice::Kick)


@dataclass(frozen=True)
class Scenario:
    name: str
    transport: TransportSettings
    messages: tuple[Message, ...]
    initial_psn: int = 0  # the requester's first PSN, the responder's expected one
    delay_s: float = 10e-6  # one way
    rate_bps: float | None = None  # None: a packet takes no time on the link
    pull: NicPull = NicPull.AFTER_EVENT
    data: tuple[WireRule, ...] = ()  # requester -> responder
    acks: tuple[WireRule, ...] = ()  # responder -> requester
    time_limit_s: float = 60.0

    def __post_init__(self) -> None:
        for m in self.messages:
            if m.bytes <= 0 or m.bytes % 4:
                raise ValueError(f"{self.name}: message of {m.bytes} bytes: a positive multiple of 4")
        if any(r.action == WireAction.TRIM for r in self.acks):
            raise ValueError(f"{self.name}: only data packets are trimmed")
        for i, m in enumerate(self.messages):
            if m.after is not None and not 0 <= m.after < i:
                raise ValueError(f"{self.name}: message {i} after message {m.after}: an earlier message's index")

    def to_json(self) -> dict[str, Any]:
        def rules(rs: tuple[WireRule, ...]) -> list[dict[str, Any]]:
            return [{"first": r.first, "last": r.last, "action": str(r.action), "by_s": r.by_s} for r in rs]

        return {"name": self.name, "transport": self.transport.to_json(), "wire": wire_json(0),
                "initial_psn": self.initial_psn,
                "delay_s": self.delay_s, "rate_bps": self.rate_bps, "pull": str(self.pull),
                "messages": [{"bytes": m.bytes, "at_s": m.at_s, "imm": m.imm, "after": m.after}
                             for m in self.messages],
                "data": rules(self.data), "acks": rules(self.acks), "time_limit_s": self.time_limit_s}


# ---------------------------------------------------------------- traces


@dataclass(frozen=True)
class DataPacket:
    index: int
    t_ps: int
    psn: int
    opcode: int
    ack_req: bool
    retx: bool
    payload: int
    wire: int
    fate: str

    def key(self) -> tuple[int, int, bool, bool, int, int, str]:
        return self.psn, self.opcode, self.ack_req, self.retx, self.payload, self.wire, self.fate


@dataclass(frozen=True)
class AckPacket:
    index: int
    t_ps: int
    psn: int
    opcode: int
    kind: str  # ack or nak
    nak_code: int | None
    msn: int
    sack: int | None
    payload: int
    wire: int
    fate: str

    def key(self) -> tuple[int, int, str, int | None, int, int | None, int, str]:
        return self.psn, self.opcode, self.kind, self.nak_code, self.msn, self.sack, self.wire, self.fate


@dataclass(frozen=True)
class SendRecord:
    wr_id: int
    ok: bool
    t_ps: int


@dataclass(frozen=True)
class RecvRecord:
    length: int
    imm: int | None
    va: int
    zero_filled: int
    fnv: str  # FNV-1a 64 of the message's bytes as the responder holds them, hex
    t_ps: int


@dataclass(frozen=True)
class Trace:
    implementation: str  # python or ns3
    data: tuple[DataPacket, ...]
    acks: tuple[AckPacket, ...]
    sent: tuple[SendRecord, ...]  # the requester's completions
    requester_counters: dict[str, int]
    error: str | None  # why the requester failed
    idle: bool  # nothing posted is unacknowledged
    rto_s: float
    srtt_s: float | None
    received: tuple[RecvRecord, ...]  # the responder's completions
    responder_counters: dict[str, int]
    zero_filled: int

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Trace:
        req, resp = doc["requester"], doc["responder"]
        return cls(
            implementation=doc["implementation"],
            data=tuple(DataPacket(**{k: p[k] for k in DataPacket.__dataclass_fields__}) for p in doc["data"]),
            acks=tuple(AckPacket(**{k: p[k] for k in AckPacket.__dataclass_fields__}) for p in doc["acks"]),
            sent=tuple(SendRecord(**c) for c in req["completions"]),
            requester_counters=dict(req["counters"]), error=req["error"], idle=req["idle"], rto_s=req["rto_s"],
            srtt_s=req["srtt_s"], received=tuple(RecvRecord(**c) for c in resp["completions"]),
            responder_counters=dict(resp["counters"]), zero_filled=resp["zero_filled"])

    def to_json(self) -> dict[str, Any]:
        return {"implementation": self.implementation, "data": [asdict(p) for p in self.data],
                "acks": [asdict(p) for p in self.acks],
                "requester": {"completions": [asdict(c) for c in self.sent], "counters": self.requester_counters,
                              "error": self.error, "idle": self.idle, "rto_s": self.rto_s, "srtt_s": self.srtt_s},
                "responder": {"completions": [asdict(c) for c in self.received],
                              "counters": self.responder_counters, "zero_filled": self.zero_filled}}

    def table(self) -> str:
        """The packets, one a line, for a failing test's message."""
        lines = [f"{self.implementation}:"]
        for d in self.data:
            flags = ("A" if d.ack_req else "-") + ("R" if d.retx else "-")
            lines.append(f"  data #{d.index:<3} {d.t_ps / 1e6:12.3f} us psn {d.psn:<8} op {d.opcode:<2} {flags} "
                         f"{d.fate}")
        for a in self.acks:
            sack = f" sack {a.sack}" if a.sack is not None else ""
            code = f" code {a.nak_code}" if a.nak_code else ""
            lines.append(f"  ack  #{a.index:<3} {a.t_ps / 1e6:12.3f} us psn {a.psn:<8} {a.kind}{code} msn {a.msn}"
                         f"{sack} {a.fate}")
        return "\n".join(lines)


# ---------------------------------------------------------------- what must agree


class Level(Enum):
    PACKETS = "packets"  # every packet, completion, counter and timer (a wire without a rate)
    OUTCOME = "outcome"  # what the applications saw (a paced wire: the NICs' designs differ, module docstring)


def _near(a: float | None, b: float | None, rel: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-15)


def _counters(c: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in c.items() if k not in PYTHON_ONLY_COUNTERS}


def differences(a: Trace, b: Trace, level: Level = Level.PACKETS) -> list[str]:
    """Where two traces of one scenario disagree on what both implementations must agree on (empty: nowhere)."""
    out: list[str] = []

    def same(what: str, x: object, y: object) -> None:
        if x != y:
            out.append(f"{what}: {a.implementation} {x!r}, {b.implementation} {y!r}")

    def close_ps(what: str, x: int, y: int) -> None:
        if abs(x - y) > TIME_TOLERANCE_PS:
            out.append(f"{what}: {a.implementation} at {x} ps, {b.implementation} at {y} ps")

    # What the applications saw: the same at every level.
    same("requester completions (wr_id, ok)", [(c.wr_id, c.ok) for c in a.sent], [(c.wr_id, c.ok) for c in b.sent])
    same("responder completions (length, imm, va, zero-filled packets, bytes' FNV)",
         [(c.length, c.imm, c.va, c.zero_filled, c.fnv) for c in a.received],
         [(c.length, c.imm, c.va, c.zero_filled, c.fnv) for c in b.received])
    same("requester failed", a.error is not None, b.error is not None)
    same("requester idle at the end", a.idle, b.idle)
    same("packets zero-filled", a.zero_filled, b.zero_filled)
    same("packets accepted", a.responder_counters.get("accepted", 0), b.responder_counters.get("accepted", 0))
    if level == Level.OUTCOME:
        return out
    same("failure", a.error, b.error)
    for i, (x, y) in enumerate(zip(a.sent, b.sent, strict=False)):
        close_ps(f"requester completion {i} (wr {x.wr_id})", x.t_ps, y.t_ps)
    for i, (r, s) in enumerate(zip(a.received, b.received, strict=False)):
        close_ps(f"responder completion {i}", r.t_ps, s.t_ps)
    same("requester counters", _counters(a.requester_counters), _counters(b.requester_counters))
    same("responder counters", _counters(a.responder_counters), _counters(b.responder_counters))
    if not _near(a.rto_s, b.rto_s):
        out.append(f"RTO at the end: {a.implementation} {a.rto_s!r} s, {b.implementation} {b.rto_s!r} s")
    if not _near(a.srtt_s, b.srtt_s):
        out.append(f"smoothed RTT at the end: {a.implementation} {a.srtt_s!r} s, {b.implementation} {b.srtt_s!r} s")
    packets: tuple[tuple[str, Sequence[DataPacket | AckPacket], Sequence[DataPacket | AckPacket]], ...] = (
        ("data", a.data, b.data), ("ack", a.acks, b.acks))
    for name, xs, ys in packets:
        for p, q in zip(xs, ys, strict=False):
            if p.key() != q.key():
                out.append(f"{name} packet #{p.index} (psn, opcode, ...): {a.implementation} {p}, "
                           f"{b.implementation} {q}")
                break  # everything after the first difference follows from it
            close_ps(f"{name} packet #{p.index} (psn {p.psn}) sent", p.t_ps, q.t_ps)
        if len(xs) != len(ys):
            out.append(f"{name} packets sent: {a.implementation} {len(xs)}, {b.implementation} {len(ys)}")
    return out


# ---------------------------------------------------------------- the simulator's driver


def run_simulator(scenario: Scenario, workdir: Path | None = None) -> Trace:
    """Run the scenario through gs-qp-script (the simulator's RcQp), its files in workdir (default: a temporary
    directory); SimError when the program is not built or fails."""
    missing = status().missing()
    if missing:
        raise SimError(missing)
    with tempfile.TemporaryDirectory(prefix="qp-script-") as tmp:
        where = workdir or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{scenario.name}.scenario.json"
        out = where / f"{scenario.name}.ns3.json"
        path.write_text(json.dumps(scenario.to_json(), indent=1))
        proc = subprocess.run([str(qp_script_binary()), "--scenario", str(path), "--out", str(out)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise SimError(f"gs-qp-script on {scenario.name}: exit {proc.returncode}: {proc.stderr.strip()}")
        return Trace.from_json(json.loads(out.read_text()))


# ---------------------------------------------------------------- gradswitch/roce/qp.py's driver


def message_values(index: int, nbytes: int) -> bytes:
    """The bytes of message `index`: int32 value j = (index + 1) << 20 | j, little-endian (gs-script-end.cc
    ScriptValue)."""
    count = nbytes // 4
    return struct.pack(f"<{count}i", *(((index + 1) << 20) + j for j in range(count)))


def fnv1a(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def wire_bytes(t: Transport) -> int:
    """Bytes of a packet on the link (gradswitch/roce/wire.py's sizes, as the simulator's configuration carries
    them)."""
    return (ROCE_OVERHEAD + len(t.payload) + (RETH_LEN if t.reth is not None else 0)
            + (IMM_LEN if t.imm is not None else 0) + (AETH_LEN if t.aeth is not None else 0))


def _ticks(seconds: float) -> int:
    return round(seconds * 1e12)


def _seconds(ps: int) -> float:
    return ps * 1e-12


def _due(deadline: float) -> int:
    """The first picosecond at which a QP's timer (a deadline in seconds) has expired."""
    ps = _ticks(deadline)
    while _seconds(ps) < deadline:
        ps += 1
    return ps


class _Loop:
    """Events by time, those at one instant in the order they were scheduled (as ns-3's event list)."""

    def __init__(self) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0

    def at(self, t_ps: int, f: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(t_ps, self.now), self._seq, f))

    def run(self, limit_ps: int) -> None:
        while self._heap and self._heap[0][0] <= limit_ps:
            self.now, _, f = heapq.heappop(self._heap)
            f()


class _RecordingRequester(Requester):
    """gradswitch/roce/qp.py's requester, noting whether each packet it builds is a retransmission (its own flag)."""

    def __init__(self, cfg: QpConfig) -> None:
        super().__init__(cfg)
        self.built: list[bool] = []

    def build(self, psn: int, retransmission: bool = False) -> Transport:
        self.built.append(retransmission)
        return super().build(psn, retransmission)


@dataclass
class _Link:
    """One direction of the wire (gs-scripted-link.cc): rules, delay, an optional rate, a FIFO."""

    loop: _Loop
    rules: tuple[WireRule, ...]
    delay_ps: int
    rate_bps: float | None
    deliver: Callable[[Transport], None]
    arrivals: Counter[int]  # when packets reach the far end (ScenarioError on a timer due then)
    data: list[DataPacket] = field(default_factory=list)
    acks: list[AckPacket] = field(default_factory=list)
    queue: deque[tuple[Transport, bool]] = field(default_factory=deque)
    busy_until: int = 0
    done_scheduled: bool = False

    def free(self) -> bool:
        return self.loop.now >= self.busy_until and not self.queue

    def enqueue(self, t: Transport, retx: bool = False) -> None:
        if self.free():
            self.send(t, retx)
        else:
            self.queue.append((t, retx))

    def send(self, t: Transport, retx: bool) -> None:
        now = self.loop.now
        index = len(self.data) + len(self.acks)
        wire = wire_bytes(t)
        serialization = round(wire * 8.0 / self.rate_bps * 1e12) if self.rate_bps else 0
        arrival = now + serialization + self.delay_ps
        rule = next((r for r in self.rules if r.matches(index)), None)
        by = _ticks(rule.by_s) if rule is not None else 0
        if rule is None:
            fate = "delivered"
            self._deliver(t, arrival)
        elif rule.action == WireAction.DROP:
            fate = "dropped"
        elif rule.action == WireAction.DUPLICATE:
            fate = "duplicated"
            self._deliver(t, arrival)
            self._deliver(t, arrival + by)
        elif rule.action == WireAction.DELAY:
            fate = "delayed"
            self._deliver(t, arrival + by)
        else:
            fate = "trimmed"  # as a DLCP switch trims: the payload goes, the headers arrive marked
            self._deliver(replace(t, bth=replace(t.bth, resv7=t.bth.resv7 | TRIMMED, pad_count=0), payload=b""),
                          arrival)
        if t.aeth is None:
            self.data.append(DataPacket(index, now, t.bth.psn, t.bth.opcode, t.bth.ack_req, retx, len(t.payload),
                                        wire, fate))
        else:
            nak = t.aeth.kind == AckType.NAK
            sack = struct.unpack("!I", t.payload[:4])[0] & 0xFFFFFF if len(t.payload) >= SACK_LEN else None
            self.acks.append(AckPacket(index, now, t.bth.psn, t.bth.opcode, "nak" if nak else "ack",
                                       t.aeth.value if nak else None, t.aeth.msn, sack, len(t.payload), wire, fate))
        if serialization > 0:
            self.busy_until = now + serialization
            if not self.done_scheduled:
                self.done_scheduled = True
                self.loop.at(self.busy_until, self._done)

    def _deliver(self, t: Transport, at: int) -> None:
        self.arrivals[at] += 1
        self.loop.at(at, functools.partial(self._arrive, t, at))

    def _arrive(self, t: Transport, at: int) -> None:
        self.arrivals[at] -= 1
        self.deliver(t)

    def _done(self) -> None:
        self.done_scheduled = False
        if self.queue:
            self.send(*self.queue.popleft())


class _PythonExchange:
    """gradswitch/roce/qp.py's requester and responder over the scripted wire (gs-qp-script's twin)."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        self.loop = _Loop()
        t = s.transport
        self.req = _RecordingRequester(t.qp_config(0, 1, "responder", s.initial_psn, 0))
        total = sum(m.bytes for m in s.messages)
        self.region = MemoryRegion.allocate(RKEY, max(total, 1))
        self.resp: Responder = make_responder(t.qp_config(1, 0, "requester", 0, s.initial_psn), {RKEY: self.region})
        delay = _ticks(s.delay_s)
        self.req_arrivals: Counter[int] = Counter()  # ACKs on their way to the requester, by arrival time
        self.resp_arrivals: Counter[int] = Counter()
        self.data = _Link(self.loop, s.data, delay, s.rate_bps, self._on_data, self.resp_arrivals)
        self.acks = _Link(self.loop, s.acks, delay, s.rate_bps, self._on_ack, self.req_arrivals)
        self.pull_pending = False
        self.req_timer: int | None = None
        self.resp_timer: int | None = None
        self.posts: Counter[int] = Counter()
        self.vas = [sum(m.bytes for m in s.messages[:i]) for i in range(len(s.messages))]
        self.message_of: dict[int, int] = {}  # work request -> message
        self.sent: list[SendRecord] = []
        self.received: list[RecvRecord] = []

    def run(self) -> Trace:
        for i, m in enumerate(self.s.messages):
            if m.after is None:
                at = _ticks(m.at_s)
                self.posts[at] += 1
                self.loop.at(at, functools.partial(self._scheduled_post, i, at))
        self.loop.run(_ticks(self.s.time_limit_s))
        req = self.req
        return Trace("python", tuple(self.data.data), tuple(self.acks.acks), tuple(self.sent),
                     dict(req.counters.values), req.error, req.idle(), req.rto, req.srtt, tuple(self.received),
                     dict(self.resp.counters.values), self.resp.zero_filled)

    # ---- the requester's host ----

    def _scheduled_post(self, index: int, at: int) -> None:
        self.posts[at] -= 1
        self._no_timer_due(self.req_timer, "a post")
        self._post(index)
        self._requester_changed()

    def _post(self, index: int) -> None:
        m = self.s.messages[index]
        try:
            wr = self.req.post_write(message_values(index, m.bytes), self.vas[index], RKEY, m.imm)
        except TransportError:
            return  # a failed QP takes no more work (the simulator's script skips it too)
        self.message_of[wr.wr_id] = index
        self._activate()

    def _activate(self) -> None:
        """The QP may have packets to send: hand them over after this event (gs-script-end.cc Activate)."""
        if not self.pull_pending:
            self.pull_pending = True
            self.loop.at(self.loop.now, self._pull)

    def _pull(self) -> None:
        self.pull_pending = False
        self.req.built.clear()
        packets = self.req.transmit(_seconds(self.loop.now))
        for t, retx in zip(packets, self.req.built, strict=True):
            self.data.enqueue(t, retx)
        self._requester_changed()

    def _on_ack(self, t: Transport) -> None:
        self._no_timer_due(self.req_timer, "an ACK")
        failed = self.req.error is not None
        self.req.on_ack(t, _seconds(self.loop.now))
        if not failed and self.req.error is None:
            self._activate()  # RcQp::OnAck activates its QP unless it failed
        self._requester_changed()

    def _requester_timer(self, at: int) -> None:
        if at != self.req_timer:
            return  # the deadline moved
        self.req_timer = None
        self._no_arrival_at(at, self.req_arrivals, self.posts)
        timeouts = self.req.counters["timeouts"]
        self.req.on_timer(_seconds(at))
        if self.req.counters["timeouts"] > timeouts and self.req.error is None:
            self._activate()
        self._requester_changed()

    def _requester_changed(self) -> None:
        """Collect completions; (re)arm the retransmission timer at its deadline."""
        while self.req.completions:
            c = self.req.completions.popleft()
            self.sent.append(SendRecord(c.wr_id, c.ok, self.loop.now))
            done = self.message_of[c.wr_id]
            for i, m in enumerate(self.s.messages):
                if c.ok and m.after == done:
                    self._post(i)
        deadline = self.req.deadline()
        due = _due(deadline) if deadline is not None else None
        if due != self.req_timer:
            self.req_timer = due
            if due is not None:
                self.loop.at(due, functools.partial(self._requester_timer, due))

    # ---- the responder's host ----

    def _on_data(self, t: Transport) -> None:
        self._no_timer_due(self.resp_timer, "a data packet")
        for reply in self.resp.on_packet(t, _seconds(self.loop.now)):
            self.acks.enqueue(reply)
        self._responder_changed()

    def _responder_timer(self, at: int) -> None:
        if at != self.resp_timer:
            return
        self.resp_timer = None
        self._no_arrival_at(at, self.resp_arrivals, Counter())
        for reply in self.resp.on_timer(_seconds(at)):
            self.acks.enqueue(reply)
        self._responder_changed()

    def _responder_changed(self) -> None:
        while self.resp.completions:
            c = self.resp.completions.popleft()
            data = bytes(self.region.buffer[c.va : c.va + c.length])
            self.received.append(RecvRecord(c.length, c.imm, c.va, c.zero_filled, fnv1a(data), self.loop.now))
        deadline = self.resp.deadline()
        due = _due(deadline) if deadline is not None else None
        if due != self.resp_timer:
            self.resp_timer = due
            if due is not None:
                self.loop.at(due, functools.partial(self._responder_timer, due))

    # ---- ties ----

    def _no_timer_due(self, timer: int | None, what: str) -> None:
        if timer is not None and abs(timer - self.loop.now) <= TIME_TOLERANCE_PS:
            raise ScenarioError(f"{self.s.name}: {what} at {self.loop.now} ps and a timer due at {timer} ps: "
                                "which goes first is the event list's choice; change the delay or the RTO")

    def _no_arrival_at(self, at: int, *pending: Counter[int]) -> None:
        for counts in pending:
            for t, n in counts.items():
                if n > 0 and abs(t - at) <= TIME_TOLERANCE_PS:
                    raise ScenarioError(f"{self.s.name}: a timer due at {at} ps and an event at {t} ps: which goes "
                                        "first is the event list's choice; change the delay or the RTO")


def run_python(scenario: Scenario) -> Trace:
    """Run the scenario over gradswitch/roce/qp.py (and gradswitch/roce/order_tolerant.py)."""
    return _PythonExchange(scenario).run()
