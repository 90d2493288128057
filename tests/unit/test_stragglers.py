"""Stragglers (docs/faults.md, "Stragglers: k of N"): the slow-worker factor a worker reads from its run
directory, the link-rate change a slow-worker fault makes, a k-of-N job's layout (its results' ImmDt names the
contributors), the requester that takes an ACK for PSNs the switch delivered on its behalf, and the receiver that
reads each sum as it came, though a later one took its place in the window since."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gradswitch.hosts.collectives.in_network import InNetworkJob
from gradswitch.hosts.comm import Comm, OpGen, Wait
from gradswitch.hosts.iteration import Scheduler
from gradswitch.hosts.netreduce import NetReduceWorker, message_packet
from gradswitch.hosts.netreduce_quorum import QuorumRequester, tag_of
from gradswitch.hosts.slowdown import Slowdown, SlowdownError, read_slowdown, slowdown_path, stretch, write_slowdown
from gradswitch.protocol.netreduce import (
    ELEMENTS,
    IMM_MEMBERS_SHIFT,
    MAX_K_OF_N_WORKERS,
    MESSAGE_ELEMENTS,
    MTU,
    PACKETS,
    JobLayout,
)
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import qpn, udp_source_port
from gradswitch.roce.engine import Engine
from gradswitch.roce.headers import Aeth, Bth, Opcode, Transport
from gradswitch.roce.qp import QpConfig, Requester
from gradswitch.roce.wire import build_ipv4
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.plan import Plan
from tests.inmemory import job, training
from tests.memlink import MemoryHub
from tests.unit.test_training import layers3, one_op_per_layer

# ---- the factor ----


def test_a_worker_reads_the_factor_written_for_it_and_only_when_the_file_changed(tmp_path):
    s = Slowdown(tmp_path, 2)
    assert s.factor() == 1.0  # no file: normal speed
    write_slowdown(tmp_path, 2, 3.0)
    assert s.factor() == 3.0 and read_slowdown(tmp_path, 2) == 3.0
    assert read_slowdown(tmp_path, 1) == 1.0  # another node's file is not this one's
    path = slowdown_path(tmp_path, 2)
    seen = path.stat()
    path.write_text("7.0\n")  # same size, same mtime: not read again
    os.utime(path, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    assert s.factor() == 3.0
    write_slowdown(tmp_path, 2, 1.5)
    assert s.factor() == 1.5
    path.unlink()
    assert s.factor() == 1.0
    assert Slowdown(None, 2).factor() == 1.0


@pytest.mark.parametrize("bad", [0.5, 0.0, -2.0, float("inf"), float("nan")])
def test_a_factor_below_one_or_not_finite_is_refused_in_one_line(tmp_path, bad):
    with pytest.raises(SlowdownError, match=r"slowdown factor .*at least 1 times as long") as e:
        write_slowdown(tmp_path, 0, bad)
    assert "\n" not in str(e.value) and not slowdown_path(tmp_path, 0).exists()


def test_stretch_waits_the_rest_of_factor_times_the_computation():
    assert stretch(0.2, 3.0) == pytest.approx(0.4)
    assert stretch(0.2, 1.0) == 0.0 and stretch(-1.0, 5.0) == 0.0


def test_the_training_scheduler_stretches_every_computation_of_a_slow_iteration():
    """On a simulated clock: forward 1.5 s and backward 4.5 s of layers3; factor 2 from iteration 1 on."""
    from tests.unit.test_training import SimRuntime

    factors = iter([1.0, 2.0])
    p = Plan(tuple(layers3()), tuple(one_op_per_layer()), (2, 1, 0), (100, 100, 100))
    rt = SimRuntime({0: 0.1, 1: 0.1, 2: 0.1})
    s = Scheduler(p, training(dilation=1.0), rt, timeout=1000, slowdown=lambda: next(factors))  # type: ignore[arg-type]
    t = s.run(2)
    assert t[0].compute_s == pytest.approx(4.5) and t[1].compute_s == pytest.approx(9.0)


# ---- the link ----


def test_a_link_rate_change_changes_every_class_of_the_tree_in_place():
    from gradswitch.net.shaping import HOST_CLASSES, SWITCH_CLASSES, htb_commands, rate_commands

    cmds = rate_commands("h3-eth0", 2.5, HOST_CLASSES)
    assert all(c.startswith(("tc class change", "tc qdisc change")) for c in cmds)
    assert "rate 2.5mbit ceil 2.5mbit" in cmds[0]
    made = {c.split("classid ")[1].split()[0] for c in htb_commands("h3-eth0", 20) if "classid" in c}
    changed = {c.split("classid ")[1].split()[0] for c in cmds if "classid" in c}
    assert changed == made  # every class the tree has, none it lacks
    assert len([c for c in rate_commands("s1-eth1", 5, SWITCH_CLASSES) if "bfifo" in c]) == CONFIG.PRIORITY_QUEUES


# ---- k of N: the layout ----


def test_a_k_of_n_layout_sends_the_message_in_the_low_bits_and_reads_the_contributors_above():
    lay = JobLayout(1, 4, 2, quorum=3)
    assert lay.k_of_n and lay.need == 3
    k = 0x12345
    assert lay.imm(k) == k & 0xFFFF
    got = lay.imm(k) | 0b1011 << IMM_MEMBERS_SHIFT  # what the switch makes of it
    assert lay.imm_message(got) == lay.imm(k) and lay.contributors(got) == (0, 1, 3)
    full = JobLayout(1, 4, 2)
    assert not full.k_of_n and full.imm(k) == k and full.contributors(full.imm(k)) == (0, 1, 2, 3)
    assert JobLayout(1, 4, 2, quorum=4).imm(k) == k  # k = N is N of N


@pytest.mark.parametrize(("workers", "quorum", "scatter", "match"), [
    (4, 0, False, "k = 0 of 4"), (4, 5, False, "k = 5 of 4"),
    (MAX_K_OF_N_WORKERS + 1, 2, False, "at most 16"), (4, 3, True, "all-reduce jobs")])
def test_a_k_of_n_job_it_cannot_run_is_refused(workers, quorum, scatter, match):
    with pytest.raises(ValueError, match=match):
        JobLayout(1, workers, 2, scatter=scatter, quorum=quorum)


def test_a_result_is_found_by_its_message_whatever_contributors_it_names():
    lay = JobLayout(1, 4, 2, quorum=3)
    tags = {lay.imm(5) | 0b0111 << IMM_MEMBERS_SHIFT: object()}
    assert tag_of(lay, tags, 5) == lay.imm(5) | 0b0111 << IMM_MEMBERS_SHIFT  # type: ignore[arg-type]
    assert tag_of(lay, tags, 6) is None  # type: ignore[arg-type]


def test_the_switch_program_and_python_agree_on_the_immdt_split():
    assert IMM_MEMBERS_SHIFT + MAX_K_OF_N_WORKERS <= 32
    assert CONFIG.NR_KOFN_MAX_MEMBERS <= CONFIG.AGG_MAX_MEMBERS


# ---- k of N: the requester ----


def ack(psn: int) -> Transport:
    return Transport(Bth(Opcode.ACKNOWLEDGE, 1, psn), aeth=Aeth.ack(0))


@pytest.mark.parametrize("cls", [Requester, QuorumRequester])
def test_an_ack_past_what_was_sent_settles_what_is_posted_only_on_a_k_of_n_qp(cls):
    """The receiver has PSNs 0..7 (the switch delivered the sums on this connection) while this side sent 0..3 of
    message 0 and has not posted message 1: an RC requester ignores the ACK and will retransmit; a k-of-N one settles
    message 0, and message 1 when it is posted, without sending it."""
    req = cls(QpConfig(qpn=1, remote_qpn=2, mtu=256, ack_every=100))
    req.post_write(bytes(1024), 0, 1)
    assert len(req.transmit(0.0)) == 4
    req.on_ack(ack(7), 0.01)
    if cls is Requester:
        assert req.una == 0 and req.counters["invalid_acks"] == 1
        return
    assert req.una == 4 and req.idle() and len(req.completions) == 1
    req.post_write(bytes(1024), 1024, 1)  # message 1: its sum was delivered already
    assert req.idle() and req.transmit(0.02) == [] and len(req.completions) == 2
    assert req.counters["settled_unsent"] == 4
    req.post_write(bytes(1024), 2048, 1)  # message 2: not delivered, sent as usual
    assert len(req.transmit(0.03)) == 4 and not req.idle()
    req.on_ack(ack(11), 0.04)  # within what was sent: RC's own acknowledgement
    assert req.idle() and req.counters["invalid_acks"] == 0


# ---- k of N: the receiver ----


def late_rank0(held: dict[int, int], acknowledged: bool = True
               ) -> tuple[NetReduceWorker, dict[int, Int32Array], Callable[[], None]]:
    """Rank 0's NetReduce worker of a 3-of-4 job with credits 1 (a window of 2 messages: message k + 2 lands where
    message k did), on an in-memory network where the other three ranks have finished messages 0.. without it:
    their sums (message -> the bitmap of the ranks each holds, `held`) are on rank 3's connection to rank 0, and
    rank 1 (rank 0's peer, which holds those sums on rank 0's connection) has acknowledged them all, none of it
    taken yet. Rank 0's receiver acknowledges whatever comes whenever it polls (the others' credits), also while no
    operation of its reads (an operation waiting for its writes' acknowledgements, the graph's computation, the
    loop's drain), so the others may run that far ahead. The worker, each message's sum, and what delivers rank 1's
    acknowledgement (`acknowledged`: delivered already)."""
    cfg = job("netreduce", 4, mtu=MTU, job_id=3, credits=1, netreduce_k=3)
    hub = MemoryHub()
    ips = [n.ip for n in cfg.workers]
    for ip in ips:
        hub.link(ip)
    worker = NetReduceWorker(Comm(cfg, cfg.workers[0], Engine(hub.link(ips[0]), ips[0])))
    lay = worker.layout
    assert lay.k_of_n and lay.window(0) == lay.window(2) != lay.window(1)
    sums: dict[int, Int32Array] = {k: np.arange(MESSAGE_ELEMENTS, dtype=np.int32) * (k + 1) + 1000 * k for k in held}
    for k, bitmap in held.items():  # the switch's results on rank 3's connection to rank 0
        wire = sums[k].astype(">i4").tobytes()
        for i in range(PACKETS):
            t = message_packet(lay, 3, k, i, wire[i * ELEMENTS * 4 : (i + 1) * ELEMENTS * 4])
            if t.imm is not None:
                t = replace(t, imm=lay.imm(k) | bitmap << IMM_MEMBERS_SHIFT)
            hub.deliver(build_ipv4(t, ips[3], ips[0], src_port=udp_source_port(qpn(3, 0, lay.job))), ips[0])
    last = max(held)
    ack = Transport(Bth(Opcode.ACKNOWLEDGE, qpn(0, 1, lay.job), lay.psn(last, PACKETS - 1)), aeth=Aeth.ack(last + 1))

    def acknowledge() -> None:
        hub.deliver(build_ipv4(ack, ips[1], ips[0], src_port=udp_source_port(qpn(1, 0, lay.job))), ips[0])

    if acknowledged:
        acknowledge()
    return worker, sums, acknowledge


def advance(worker: NetReduceWorker, op: OpGen, wait: Wait, turns: int = 20) -> tuple[Wait, Int32Array | None]:
    """Run a reduction for some turns of the transport (what is queued for rank 0 is taken at the first): what it
    waits for then, and its output if it ended."""
    for _ in range(turns):
        worker.comm.step(0.01, "the reduction")
        while wait():
            try:
                wait = op.send(None)
            except StopIteration as end:
                return wait, end.value
    return wait, None


def test_a_late_worker_reads_each_sum_as_it_came_though_a_later_sum_took_its_place_since():
    """Rank 0 all-reduces 3 messages whose sums (message 2's where message 0's was) are all here before it reads
    any: each message's result is the sum that came for it, naming its own contributors (message 2's sum read for
    message 0 made rank 0's sums and its contributors disagree); its writes, late, settled unsent."""
    worker, sums, _ = late_rank0({0: 0b1110, 1: 0b0111, 2: 0b1110})
    got = worker.allreduce(0, 0, np.ones(3 * MESSAGE_ELEMENTS, dtype=np.int32))
    for k, want in sums.items():
        assert np.array_equal(got[k * MESSAGE_ELEMENTS : (k + 1) * MESSAGE_ELEMENTS], want), f"message {k}"
    assert worker.last_contributors == [(1, 2, 3), (0, 1, 2), (1, 2, 3)]
    assert worker.stats["overwritten"] == 1  # message 0's place held message 2's sum when rank 0 read it
    assert worker.send_qp.requester.idle() and worker.send_qp.requester.counters["settled_unsent"] > 0


def test_back_to_back_operations_of_a_graph_job_each_keep_their_own_sums_and_contributors():
    """The graph engine's all-reduces of one NetReduce job (train-digits: one per tensor), k of N: operation 0 (message
    0) and operation 1 (messages 1 and 2), every sum here before either reads: each operation's output is its own
    messages' sums and the contributors it hands over (InNetworkJob.contributors, by place) are its own."""
    worker, sums, _ = late_rank0({0: 0b1110, 1: 0b1101, 2: 0b1011})
    switch_job = InNetworkJob(worker)
    outs = []
    for place, messages in ((0, 1), (1, 2)):
        op = switch_job.run(place, CollectiveKind.ALL_REDUCE, np.ones(messages * MESSAGE_ELEMENTS, dtype=np.int32))
        outs.append(worker.comm.drive(op, f"operation {place}"))
    assert np.array_equal(outs[0], sums[0])
    assert np.array_equal(outs[1], np.concatenate([sums[1], sums[2]]))
    assert switch_job.contributors == {0: ((1, 2, 3),), 1: ((0, 2, 3), (0, 1, 3))}


def test_a_late_worker_posts_every_message_before_its_reduction_ends_and_contributes_to_the_next():
    """Rank 0's three sums are here before rank 1's acknowledgement: message 0 goes out, message 1 waits for its
    credit (message 0's write acknowledged). The reduction does not end with messages 1 and 2 unposted (a worker that
    ended so would never post again: every later message waits for them, posted in order, and it would be left out
    of every later sum); once rank 1's acknowledgement through message 2 is here they are posted and settled unsent,
    the reduction ends with its sums, and the next reduction's message goes on the wire."""
    worker, sums, acknowledge = late_rank0({0: 0b1110, 1: 0b1110, 2: 0b1110}, acknowledged=False)
    requester = worker.send_qp.requester
    op = worker.reduce_op(0, 0, 0, np.ones(3 * MESSAGE_ELEMENTS, dtype=np.int32), 0)
    wait, out = advance(worker, op, next(op))
    assert out is None and worker.posted == 1 and requester.counters["sent"] == PACKETS  # waits to post message 1
    acknowledge()
    wait, out = advance(worker, op, wait)
    assert out is not None and np.array_equal(out, np.concatenate([sums[k] for k in range(3)]))
    assert worker.posted == worker.k == 3 and requester.counters["settled_unsent"] == 2 * PACKETS
    following = worker.reduce_op(0, 1, 0, np.ones(MESSAGE_ELEMENTS, dtype=np.int32), 0)
    advance(worker, following, next(following), turns=2)  # (its sum never comes here)
    assert worker.posted == 4 and requester.counters["sent"] == 2 * PACKETS  # message 3 went out


# ---- k of N in a spec ----


def test_a_spec_takes_k_of_n_for_netreduce_digits_on_one_switch():
    from gradswitch.experiment.spec import spec_from_dict

    ok = spec_from_dict({"algo": "netreduce", "workers": 4, "netreduce_k": 3, "workload": "train-digits",
                         "dtype": "float32"})
    assert ok.algorithm.netreduce_k == 3 and ok.problems() == []


@pytest.mark.parametrize(("changes", "match"), [
    ({"algo": "ring"}, r"^netreduce_k = 3: k of N is NetReduce's \(set algo = netreduce\)$"),
    ({"netreduce_k": 5}, r"^netreduce_k = 5: k is 1\.\.4 \(the workers\)$"),
    ({"topo": "leafspine"}, r"^netreduce_k = 3: k of N runs on BMv2 with every worker on one switch"),
    ({"workload": "synthetic", "dtype": "int32"}, r"^netreduce_k = 3: k of N is for workload = 'train-digits'"),
])
def test_a_k_of_n_spec_it_cannot_run_is_refused_in_one_line_each(changes, match):
    import re

    from gradswitch.experiment.spec import spec_from_dict

    spec = spec_from_dict({"algo": "netreduce", "workers": 4, "netreduce_k": 3, "workload": "train-digits",
                           "dtype": "float32", **changes})
    assert any(re.search(match, p) for p in spec.problems()), spec.problems()


def test_k_of_n_from_the_command_line() -> None:
    """`--netreduce-k K` is the spec's netreduce_k; a k out of range is refused in one line naming the option."""
    from gradswitch.cli.main import build_parser, experiment_spec
    from gradswitch.experiment.spec import SpecError

    base = ["experiment", "--algo", "netreduce", "--workers", "4", "--workload", "train-digits", "--dtype", "float32",
            "--float-mode", "fixed"]
    assert experiment_spec(build_parser().parse_args([*base, "--netreduce-k", "3"])).algorithm.netreduce_k == 3
    assert experiment_spec(build_parser().parse_args(base)).algorithm.netreduce_k is None
    with pytest.raises(SpecError, match=r"netreduce_k = 5: k is 1\.\.4 \(the workers\)"):
        experiment_spec(build_parser().parse_args([*base, "--netreduce-k", "5"]))


# ---- k of N: a deadline ----


def test_a_deadline_makes_a_job_k_of_n_even_at_n_of_n_and_the_switch_is_told_both():
    """N of N with a deadline may leave workers out: the layout says k of N (its results name their contributors),
    and set_job carries the flag and the deadline in microseconds, as config.p4's program reads them."""
    from gradswitch.control.netreduce_jobs import place_job
    from gradswitch.control.p4rt import TableEntry
    from tests.traces.netreduce_scenarios import topology

    lay = JobLayout(1, 4, 2, deadline_us=20_000)
    assert lay.k_of_n and lay.need == 4
    assert lay.contributors(lay.imm(7) | 0b0111 << IMM_MEMBERS_SHIFT) == (0, 1, 2)
    job = place_job(topology(), 1, ["h1", "h2", "h3", "h4"], 2, [], deadline_us=20_000)
    [set_job] = [e for e in job.switches["s1"].entries if isinstance(e, TableEntry) and e.action == "set_job"]
    assert (set_job.params["quorum"], set_job.params["partial"], set_job.params["deadline_us"]) == (4, 1, 20_000)
    plain = place_job(topology(), 1, ["h1", "h2", "h3", "h4"], 2, [])
    [set_plain] = [e for e in plain.switches["s1"].entries if isinstance(e, TableEntry) and e.action == "set_job"]
    assert (set_plain.params["partial"], set_plain.params["deadline_us"]) == (0, 0)


@pytest.mark.parametrize(("kw", "match"), [
    ({"deadline_us": -1}, "a deadline of -1 us"), ({"deadline_us": 60_000_001}, "a deadline of 60000001 us"),
    ({"deadline_us": 1000, "scatter": True}, "a deadline is for all-reduce jobs")])
def test_a_deadline_the_switch_cannot_keep_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        JobLayout(1, 4, 2, **kw)


def test_a_deadline_from_the_command_line_and_a_bad_one_in_one_line() -> None:
    from gradswitch.cli.main import build_parser, experiment_spec
    from gradswitch.experiment.spec import SpecError

    base = ["experiment", "--algo", "netreduce", "--workers", "4", "--workload", "train-digits", "--dtype", "float32",
            "--float-mode", "fixed"]
    spec = experiment_spec(build_parser().parse_args([*base, "--netreduce-deadline-ms", "20"]))
    algorithm = spec.algorithm
    assert algorithm.netreduce_deadline_ms == 20 and algorithm.netreduce_deadline_us == 20_000
    assert algorithm.netreduce_k is None
    with pytest.raises(SpecError, match=r"netreduce_deadline_ms = 0\.0: a deadline above 0 and at most 60000 ms"):
        experiment_spec(build_parser().parse_args([*base, "--netreduce-deadline-ms", "0"]))
    ring = [*base[:2], "ring", *base[3:], "--netreduce-deadline-ms", "20"]
    with pytest.raises(SpecError, match=r"netreduce_deadline_ms = 20\.0: k of N is NetReduce's"):
        experiment_spec(build_parser().parse_args(ring))


def test_the_run_table_says_what_the_partial_sums_held_and_what_the_switch_left_out():
    from gradswitch.experiment.report import _partial_sums_lines

    report: Any = {"spec": {"workers": 4, "netreduce_k": None, "netreduce_deadline_ms": 20.0},
                   "iterations": [{"contributors": 3.0, "gradient_error": 0.04}, {"contributors": 4.0,
                                                                                 "gradient_error": 0.0},
                                  {"contributors": 2.0, "gradient_error": 0.1}],
                   "switches": {"netreduce": {"1": {"switches": {"s1": {"events": {"deadline": 80, "late": 2,
                                                                                    "late-answered": 50}}}}}}}
    assert _partial_sums_lines(report) == [
        "  partial sums          4 of 4 or a 20 ms deadline: an iteration's fewest per sum 2-4 workers (median 3); "
        "gradient error vs all 4 median 0.040; switch: 80 cells closed by the deadline, 52 late packets left out"]
    report["spec"] = {"workers": 4, "netreduce_k": 3, "netreduce_deadline_ms": None}
    assert _partial_sums_lines(report)[0].startswith("  partial sums          3 of 4: ")
    report["spec"] = {"workers": 4}
    assert _partial_sums_lines(report) == []  # N of N: no such line
