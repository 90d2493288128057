"""NetReduce k of N on real BMv2 (gradswitch/p4src/include/controls/netreduce.p4, judge_late): workers' RoCE packets
into one switch programmed with the entries the controller installs for a job of 4 workers that aggregates 3 of them,
the switch's output compared byte for byte with what docs/faults.md ("Stragglers: k of N") says it must send.

A cell's sum leaves once k members are in, to every receiver, and its Last packet names the members it holds in
its ImmDt (bits 16 and up, member bit = rank); a member's whole message is in or out, decided at its first packet;
a late packet is never added: answered with the sum on its connection only when its cell holds it, else dropped
and counted. A job of N of N is untouched (tests/bmv2/test_traces.py replays its committed traces byte for byte).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import pytest

from gradswitch.control.controls import all_base_entries
from gradswitch.control.controls import netreduce as nr
from gradswitch.control.netreduce_jobs import place_job
from gradswitch.control.trace_replay import TraceSwitch, run_trace
from gradswitch.protocol.netreduce import IMM_MEMBERS_SHIFT, PACKETS, JobLayout
from gradswitch.roce.wire import parse_frame
from tests.packet_diff import diff
from tests.traces.netreduce_scenarios import NrJob, Sent, topology

pytestmark = [pytest.mark.bmv2]
JOB = 7
K = 3


@dataclass
class QuorumJob(NrJob):
    """An NrJob that aggregates `quorum` of its workers."""

    quorum: int = K

    @property
    def layout(self) -> JobLayout:
        return JobLayout(self.job, len(self.hosts), self.credits, quorum=self.quorum)

    def copy(self, receiver: int, completing: Sent, ranks: list[int]) -> bytes:
        """The result on `receiver`'s connection: the sum of `ranks`, its Last packet naming them."""
        t = completing.transport
        if t.imm is not None:
            bitmap = sum(1 << r for r in ranks)
            t = replace(t, imm=(t.imm & ((1 << IMM_MEMBERS_SHIFT) - 1)) | bitmap << IMM_MEMBERS_SHIFT)
        return self.result_for(receiver, replace(completing, transport=t), self.total(completing.k, completing.i,
                                                                                       ranks))


def test_k_of_n_emits_at_the_kth_names_the_contributors_and_never_adds_a_late_one(tmp_path):
    topo = topology()
    j = QuorumJob(topo, JOB, ["h1", "h2", "h3", "h4"], credits=2)
    n = len(j.hosts)
    job = place_job(topo, JOB, j.hosts, j.credits, [], quorum=K)
    entries = all_base_entries(topo, "s1") + job.switches["s1"].entries
    inputs: list[tuple[int, bytes]] = []
    expected: dict[int, list[bytes]] = {j.port(r): [] for r in range(n)}
    ident = 1

    def send(r: int, k: int, i: int) -> Sent:
        nonlocal ident
        s = j.packet(r, k, i, ident)
        ident += 1
        inputs.append((j.port(r), s.frame))
        return s

    # Message 0: ranks 0, 1, 2 complete every cell (the 3rd is the kth), every receiver gets the sum of the three;
    # rank 3's message comes after: each packet late, answered with the sum on its own connection (to rank 0) only.
    for i in range(PACKETS):
        for r in (0, 1, 2):
            s = send(r, 0, i)
        for receiver in range(n):
            expected[j.port(receiver)].append(j.copy(receiver, s, [0, 1, 2]))
    for i in range(PACKETS):
        s = send(3, 0, i)
        expected[j.port(j.layout.peer(3))].append(j.copy(j.layout.peer(3), s, [0, 1, 2]))
    # Message 1: rank 3's first packet is in (with 0 and 1), rank 2's is late; rank 2's later packets are out even
    # when they reach a cell first (dropped: that cell has no sum yet), and ranks 3, 0, 1 complete each cell.
    for r in (3, 0, 1):
        s = send(r, 1, 0)
    for receiver in range(n):
        expected[j.port(receiver)].append(j.copy(receiver, s, [0, 1, 3]))
    s = send(2, 1, 0)
    expected[j.port(j.layout.peer(2))].append(j.copy(j.layout.peer(2), s, [0, 1, 3]))
    for i in range(1, PACKETS):
        send(2, 1, i)
        for r in (3, 0, 1):
            s = send(r, 1, i)
        for receiver in range(n):
            expected[j.port(receiver)].append(j.copy(receiver, s, [0, 1, 3]))
    late_dropped = PACKETS - 1
    result = run_trace([j.port(r) for r in range(n)], entries, inputs, {p: len(v) for p, v in expected.items()},
                       run_dir=tmp_path / "sw", drops=late_dropped, counters=[nr.JOB_EVENTS])
    problems = [d for p, want in expected.items() if (d := diff(result.out(p), want, f"port {p}"))]
    assert not problems, "\n".join(problems)
    assert sum(result.drops.values()) == late_dropped
    events = nr.events_by_owner(result.counters[nr.JOB_EVENTS])[JOB]
    assert events == {"contribution": 2 * PACKETS * K, "completion": 2 * PACKETS,
                      "late-answered": PACKETS + 1, "late": late_dropped}
    # Every receiver reads the contributors from the Last packets it got.
    for r in range(n):
        lasts = [parse_frame(f).transport.imm for f in result.out(j.port(r))]
        named = [j.layout.contributors(imm) for imm in lasts if imm is not None]
        assert set(named) <= {(0, 1, 2), (0, 1, 3)} and named


def test_k_of_n_is_refused_where_a_leaf_would_have_to_choose(tmp_path):
    """On a leaf-spine fabric a leaf cannot know which k of the job's N are in: placing such a job says so."""
    from gradswitch.topology.model import TopologyError
    from tests.traces.netreduce_scenarios import LEAFSPINE

    topo = topology(LEAFSPINE)
    with pytest.raises(TopologyError, match="needs every worker on one switch"):
        place_job(topo, JOB, ["h1", "h2", "h3", "h4"], 2, [], quorum=K)


DEADLINE_US = 100_000
QUIET_S = 3 * DEADLINE_US / 1e6  # the stimulus: the switch's clock passes the deadline between the two stages


def test_a_deadline_closes_a_cell_with_fewer_than_k_on_a_members_retransmission(tmp_path):
    """3 of 4 with a deadline: message 0 has 2 contributors when the deadline passes. Before it, a member's packet
    again is a duplicate (dropped); after it, the member's retransmission of the message's first packet closes that
    cell, the sum of the 2 leaving to every receiver, named in the Last packet; each later packet of the message
    closes its cell too, as it holds exactly the first cell's members. Message 1 completes at its 3rd, as before."""
    topo = topology()
    j = QuorumJob(topo, JOB, ["h1", "h2", "h3", "h4"], credits=2)
    n = len(j.hosts)
    job = place_job(topo, JOB, j.hosts, j.credits, [], quorum=K, deadline_us=DEADLINE_US)
    assert job.layout.k_of_n and job.layout.deadline_us == DEADLINE_US
    entries = all_base_entries(topo, "s1") + job.switches["s1"].entries
    expected: dict[int, list[bytes]] = {j.port(r): [] for r in range(n)}
    ident = 1

    def sent(r: int, k: int, i: int) -> tuple[int, bytes, Sent]:
        nonlocal ident
        s = j.packet(r, k, i, ident)
        ident += 1
        return j.port(r), s.frame, s

    early = ([sent(1, 0, i) for i in range(PACKETS)] + [sent(2, 1, i) for i in range(PACKETS)]
             + [sent(1, 1, i) for i in range(PACKETS)] + [sent(1, 0, 0)] + [sent(0, 0, i) for i in range(PACKETS)])
    again = [sent(0, 0, i) for i in range(PACKETS)]  # rank 0's retransmission of message 0, after the deadline
    message1 = [sent(0, 1, i) for i in range(PACKETS)]
    for _, _, s in again:
        for receiver in range(n):
            expected[j.port(receiver)].append(j.copy(receiver, s, [0, 1]))
    for _, _, s in message1:
        for receiver in range(n):
            expected[j.port(receiver)].append(j.copy(receiver, s, [0, 1, 2]))
    switch = TraceSwitch([j.port(r) for r in range(n)], run_dir=tmp_path / "sw")
    switch.start(entries)
    try:
        switch.replay_stages([[(p, f) for p, f, _ in early], [(p, f) for p, f, _ in again + message1]],
                             lambda _stage: time.sleep(QUIET_S))
        switch.wait({p: len(v) for p, v in expected.items()}, drops=1)
    finally:
        result = switch.stop([nr.JOB_EVENTS])
    problems = [d for p, want in expected.items() if (d := diff(result.out(p), want, f"port {p}"))]
    assert not problems, "\n".join(problems)
    assert sum(result.drops.values()) == 1  # rank 1's packet again before the deadline
    events = nr.events_by_owner(result.counters[nr.JOB_EVENTS])[JOB]
    assert events == {"contribution": 5 * PACKETS, "completion": 2 * PACKETS, "deadline": PACKETS, "duplicate": 1}
    for r in range(n):
        lasts = [parse_frame(f).transport.imm for f in result.out(j.port(r))]
        assert [j.layout.contributors(imm) for imm in lasts if imm is not None] == [(0, 1), (0, 1, 2)]
