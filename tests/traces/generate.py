"""Build the pcap traces of tests/traces/<scenario>/ from scapy descriptions.

Each scenario is one switch of a topology, the packets that enter it (per port, in one global
order), and the packets that must leave it, computed here with scapy from the expected
behaviour (TTL decremented, MACs rewritten, checksum recomputed...), independently of the
switch program. Files per scenario:

    in_p<N>.pcap         packets entering port N (timestamps give the global order)
    expected_p<N>.pcap   packets that must leave port N, in order
    scenario.json        topology, switch, expected drops and packet-ins

Run `python -m tests.traces.generate` after changing a scenario; tests/bmv2/test_traces.py
replays them on BMv2 and tests/unit/test_traces_fresh.py checks the files match this script.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet, Raw

from gradswitch.control.netreduce_jobs import place_job
from gradswitch.control.pcap import read_timed, write_stream
from gradswitch.control.routing import switch_port_mac
from gradswitch.protocol.netreduce import PACKETS
from gradswitch.roce.headers import Bth, Opcode, Reth, Transport
from gradswitch.roce.wire import build_frame, build_ipv4
from gradswitch.topology.generators import build_topology
from tests.traces.netreduce_scenarios import LEAFSPINE, NrJob, Sent, corrupt
from tests.traces.netreduce_scenarios import TOPOLOGY as NR_TOPOLOGY
from tests.traces.netreduce_scenarios import topology as nr_topology

HERE = Path(__file__).parent
BROADCAST = "ff:ff:ff:ff:ff:ff"


@dataclass
class Scenario:
    name: str
    topology: dict[str, object]  # build_topology arguments
    switch: str
    inputs: list[tuple[int, bytes]] = field(default_factory=list)
    expected: dict[int, list[bytes]] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    packet_ins: list[dict[str, object]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    netreduce: list[dict[str, object]] = field(default_factory=list)  # jobs installed before the replay
    events: dict[str, dict[str, int]] = field(default_factory=dict)  # job -> NetReduce events expected

    def send(self, port: int, pkt: Packet | bytes, note: str) -> None:
        self.inputs.append((port, bytes(pkt)))
        self.notes.append(f"in p{port}: {note}")

    def expect(self, port: int, pkt: Packet | bytes) -> None:
        self.expected.setdefault(port, []).append(bytes(pkt))

    def drop(self, reason: str) -> None:
        self.drops[reason] = self.drops.get(reason, 0) + 1


def routed(pkt: Packet, src_mac: str, dst_mac: str) -> Packet:
    """What a router makes of an IPv4 packet: TTL-1, checksum recomputed, MACs rewritten."""
    out: Packet = pkt.copy()
    out[Ether].src = src_mac
    out[Ether].dst = dst_mac
    out[IP].ttl -= 1
    del out[IP].chksum
    return Ether(bytes(out))


def rack_l3() -> Scenario:
    topo = build_topology("rack", hosts=3)
    s = Scenario("rack_l3", {"name": "rack", "hosts": 3}, "s1")
    h1, h2, h3 = topo.hosts
    mac = {p: switch_port_mac(0, p) for p in (1, 2, 3)}

    arp = Ether(src=h1.mac, dst=BROADCAST) / ARP(op=1, hwsrc=h1.mac, psrc=h1.ip, hwdst="00:00:00:00:00:00", pdst=h2.ip)
    s.send(1, arp, "ARP who-has h2 from h1")
    s.expect(1, Ether(src=h2.mac, dst=h1.mac) / ARP(op=2, hwsrc=h2.mac, psrc=h2.ip, hwdst=h1.mac, pdst=h1.ip))

    udp = Ether(src=h1.mac, dst=h2.mac) / IP(src=h1.ip, dst=h2.ip, ttl=64, id=1) / UDP(sport=5000, dport=6000) / Raw(
        b"gradient" * 8)
    s.send(1, udp, "UDP h1 -> h2")
    s.expect(2, routed(udp, mac[2], h2.mac))

    tcp = Ether(src=h3.mac, dst=h1.mac) / IP(src=h3.ip, dst=h1.ip, ttl=5, id=2) / TCP(sport=40000, dport=80, flags="S")
    s.send(3, tcp, "TCP SYN h3 -> h1")
    s.expect(1, routed(tcp, mac[1], h1.mac))

    bad = Ether(bytes(Ether(src=h1.mac, dst=h2.mac) / IP(src=h1.ip, dst=h2.ip, id=3) / UDP(sport=1, dport=2)))
    bad[IP].chksum ^= 0x1111
    s.send(1, bad, "IPv4 with a wrong header checksum")
    s.drop("malformed")

    s.send(2, Ether(src=h2.mac, dst=h3.mac) / IP(src=h2.ip, dst=h3.ip, ttl=1, id=4) / UDP(sport=1, dport=2),
           "TTL 1")
    s.drop("ttl-expired")

    s.send(2, bytes(Ether(src=h2.mac, dst=h3.mac) / IP(src=h2.ip, dst=h3.ip) / UDP())[:24], "truncated IPv4 header")
    s.drop("malformed")

    s.send(3, Ether(src=h3.mac, dst=h1.mac) / IP(src=h3.ip, dst="10.9.9.9", id=5) / UDP(sport=1, dport=2),
           "no route")
    s.drop("no-route")

    frame = Ether(src=h2.mac, dst=BROADCAST, type=0x88B5) / Raw(b"hello neighbours" * 3)
    s.send(2, frame, "non-IP broadcast from h2: flooded to the other host ports")
    s.expect(1, frame)
    s.expect(3, frame)

    roce = Transport(Bth(Opcode.WRITE_FIRST, 0x10203, 0x100), bytes(range(64)), reth=Reth(0x2000, 9, 128))
    wire = Ether(src=h1.mac, dst=h3.mac, type=0x0800) / Raw(build_ipv4(roce, h1.ip, h3.ip, ident=6))
    s.send(1, Ether(bytes(wire)), "RoCE v2 WRITE First h1 -> h3 (ICRC unchanged by routing: TTL is masked)")
    s.expect(3, routed(Ether(bytes(wire)), mac[3], h3.mac))

    gratuitous = Ether(src=h1.mac, dst=BROADCAST) / ARP(op=2, hwsrc=h1.mac, psrc=h1.ip, pdst=h1.ip)
    s.send(1, gratuitous, "gratuitous ARP reply: not forwarded")
    s.drop("arp-other")

    unknown = Ether(src=h3.mac, dst=BROADCAST) / ARP(op=1, hwsrc=h3.mac, psrc=h3.ip, pdst="10.0.1.77")
    s.send(3, unknown, "ARP for an unknown address: sent to the controller")
    s.packet_ins.append({"ingress_port": 3, "reason": "arp-miss", "payload": bytes(unknown).hex()})
    return s


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (poly 0x8005 reflected, init 0): BMv2's crc16."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def leaf_ecmp() -> Scenario:
    topo = build_topology("leafspine", leaves=2, spines=2, hosts_per_leaf=2)
    s = Scenario("leaf_ecmp", {"name": "leafspine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2}, "leaf1")
    h1, h2, h3, h4 = topo.hosts
    uplinks = {3: switch_port_mac(2, 1), 4: switch_port_mac(3, 1)}  # leaf1 port -> spine port MAC
    for sport in (1000, 1001, 1002, 1003, 1004, 1005):
        for dst in (h3, h4):
            pkt = Ether(src=h1.mac, dst=dst.mac) / IP(src=h1.ip, dst=dst.ip, id=sport) / UDP(sport=sport, dport=9)
            # The ECMP hash input: addresses, protocol, ports, and the spray key (0: not a spraying DLCP job).
            key = bytes(IP(src=h1.ip, dst=dst.ip).build()[12:20]) + bytes([17]) + sport.to_bytes(2, "big") + \
                (9).to_bytes(2, "big") + bytes(4)
            port = (3, 4)[crc16_arc(key) % 2]
            s.send(1, pkt, f"UDP h1 -> {dst.name} sport {sport}: ECMP by 5-tuple hash")
            s.expect(port, routed(pkt, switch_port_mac(0, port), uplinks[port]))
    down = Ether(src=uplinks[3], dst=switch_port_mac(0, 3)) / IP(src=h3.ip, dst=h2.ip, id=77) / UDP(sport=5, dport=6)
    s.send(3, down, "from spine1 to h2: down to the host port")
    s.expect(2, routed(down, switch_port_mac(0, 2), h2.mac))
    return s


def _nr_scenario(name: str, jobs: list[NrJob], topology: dict[str, object] = NR_TOPOLOGY, switch: str = "s1"
                 ) -> Scenario:
    s = Scenario(name, dict(topology), switch)
    s.netreduce = [{"job": j.job, "workers": j.hosts, "credits": j.credits} for j in jobs]
    return s


def _complete(s: Scenario, j: NrJob, completing: Sent, receivers: list[int] | None = None) -> None:
    total = j.total(completing.k, completing.i)
    for r in receivers if receivers is not None else range(len(j.hosts)):
        s.expect(j.port(r), j.result_for(r, completing, total))


def _send(s: Scenario, j: NrJob, sent: Sent, note: str) -> Sent:
    s.send(j.port(sent.rank), sent.frame, f"job {j.job} worker {sent.rank}: {note}")
    return sent


def netreduce_interleavings() -> Scenario:
    topo = nr_topology()
    j = NrJob(topo, 1, ["h1", "h2", "h3"], credits=2)
    s = _nr_scenario("netreduce_interleavings", [j])
    ident = iter(range(100, 10000))
    for i in range(PACKETS):  # message 0, packet by packet across workers (one duplicate)
        for r in range(3):
            sent = _send(s, j, j.packet(r, 0, i, next(ident)), f"message 0 packet {i}")
            if (r, i) == (0, 0):
                _send(s, j, j.packet(0, 0, 0, next(ident)), "message 0 packet 0 again (duplicate)")
                s.drop("netreduce-refused")
        _complete(s, j, sent)
    for r in (2, 0, 1):  # message 1, worker by worker: worker 1's packets complete the cells
        for i in range(PACKETS):
            sent = _send(s, j, j.packet(r, 1, i, next(ident)), f"message 1 packet {i}")
            if r == 1:
                _complete(s, j, sent)
    s.events = {"1": {"contribution": 24, "completion": 8, "duplicate": 1}}
    return s


def netreduce_recovery() -> Scenario:
    topo = nr_topology()
    j = NrJob(topo, 1, ["h1", "h2", "h3"], credits=2)
    s = _nr_scenario("netreduce_recovery", [j])
    ident = iter(range(200, 10000))
    for r in (0, 1):
        for i in range(PACKETS):
            _send(s, j, j.packet(r, 0, i, next(ident)), f"packet {i}")
    for i in (0, 2, 3):  # worker 2's packet 1 is lost: cells 0, 2, 3 complete
        _complete(s, j, _send(s, j, j.packet(2, 0, i, next(ident)), f"packet {i} (packet 1 lost)"))
    for i in (1, 2, 3):  # go-back-N from the lost packet
        sent = _send(s, j, j.packet(2, 0, i, next(ident)), f"retransmits packet {i}")
        # cell 1 completes for everyone; cells 2 and 3 answer the retransmission on worker 2's connection
        _complete(s, j, sent, None if i == 1 else [j.layout.peer(2)])
    # Worker 1's peer lost the last result: worker 1 times out and retransmits its last packet.
    _complete(s, j, _send(s, j, j.packet(1, 0, 3, next(ident)), "retransmits packet 3 (its result was lost)"),
              [j.layout.peer(1)])
    s.events = {"1": {"contribution": 12, "completion": 4, "retransmitted-result": 3}}
    return s


def netreduce_refusals() -> Scenario:
    topo = nr_topology()
    j = NrJob(topo, 1, ["h1", "h2", "h3"], credits=2)
    s = _nr_scenario("netreduce_refusals", [j])
    h4, h2 = topo.host("h4"), topo.host("h2")
    ident = iter(range(300, 10000))
    forged = j.transport(0, 0, 0)
    s.send(4, build_frame(forged, h4.ip, h2.ip, h4.mac, h2.mac, ident=next(ident)),
           "h4 (not a member) sends a first packet with job 1's rkey")
    middle = j.transport(0, 0, 1)  # on the connection worker 0 -> h2
    s.send(4, build_frame(middle, h4.ip, h2.ip, h4.mac, h2.mac, ident=next(ident)),
           "h4 sends a middle packet on a job 1 connection")
    s.drops["netreduce-refused"] = 2
    truncated = j.packet(0, 0, 0, next(ident)).frame[:80]
    j.sent.pop()
    s.send(j.port(0), truncated, "worker 0: a first packet cut short (parser error)")
    s.drop("malformed")
    send = j.packet(1, 0, 0, next(ident), opcode=Opcode.SEND_ONLY)
    _send(s, j, send, "a SEND on its job QP (not an aggregation packet)")
    _send(s, j, j.packet(2, 3, 1, next(ident)), "a middle packet of a message it never started")
    s.drops["netreduce-refused"] += 2
    _send(s, j, j.packet(0, 0, 0, next(ident)), "message 0 packet 0")
    _send(s, j, j.packet(1, 2 * j.credits, 0, next(ident)),
          "message 2C, which reuses message 0's slot copy, before message 0 is done: no credit")
    s.drops["netreduce-refused"] += 1
    _send(s, j, j.packet(1, 0, 0, next(ident)), "message 0 packet 0")
    _complete(s, j, _send(s, j, j.packet(2, 0, 0, next(ident)), "message 0 packet 0: the sum is unaffected"))
    s.events = {"1": {"not-member": 2, "malformed": 1, "no-context": 1, "no-credit": 1, "contribution": 3,
                      "completion": 1}}
    return s


def netreduce_two_jobs() -> Scenario:
    topo = nr_topology()
    a = NrJob(topo, 1, ["h1", "h2"], credits=1)
    b = NrJob(topo, 2, ["h3", "h4"], credits=1)
    s = _nr_scenario("netreduce_two_jobs", [a, b])
    ident = iter(range(400, 10000))
    for i in range(PACKETS):
        _send(s, a, a.packet(0, 0, i, next(ident)), f"packet {i}")
        _send(s, b, b.packet(0, 0, i, next(ident)), f"packet {i}")
        _complete(s, a, _send(s, a, a.packet(1, 0, i, next(ident)), f"packet {i}"))
        _complete(s, b, _send(s, b, b.packet(1, 0, i, next(ident)), f"packet {i}"))
    s.events = {"1": {"contribution": 8, "completion": 4}, "2": {"contribution": 8, "completion": 4}}
    return s


# What a corrupted packet of each kind has flipped (roce: netreduce_scenarios.corrupt): RETH, payload and
# PSN on first packets, PSN and payload on middle ones, immediate data, payload and PSN on last ones.
CORRUPTIONS = {0: ("reth", "payload", "psn"), 1: ("psn", "payload"), 2: ("payload",), 3: ("imm", "payload", "psn")}


def _send_corrupted(s: Scenario, port: int, frame: bytes, i: int, who: str) -> int:
    """The corrupted copies of packet i (one per kind of corruption), each to be dropped and counted."""
    for where in CORRUPTIONS[i]:
        s.send(port, corrupt(frame, where), f"{who}: packet {i} with its {where} corrupted on the wire")
        s.drop("bad-icrc")
    return len(CORRUPTIONS[i])


def netreduce_corruption() -> Scenario:
    """A flat switch: corrupted contributions (first, middle and last packets; payload, RETH, immediate
    data, PSN) are dropped and counted before they touch any state; the intact retransmissions
    complete every cell with the exact sum."""
    topo = nr_topology()
    j = NrJob(topo, 1, ["h1", "h2", "h3"], credits=2)
    s = _nr_scenario("netreduce_corruption", [j])
    ident = iter(range(500, 10000))
    first = j.packet(0, 0, 1, next(ident))
    j.sent.pop()
    bad = _send_corrupted(s, j.port(0), first.frame, 1, "worker 0, into an empty cell")
    for r in (0, 1):
        for i in range(PACKETS):
            _send(s, j, j.packet(r, 0, i, next(ident)), f"message 0 packet {i}")
    for i in range(PACKETS):
        good = j.packet(2, 0, i, next(ident))
        bad += _send_corrupted(s, j.port(2), good.frame, i, "worker 2, the cell's last contribution")
        _complete(s, j, _send(s, j, good, f"message 0 packet {i} retransmitted intact: the exact sum"))
    s.events = {"1": {"contribution": 12, "completion": 4, "bad-icrc": bad}}
    return s


def _at_leaf1(name: str) -> tuple[NrJob, Scenario, str, int, list[int]]:
    """A scenario at leaf1 of a job of h1-h4 spread over the leaf-spine fabric: the job, the
    scenario, the aggregation spine, leaf1's port to it and the ranks attached to leaf1."""
    topo = nr_topology(LEAFSPINE)
    j = NrJob(topo, 1, ["h1", "h2", "h3", "h4"], credits=2)
    spine = place_job(topo, 1, j.hosts, j.credits, []).aggregation_switch
    s = _nr_scenario(name, [j], LEAFSPINE, "leaf1")
    local = [r for r, h in enumerate(j.hosts) if topo.attachment(h)[0] == "leaf1"]
    return j, s, spine, topo.ports_between("leaf1", spine)[0], local


def netreduce_leaf_corruption() -> Scenario:
    """A leaf: corrupted contributions of its local workers and corrupted results from its parent are
    dropped and counted; the intact ones send the exact partial up and store and return the exact result."""
    j, s, spine, up_port, local = _at_leaf1("netreduce_leaf_corruption")
    ident = iter(range(600, 10000))
    bad = 0
    for i in range(PACKETS):
        _send(s, j, j.packet(local[0], 0, i, next(ident)), f"message 0 packet {i}")
        good = j.packet(local[1], 0, i, next(ident))
        bad += _send_corrupted(s, j.port(local[1]), good.frame, i, f"worker {local[1]}")
        _send(s, j, good, f"message 0 packet {i} intact: the leaf's partial goes up")
        s.expect(up_port, j.between_switches(good.transport, j.total(0, i, local), "leaf1", spine, True, good.ident))
    for i in range(PACKETS):
        template = j.transport(0, 0, i)
        result = j.between_switches(template, j.total(0, i), spine, "leaf1", False, 900 + i)
        bad += _send_corrupted(s, up_port, result, i, f"{spine}, the result")
        s.send(up_port, result, f"{spine}: the result of packet {i}, intact: stored and sent to the local receivers")
        _complete(s, j, Sent(-1, 0, i, 900 + i, result, template), local)
    s.events = {"1": {"contribution": 8, "completion": 4, "partial-up": 4, "result-down": 4, "bad-icrc": bad}}
    return s


def netreduce_leaf_duplicate_result() -> Scenario:
    """A local worker retransmits while its cell's result is on its way down (the go-back-N burst: a go-back-N
    burst). The leaf sends its partial up again; the spine answers it with a second copy of the
    result. The leaf sends the first copy to its local receivers and drops the second (counted as a
    duplicate): one retransmission must not put a duplicate on every local receiver's link."""
    j, s, spine, up_port, local = _at_leaf1("netreduce_leaf_duplicate_result")
    ident = iter(range(700, 10000))
    for i in range(PACKETS):
        _send(s, j, j.packet(local[0], 0, i, next(ident)), f"message 0 packet {i}")
        last = _send(s, j, j.packet(local[1], 0, i, next(ident)), f"message 0 packet {i}: the partial goes up")
        s.expect(up_port, j.between_switches(last.transport, j.total(0, i, local), "leaf1", spine, True, last.ident))
    for i in range(PACKETS):
        again = _send(s, j, j.packet(local[0], 0, i, next(ident)),
                      f"retransmits packet {i} (timed out): its result is still on its way down")
        s.expect(up_port, j.between_switches(again.transport, j.total(0, i, local), "leaf1", spine, True, again.ident))
    for i in range(PACKETS):
        template = j.transport(0, 0, i)
        for n, (copy, note) in enumerate(((900 + i, "the result"),
                                          (950 + i, "its answer to the repeated partial (dropped)"))):
            result = j.between_switches(template, j.total(0, i), spine, "leaf1", False, copy)
            s.send(up_port, result, f"{spine}: {note} of packet {i}")
            if n == 0:
                _complete(s, j, Sent(-1, 0, i, copy, result, template), local)
    s.drops = {"netreduce-refused": PACKETS}
    s.events = {"1": {"contribution": len(local) * PACKETS, "completion": PACKETS, "partial-up": 2 * PACKETS,
                      "result-down": PACKETS, "duplicate": PACKETS}}
    return s


def netreduce_spine_corruption() -> Scenario:
    """The aggregation spine: corrupted partials from the leaves are dropped and counted; the intact
    ones complete the cells and the exact result goes down to both leaves."""
    topo = nr_topology(LEAFSPINE)
    j = NrJob(topo, 1, ["h1", "h2", "h3", "h4"], credits=2)
    spine = place_job(topo, 1, j.hosts, j.credits, []).aggregation_switch
    s = _nr_scenario("netreduce_spine_corruption", [j], LEAFSPINE, spine)
    leaves = {leaf: [r for r, h in enumerate(j.hosts) if topo.attachment(h)[0] == leaf] for leaf in ("leaf1", "leaf2")}
    ident = iter(range(700, 10000))
    bad = 0
    for i in range(PACKETS):
        template = j.transport(0, 0, i)
        for n, (leaf, ranks) in enumerate(leaves.items()):
            partial = j.between_switches(template, j.total(0, i, ranks), leaf, spine, True, next(ident))
            port = topo.ports_between(spine, leaf)[0]
            if n == 1:
                bad += _send_corrupted(s, port, partial, i, f"{leaf}'s partial")
            s.send(port, partial, f"{leaf}: its partial of packet {i}")
        completing = int.from_bytes(partial[18:20], "big")  # the last partial's IPv4 identification
        for leaf in leaves:
            s.expect(topo.ports_between(spine, leaf)[0],
                     j.between_switches(template, j.total(0, i), spine, leaf, False, completing))
    s.events = {"1": {"contribution": 8, "completion": 4, "bad-icrc": bad}}
    return s


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "rack_l3": rack_l3,
    "leaf_ecmp": leaf_ecmp,
    "netreduce_interleavings": netreduce_interleavings,
    "netreduce_recovery": netreduce_recovery,
    "netreduce_refusals": netreduce_refusals,
    "netreduce_two_jobs": netreduce_two_jobs,
    "netreduce_corruption": netreduce_corruption,
    "netreduce_leaf_corruption": netreduce_leaf_corruption,
    "netreduce_spine_corruption": netreduce_spine_corruption,
    "netreduce_leaf_duplicate_result": netreduce_leaf_duplicate_result,
}


def write(s: Scenario, root: Path = HERE) -> Path:
    d = root / s.name
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.pcap"):
        old.unlink()
    ports = sorted({p for p, _ in s.inputs} | set(s.expected))
    for p in ports:
        with (d / f"in_p{p}.pcap").open("wb") as f:
            write_stream(f, [(1_000_000 + i, pkt) for i, (port, pkt) in enumerate(s.inputs) if port == p])
        with (d / f"expected_p{p}.pcap").open("wb") as f:
            write_stream(f, [(1_000_000 + i, pkt) for i, pkt in enumerate(s.expected.get(p, []))])
    meta = {"topology": s.topology, "switch": s.switch, "ports": ports, "drops": s.drops,
            "packet_ins": s.packet_ins, "netreduce": s.netreduce, "events": s.events, "inputs": s.notes}
    (d / "scenario.json").write_text(json.dumps(meta, indent=1) + "\n")
    return d


@dataclass
class Trace:
    """A scenario as read back from its files."""

    name: str
    meta: dict[str, Any]
    inputs: list[tuple[int, bytes]]  # global order
    expected: dict[int, list[bytes]]


def load(name: str, root: Path = HERE) -> Trace:
    d = root / name
    meta = json.loads((d / "scenario.json").read_text())
    timed: list[tuple[int, int, bytes]] = []
    expected: dict[int, list[bytes]] = {}
    for p in meta["ports"]:
        timed += [(ts, p, pkt) for ts, pkt in read_timed(d / f"in_p{p}.pcap")]
        expected[p] = [pkt for _, pkt in read_timed(d / f"expected_p{p}.pcap")]
    return Trace(name, meta, [(p, pkt) for _, p, pkt in sorted(timed)], expected)


def main() -> None:
    for name, make in SCENARIOS.items():
        print(f"{name}: {write(make())}")


if __name__ == "__main__":
    main()
