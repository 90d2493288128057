"""NetReduce reduce-scatter and all-gather on real BMv2 (gradswitch/p4src/include/controls/netreduce_scatter.p4):
workers' RoCE packets into one switch programmed with the entries the controller installs for a job that scatters (or
gathers), the switch's output compared byte for byte with what docs/netreduce.md says it must send, built here with our
RoCE packet code.

A reduce-scatter message names its owner in its first packet's RETH; the owner gets the sum whole on its incoming
connection, every other receiver the same packet trimmed to its headers (a drop notification its RC responder
takes as zeros). An all-gather message's owner sends the values and every other rank a placeholder (its packets'
headers, marked trimmed), which the switch takes as zeros: every receiver but the owner gets the owner's values
whole, the owner its headers. An all-reduce message of the same job still goes whole to everyone; a retransmission
for a complete cell is answered on its connection alone, whole or trimmed as that receiver's first copy was. On a
leaf-spine fabric, the partial a leaf sends up and the result the spine sends down stay whole, and the leaf trims
the result for its local receivers as a flat switch does. tshark decodes every copy as RoCE v2 with its
receiver's QP.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from scapy.compat import raw
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from gradswitch.control.controls import all_base_entries
from gradswitch.control.controls import netreduce as nr
from gradswitch.control.netreduce_jobs import place_job
from gradswitch.control.pcap import write_pcap
from gradswitch.control.trace_replay import run_trace
from gradswitch.protocol.dlcp import TRIMMED
from gradswitch.protocol.netreduce import MESSAGE_BYTES, PACKET_BYTES, PACKETS, JobLayout
from gradswitch.protocol.qpn import qpn
from gradswitch.roce.headers import Opcode, Reth, Transport
from gradswitch.roce.scapy_layers import BTH
from gradswitch.roce.wire import ETH_HEADER_LEN, build_frame, parse_frame
from tests.packet_diff import diff
from tests.traces.netreduce_scenarios import LEAFSPINE, NrJob, Sent, topology

pytestmark = [pytest.mark.bmv2]
JOB = 6


@dataclass
class OwnedJob(NrJob):
    """An NrJob whose messages may name an owner (k -> owner rank; absent: an all-reduce message), reduce-scatter
    ones, or all-gather ones when `gather`."""

    owners: dict[int, int] | None = None
    gather: bool = False

    @property
    def layout(self) -> JobLayout:
        return JobLayout(self.job, len(self.hosts), self.credits, scatter=not self.gather, gather=self.gather)

    def owner(self, k: int) -> int | None:
        return (self.owners or {}).get(k)

    def transport(self, rank: int, k: int, i: int, payload: bytes | None = None, opcode: Opcode | None = None
                  ) -> Transport:
        """What rank sends: an owned message's first packet names its owner; an all-gather message the rank
        does not own goes as a placeholder (its headers alone, marked trimmed), unless a payload is given (a
        retransmission, which goes whole)."""
        t = super().transport(rank, k, i, payload, opcode)
        owner = self.owner(k)
        if owner is None:
            return t
        if t.reth is not None:
            t = replace(t, reth=Reth(self.layout.owner_va(k, owner), self.layout.rkey, MESSAGE_BYTES))
        if self.gather and rank != owner and payload is None:
            t = replace(t, bth=replace(t.bth, resv7=t.bth.resv7 | TRIMMED), payload=b"")
        return t

    def total(self, k: int, i: int, ranks: list[int] | None = None) -> np.ndarray:
        """The sum of what the ranks sent: an all-gather message's owner's values alone (placeholders are zeros)."""
        owner = self.owner(k)
        if self.gather and owner is not None:
            ranks = [r for r in (ranks if ranks is not None else range(len(self.hosts))) if r == owner]
        return super().total(k, i, ranks)

    def copy_for(self, receiver: int, completing: Sent, total: np.ndarray) -> bytes:
        """What `receiver` must get of a completed cell: the result whole (made from the completing packet, a
        placeholder's trimmed mark cleared) if it is the receiver's (all-reduce; reduce-scatter: it owns it;
        all-gather: it does not), else its headers, trimmed (no payload, its own ICRC, in the whole copy's class)."""
        t = completing.transport
        completing = replace(completing, transport=replace(t, bth=replace(t.bth, resv7=t.bth.resv7 & ~TRIMMED)))
        whole = self.result_for(receiver, completing, total)
        owner = self.owner(completing.k)
        if owner is None or (owner == receiver) != self.gather:
            return whole
        return trimmed(whole)


def trimmed(frame: bytes) -> bytes:
    """The frame as NetReduce's trimming sends it: the same headers, TRIMMED set, no payload, and the whole copy's
    DSCP (its connection's class: a copy in a higher one would overtake the whole copies queued before it)."""
    d = parse_frame(frame)
    t = d.transport
    bth = replace(t.bth, pad_count=0, resv7=t.bth.resv7 | TRIMMED)
    out = build_frame(Transport(bth, b"", reth=t.reth, imm=t.imm), d.src, d.dst, mac(frame, 6), mac(frame, 0),
                      tos=d.tos, ttl=d.ttl, ident=d.ident, src_port=d.src_port)
    return out


def mac(frame: bytes, at: int) -> str:
    return ":".join(f"{b:02x}" for b in frame[at : at + 6])


def tshark_fields(pcap: Path, fields: list[str]) -> list[dict[str, list[str]]]:
    args = [shutil.which("tshark") or "tshark", "-r", str(pcap), "-T", "json"]
    for f in fields:
        args += ["-e", f]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [p["_source"]["layers"] for p in json.loads(out.stdout)]


@pytest.mark.tshark
@pytest.mark.parametrize("gather", [False, True], ids=["reduce-scatter", "all-gather"])
def test_rack_sends_each_message_whole_where_it_belongs_and_trimmed_elsewhere(tmp_path, gather):
    topo = topology()
    owners = {0: 1, 2: 3}  # message 0 is rank 1's shard, message 1 an all-reduce one, message 2 rank 3's shard
    j = OwnedJob(topo, JOB, ["h1", "h2", "h3", "h4"], credits=4, owners=owners, gather=gather)  # (4: no twin reused)
    n = len(j.hosts)
    job = place_job(topo, JOB, j.hosts, j.credits, [], scatter=not gather, gather=gather)
    entries = all_base_entries(topo, "s1") + job.switches["s1"].entries
    inputs: list[tuple[int, bytes]] = []
    expected: dict[int, list[bytes]] = {j.port(r): [] for r in range(n)}
    ident = 1
    for k in range(3):
        owner = owners.get(k)
        order = [r for r in range(n) if r != owner] + ([owner] if owner is not None else [])
        for i in range(PACKETS):
            for r in order:  # (an owned message's owner last: an all-gather placeholder may not complete a cell)
                s = j.packet(r, k, i, ident)
                ident += 1
                inputs.append((j.port(r), s.frame))
            total = j.total(k, i)
            for receiver in range(n):  # the last contribution completes the cell
                expected[j.port(receiver)].append(j.copy_for(receiver, s, total))
    # Retransmissions for complete cells: answered on the sender's connection alone, as its receiver's first copy.
    for r, k, i in [(0, 0, 0), (2, 0, 1), (1, 1, 3)]:
        s = j.packet(r, k, i, ident, payload=bytes(PACKET_BYTES))  # (an all-gather placeholder is resent whole)
        ident += 1
        inputs.append((j.port(r), s.frame))
        receiver = j.layout.peer(r)
        expected[j.port(receiver)].append(j.copy_for(receiver, s, j.total(k, i)))
    result = run_trace([j.port(r) for r in range(n)], entries, inputs, {p: len(v) for p, v in expected.items()},
                       run_dir=tmp_path / "sw", counters=[nr.JOB_EVENTS])
    problems = [d for p, want in expected.items() if (d := diff(result.out(p), want, f"port {p}"))]
    assert not problems, "\n".join(problems)
    assert result.drops == {}
    events = nr.events_by_owner(result.counters[nr.JOB_EVENTS])[JOB]
    assert events == {"contribution": 3 * PACKETS * n, "completion": 3 * PACKETS, "retransmitted-result": 3}

    # Every copy, whole or trimmed, is a valid RoCE v2 packet on its receiver's connection: our parser (ICRC),
    # scapy (its own ICRC), tshark (an independent dissector: BTH with the receiver's QP, nothing malformed).
    made = [(r, f) for r in range(n) for f in result.out(j.port(r))]
    trimmed_copies = [(r, f) for r, f in made if parse_frame(f).transport.trimmed]
    # Messages 0 and 2: N-1 trimmed copies of each packet (reduce-scatter) or 1 (all-gather: the owner's); the
    # answers: rank 1 owns (0, 0), rank 3 does not own (0, 1) (one of the two trimmed either way), rank 2 gets
    # the all-reduce (1, 3) whole.
    assert len(trimmed_copies) == 2 * PACKETS * (1 if gather else n - 1) + 1
    # One class for every copy, whole or trimmed (a result's, CS0): a trimmed copy in a higher class (DLCP's drop
    # notifications' CS7) would leave before the whole copies queued ahead of it on its connection.
    assert {parse_frame(f).tos >> 2 for _, f in made} == {0}
    for r, f in made:
        parsed = parse_frame(f)
        assert parsed.icrc_ok and parsed.transport.bth.dest_qp == qpn(r, j.layout.sender_to(r), JOB)
        pkt = Ether(f)
        pkt[BTH].icrc = None
        del pkt[IP].chksum
        assert raw(pkt) == f
    pcap = tmp_path / "copies.pcap"
    write_pcap(pcap, [f for _, f in made])
    decoded = tshark_fields(pcap, ["infiniband.bth.destqp", "infiniband.bth.opcode", "_ws.malformed"])
    assert len(decoded) == len(made)
    for (r, _), layers in zip(made, decoded, strict=True):
        assert "_ws.malformed" not in layers
        assert int(layers["infiniband.bth.destqp"][0], 0) == qpn(r, j.layout.sender_to(r), JOB)


def test_a_placeholder_never_completes_a_cell_its_whole_resend_does(tmp_path):
    """An all-gather placeholder that would complete a cell is refused (BMv2 cannot grow it by a payload to
    send it on), touching nothing; its sender's whole retransmission completes the cell: the owner's values go
    whole to the other rank and trimmed to the owner."""
    topo = topology()
    j = OwnedJob(topo, JOB, ["h1", "h2"], credits=2, owners={0: 1}, gather=True)
    job = place_job(topo, JOB, j.hosts, j.credits, [], gather=True)
    entries = all_base_entries(topo, "s1") + job.switches["s1"].entries
    owner = j.packet(1, 0, 0, 1)
    placeholder = j.packet(0, 0, 0, 2)
    resent = j.packet(0, 0, 0, 3, payload=bytes(PACKET_BYTES))
    assert not placeholder.transport.payload and len(resent.transport.payload) == PACKET_BYTES
    inputs = [(j.port(1), owner.frame), (j.port(0), placeholder.frame), (j.port(0), resent.frame)]
    total = j.total(0, 0)
    expected = {j.port(r): [j.copy_for(r, resent, total)] for r in (0, 1)}
    result = run_trace([j.port(0), j.port(1)], entries, inputs, {p: len(v) for p, v in expected.items()},
                       run_dir=tmp_path / "sw", drops=1, counters=[nr.JOB_EVENTS])
    problems = [d for p, want in expected.items() if (d := diff(result.out(p), want, f"port {p}"))]
    assert not problems, "\n".join(problems)
    assert parse_frame(result.out(j.port(1))[0]).transport.trimmed  # the owner's
    assert not parse_frame(result.out(j.port(0))[0]).transport.trimmed
    assert nr.events_by_owner(result.counters[nr.JOB_EVENTS])[JOB] == {"contribution": 2, "completion": 1,
                                                                        "placeholder-last": 1}


@pytest.mark.parametrize("placed", ["all-reduce", "reduce-scatter"])
def test_a_job_refuses_what_it_was_not_placed_for(tmp_path, placed):
    """A RETH naming an owner on a job placed for all-reduce alone is malformed, as any address beyond the
    window; so is an all-gather placeholder (headers alone) on a job that does not all-gather."""
    topo = topology()
    j = OwnedJob(topo, JOB, ["h1", "h2"], credits=2, owners={0: 1}, gather=placed == "reduce-scatter")
    job = place_job(topo, JOB, j.hosts, j.credits, [], scatter=placed == "reduce-scatter")
    entries = all_base_entries(topo, "s1") + job.switches["s1"].entries
    s = j.packet(0, 0, 0, 1)  # rank 0's first packet of message 0 (rank 1's: a placeholder when gathering)
    result = run_trace([j.port(0), j.port(1)], entries, [(j.port(0), s.frame)], {}, run_dir=tmp_path / "sw", drops=1,
                       counters=[nr.JOB_EVENTS])
    assert nr.events_by_owner(result.counters[nr.JOB_EVENTS])[JOB] == {"malformed": 1}


@pytest.mark.parametrize("gather", [False, True], ids=["reduce-scatter", "all-gather"])
def test_leaf_sends_partials_up_whole_and_trims_the_result_for_its_local_receivers(tmp_path, gather):
    """Leaf leaf1 of a 2x2 leaf-spine with ranks 0 and 1 (h1, h2) of a 4-rank job: the local sum goes up whole;
    the spine's result for message 0 (rank 1's shard) comes down whole, and the leaf sends it whole to rank 1
    and trimmed to rank 0 (reduce-scatter), or the other way round (all-gather); ranks 2 and 3 are on the
    other leaf."""
    topo = topology(LEAFSPINE)
    hosts = ["h1", "h2", "h3", "h4"]
    j = OwnedJob(topo, JOB, hosts, credits=2, owners={0: 1}, gather=gather)
    job = place_job(topo, JOB, hosts, j.credits, [], scatter=not gather, gather=gather)
    leaf, spine = "leaf1", job.aggregation_switch
    entries = all_base_entries(topo, leaf) + job.switches[leaf].entries
    up_port, _ = topo.ports_between(leaf, spine)
    ports = sorted({j.port(0), j.port(1), up_port})
    inputs: list[tuple[int, bytes]] = []
    ups: list[bytes] = []
    downs: dict[int, list[bytes]] = {0: [], 1: []}
    ident = 1
    for i in range(PACKETS):
        for r in (0, 1):
            s = j.packet(r, 0, i, ident)
            ident += 1
            inputs.append((j.port(r), s.frame))
        whole = replace(s.transport, bth=replace(s.transport.bth, resv7=s.transport.bth.resv7 & ~TRIMMED))
        ups.append(j.between_switches(whole, j.total(0, i, [0, 1]), leaf, spine, up=True, ident=s.ident))
    for i in range(PACKETS):
        template = j.transport(1, 0, i)  # (the owner's: a whole packet either way)
        down = j.between_switches(template, j.total(0, i), spine, leaf, up=False, ident=100 + i)
        inputs.append((up_port, down))
        completing = Sent(1, 0, i, 100 + i, down, template)
        for r in (0, 1):
            downs[r].append(j.copy_for(r, completing, j.total(0, i)))
    # The leaf's own partials go up (TTL 64 as made); compare the local copies byte for byte.
    result = run_trace(ports, entries, inputs, {up_port: len(ups), j.port(0): PACKETS, j.port(1): PACKETS},
                       run_dir=tmp_path / "sw")
    assert not (d := diff(result.out(up_port), ups, "up")), d
    for r in (0, 1):
        assert not (d := diff(result.out(j.port(r)), downs[r], f"rank {r}")), d
    assert all(parse_frame(f).transport.trimmed != gather for f in result.out(j.port(0)))
    assert all(parse_frame(f).transport.trimmed == gather for f in result.out(j.port(1)))
    assert all(len(f) > ETH_HEADER_LEN + 4096 for f in result.out(up_port))
