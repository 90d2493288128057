"""DLCP's selective drop on real BMv2 trims: the payload goes, the headers go on as a drop notification.

Packets of every shape (WRITE First, Middle, Last, Only, with and without ImmDt, payloads the parser
takes as an aggregation packet's or not, a padded one) are marked droppable by a job whose drop
threshold is 0, so the switch trims each one. What comes out is checked three ways: byte for byte
against the notification built independently by gradswitch/roce/wire.py, by scapy (its own ICRC, IPv4 checksum
and lengths), and by tshark's InfiniBand dissector. A notification arriving at the next switch is
neither trimmed nor dropped again and overtakes queued gradient packets (priority 7).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from gradswitch.control.bmv2_thrift import Bmv2Thrift
from gradswitch.control.controls import all_base_entries, dlcp
from gradswitch.control.p4rt import Entity, TableEntry
from gradswitch.control.pcap import write_pcap
from gradswitch.control.routing import switch_port_mac
from gradswitch.control.trace_replay import TraceSwitch
from gradswitch.protocol.dlcp import DROPPABLE, TRIMMED, marking
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import qpn
from gradswitch.roce.headers import Bth, Opcode, Reth, Transport
from gradswitch.roce.scapy_layers import BTH, RETH, ImmDt
from gradswitch.roce.wire import build_frame, parse_frame
from gradswitch.topology.generators import rack

pytestmark = [pytest.mark.bmv2, pytest.mark.tshark]
JOB = 5
TOPO = rack(hosts=2, bw_mbps=1.0)  # port 2's virtual queue drains at 1 Mb/s
H1, H2 = TOPO.host("h1"), TOPO.host("h2")
CS7 = CONFIG.DLCP_ACK_PRIORITY << 3  # the DSCP of a notification
LAYER = 2  # the packets' layer class: priority max(1, 6 - 2) = 4 with the default classes


def entries(threshold: int) -> list[Entity]:
    """The switch's base entries, DLCP priority and drop on for JOB, every priority's threshold `threshold`."""
    base = [e for e in all_base_entries(TOPO, "s1")
            if not (isinstance(e, TableEntry) and e.table.endswith(dlcp.THRESHOLDS))]
    return base + [dlcp.features_entry(JOB, dlcp.Features(priority=True, drop=True))] + dlcp.default_classes(JOB) + \
        dlcp.threshold_entries({p: threshold for p in range(CONFIG.PRIORITY_QUEUES)})


def frame(t: Transport, **kw: int) -> bytes:
    return build_frame(t, H1.ip, H2.ip, H1.mac, H2.mac, **kw)


def transport(op: Opcode, psn: int, payload: int, resv7: int, pad: int = 0) -> Transport:
    reth = Reth(0x10000 + psn * 4096, 0x77, 3 * 4096 + 100) if op in (
        Opcode.WRITE_FIRST, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM) else None
    imm = 0xC0DE0000 | psn if op in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM) else None
    body = bytes((psn + i) & 0xFF for i in range(payload))
    return Transport(Bth(int(op), qpn(1, 0, JOB), psn, resv7=resv7, pad_count=pad), body, reth=reth, imm=imm)


# (opcode, payload bytes, pad): 4096-byte Middle, First and Last-with-ImmDt payloads are exactly an aggregation
# packet's, which the parser takes into hdr.agg; the others stay unparsed behind the headers.
SHAPES = [(Opcode.WRITE_FIRST, 1000, 0), (Opcode.WRITE_MIDDLE, 1000, 0), (Opcode.WRITE_LAST, 700, 0),
          (Opcode.WRITE_ONLY, 300, 0), (Opcode.WRITE_LAST_IMM, 500, 0), (Opcode.WRITE_ONLY_IMM, 200, 0),
          (Opcode.WRITE_MIDDLE, 4096, 0), (Opcode.WRITE_FIRST, 4096, 0), (Opcode.WRITE_LAST_IMM, 4096, 0),
          (Opcode.WRITE_LAST, 998, 2)]


def notification(sent: Transport, ident: int) -> bytes:
    """What the switch must send for a trimmed packet, built here from the RoCE v2 and DLCP definitions:
    the same BTH with TRIMMED set and no padding, the RETH and ImmDt, no payload, its own ICRC; routed (TTL
    63, the port's source MAC) at DSCP CS7."""
    bth = sent.bth
    trimmed = Transport(Bth(bth.opcode, bth.dest_qp, bth.psn, ack_req=bth.ack_req, resv7=bth.resv7 | TRIMMED),
                        b"", reth=sent.reth, imm=sent.imm)
    return build_frame(trimmed, H1.ip, H2.ip, switch_port_mac(0, 2), H2.mac, tos=CS7 << 2, ttl=63, ident=ident)


def tshark_fields(pcap: Path, fields: list[str]) -> list[dict[str, list[str]]]:
    args = [shutil.which("tshark") or "tshark", "-r", str(pcap), "-o", "ip.check_checksum:TRUE", "-T", "json"]
    for f in fields:
        args += ["-e", f]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [p["_source"]["layers"] for p in json.loads(out.stdout)]


def test_the_selective_drop_trims_every_shape_of_packet_to_a_valid_notification(tmp_path):
    sent = [transport(op, 10 + i, size, marking(True, LAYER, 0), pad) for i, (op, size, pad) in enumerate(SHAPES)]
    kept = transport(Opcode.WRITE_MIDDLE, 99, 1000, marking(False, LAYER, 0))  # not droppable: whole
    frames = [frame(t, ident=t.bth.psn) for t in [*sent, kept]]
    sw = TraceSwitch([1, 2], run_dir=tmp_path / "switch")
    sw.start(entries(threshold=0))  # every droppable packet is over the threshold
    try:
        sw.replay([(1, f) for f in frames])
        sw.wait({2: len(frames)}, timeout=60)
    finally:
        result = sw.stop(counters=[dlcp.EVENTS])
    out = {Ether(p)[BTH].psn: p for p in result.out(2)}
    assert sorted(out) == sorted(t.bth.psn for t in [*sent, kept])
    assert result.drops == {}  # nothing is dropped whole
    base = JOB * CONFIG.DLCP_EVENTS
    events = result.counters[dlcp.EVENTS]
    assert events.get(base + CONFIG.DLCP_EV_DROPPED) == len(sent)  # counted as dropped: their payloads
    assert events.get(base + CONFIG.DLCP_EV_KEPT) is None

    whole = Ether(out[kept.bth.psn])
    assert len(out[kept.bth.psn]) == len(frames[-1]) and whole[IP].tos >> 2 == (6 - LAYER) << 3
    assert parse_frame(out[kept.bth.psn]).transport.payload == kept.payload

    for t in sent:
        got = out[t.bth.psn]
        name = f"{Opcode(t.bth.opcode).name} {len(t.payload)} B"
        assert got == notification(t, t.bth.psn), name  # byte for byte
        ext = (16 if t.reth else 0) + (4 if t.imm is not None else 0)
        pkt = Ether(got)
        assert len(got) == 14 + 20 + 8 + 12 + ext + 4, name
        assert (pkt[IP].len, pkt[UDP].len) == (20 + 8 + 12 + ext + 4, 8 + 12 + ext + 4), name
        assert pkt[IP].tos >> 2 == CS7 and pkt[IP].ttl == 63, name
        assert pkt[BTH].opcode == t.bth.opcode and pkt[BTH].padcount == 0, name
        assert pkt[BTH].resv7 == t.bth.resv7 | TRIMMED and pkt[BTH].resv7 & DROPPABLE, name
        if t.reth:
            assert (pkt[RETH].va, pkt[RETH].rkey, pkt[RETH].dlen) == (t.reth.virtual_addr, t.reth.rkey,
                                                                       t.reth.dma_length), name
        else:
            assert RETH not in pkt, name
        if t.imm is not None:
            assert pkt[ImmDt].imm == t.imm, name
        checked = Ether(got)  # scapy's own ICRC and IPv4 checksum over the packet's fields
        checked[BTH].icrc = None
        del checked[IP].chksum
        assert raw(checked) == got, name
        parsed = parse_frame(got)  # the hosts' parser: a valid ICRC, an empty payload
        assert parsed.icrc_ok and parsed.transport.payload == b"", name

    # tshark, an independent decoder, reads the same.
    pcap = tmp_path / "notifications.pcap"
    write_pcap(pcap, [out[t.bth.psn] for t in sent])
    decoded = tshark_fields(pcap, ["ip.len", "ip.dsfield.dscp", "ip.checksum.status", "udp.length",
                                   "infiniband.bth.opcode", "infiniband.bth.psn", "infiniband.bth.padcnt",
                                   "infiniband.bth.reserved7", "infiniband.reth.va", "infiniband.reth.dmalen",
                                   "infiniband.immdt", "infiniband.invariant.crc", "_ws.malformed",
                                   "_ws.expert.severity"])
    assert len(decoded) == len(sent)
    for t, d in zip(sent, decoded, strict=True):
        name = Opcode(t.bth.opcode).name
        ext = (16 if t.reth else 0) + (4 if t.imm is not None else 0)
        assert "_ws.malformed" not in d and "error" not in " ".join(d.get("_ws.expert.severity", [])), (name, d)
        assert int(d["ip.len"][0]) == 44 + ext and int(d["udp.length"][0]) == 24 + ext, (name, d)
        assert int(d["ip.dsfield.dscp"][0]) == CS7 and d["ip.checksum.status"] == ["1"], (name, d)  # 1: good
        assert int(d["infiniband.bth.opcode"][0]) == t.bth.opcode and int(d["infiniband.bth.psn"][0]) == t.bth.psn
        assert int(d["infiniband.bth.padcnt"][0], 0) == 0
        assert int(d["infiniband.bth.reserved7"][0]) == t.bth.resv7 | TRIMMED
        assert int(d["infiniband.invariant.crc"][0], 0) == int.from_bytes(out[t.bth.psn][-4:], "big")
        assert ("infiniband.reth.va" in d) == (t.reth is not None), (name, d)
        if t.reth is not None:
            assert int(d["infiniband.reth.va"][0], 0) == t.reth.virtual_addr
            assert int(d["infiniband.reth.dmalen"][0]) == t.reth.dma_length
        assert ("infiniband.immdt" in d) == (t.imm is not None), (name, d)
        if t.imm is not None:
            assert int(d["infiniband.immdt"][0].replace(":", ""), 16) == t.imm


def test_a_notification_is_not_trimmed_again_and_overtakes_queued_gradients(tmp_path):
    """At the next switch (threshold 0 again: any droppable packet would be trimmed) the notification keeps its
    bytes (but TTL, source MAC), is counted neither kept nor dropped, and leaves at priority 7: ahead of the
    packets queued at the layer's priority."""
    gradients = [transport(Opcode.WRITE_MIDDLE, psn, 1000, marking(False, LAYER, 0)) for psn in range(12)]
    arrived = Transport(Bth(int(Opcode.WRITE_FIRST), qpn(1, 0, JOB), 100, resv7=marking(True, LAYER, 0) | TRIMMED),
                        b"", reth=Reth(0x10000, 0x77, 5000))
    sw = TraceSwitch([1, 2], run_dir=tmp_path / "switch")
    sw.start(entries(threshold=0))
    try:
        with Bmv2Thrift(sw.address.thrift_port) as thrift:
            for prio in range(CONFIG.PRIORITY_QUEUES):
                thrift.set_queue_rate(2, 100, priority=prio)  # every queue of port 2: 100 packets/s
        sw.replay([(1, frame(t, ident=t.bth.psn)) for t in gradients] + [(1, frame(arrived, ident=7))])
        sw.wait({2: 13}, timeout=60)
    finally:
        result = sw.stop(counters=[dlcp.EVENTS])
    out = [Ether(p) for p in result.out(2)]
    psns = [p[BTH].psn for p in out]
    assert sorted(psns) == [*range(12), 100]
    assert psns.index(100) <= 3, psns  # after at most the gradients already on their way
    got = bytes(out[psns.index(100)])
    # Forwarded as it came (routed, CS7): its ICRC, lengths and bits untouched.
    routed = build_frame(arrived, H1.ip, H2.ip, switch_port_mac(0, 2), H2.mac, tos=CS7 << 2, ttl=63, ident=7)
    assert got == routed
    events = result.counters[dlcp.EVENTS]
    base = JOB * CONFIG.DLCP_EVENTS
    assert events.get(base + CONFIG.DLCP_EV_DROPPED) is None and events.get(base + CONFIG.DLCP_EV_KEPT) is None
    assert result.drops == {}
