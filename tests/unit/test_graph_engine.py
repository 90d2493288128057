"""The pure parts of the hosts' graph engine: chunking, each algorithm's schedule (who sends which
chunk at which step, checked by hand and by running every member's schedule on a mailbox), what each
member sends against the collective's link-rate bound, expected outputs, operation numbering, and the
scheduler's timing on a simulated clock."""

from __future__ import annotations

from collections.abc import Generator

import numpy as np
import pytest

from gradswitch.hosts.check_cost import FIRST_S_PER_VALUE, CheckCost
from gradswitch.hosts.collectives import chain, pairwise, ring
from gradswitch.hosts.collectives.data import expected, input_of
from gradswitch.hosts.collectives.ops import Op, ops_of
from gradswitch.hosts.collectives.schedule import Schedule, chunk_bounds
from gradswitch.hosts.comm import Wait
from gradswitch.hosts.graph_engine import GraphScheduler
from gradswitch.workload.broadcast_chain import chunks_of
from gradswitch.workload.collective_bounds import collective_bound_s
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, Node, RankGraph
from tests.graphs import one_collective, send_recv, two_groups


def test_chunk_bounds() -> None:
    assert chunk_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert chunk_bounds(1, 3) == [(0, 1), (1, 1), (1, 1)]


def sends(s: Schedule) -> list[tuple[int | None, tuple[int, int]]]:
    return [(st.send_to, st.send) for st in s.steps]


def recvs(s: Schedule) -> list[tuple[int | None, tuple[int, int]]]:
    return [(st.recv_from, st.recv) for st in s.steps]


def test_ring_reduce_scatter_by_hand() -> None:
    """N = 4, 8 elements (chunks of 2): member 0 sends chunks 3, 2, 1 to member 1, adds chunks 2, 1, 0
    from member 3, and ends owning chunk 0."""
    s = ring.reduce_scatter(0, 4, 8)
    assert sends(s) == [(1, (6, 8)), (1, (4, 6)), (1, (2, 4))]
    assert recvs(s) == [(3, (4, 6)), (3, (2, 4)), (3, (0, 2))]
    assert all(st.add for st in s.steps) and s.output == (0, 2)


def test_ring_all_gather_by_hand() -> None:
    """N = 3, shards of 5: member 1 sends its own block first, then the blocks it received."""
    s = ring.all_gather(1, 3, 5)
    assert s.input_at == 5 and s.dst_elements == 15
    assert sends(s) == [(2, (5, 10)), (2, (0, 5))]
    assert recvs(s) == [(0, (0, 5)), (0, (10, 15))]
    assert not any(st.add for st in s.steps)


def test_pairwise_all_to_all_by_hand() -> None:
    """N = 4, 8 elements: member 1 sends chunk 2 to 2, chunk 3 to 3, chunk 0 to 0; receives from 0, 3, 2."""
    s = pairwise.all_to_all(1, 4, 8)
    assert sends(s) == [(2, (4, 6)), (3, (6, 8)), (0, (0, 2))]
    assert recvs(s) == [(0, (0, 2)), (3, (6, 8)), (2, (4, 6))]
    assert s.keep == ((2, 4), (2, 4))
    assert all(st.settle for st in s.steps)  # a step ends with its send acknowledged (MPI_Sendrecv)
    assert not any(st.settle for st in ring.all_reduce(1, 4, 8).steps + chain.broadcast(1, 4, 8, 0).steps)


def test_broadcast_chain_by_hand() -> None:
    """Root at position 2 of 4: the chain is 2, 3, 0, 1; 3 receives from 2 and forwards to 0; 1 is last."""
    n, e = 4, 5000  # 20 kB: 3 chunks of CHUNK_BYTES or less
    assert chunks_of(e * 4) == 3
    root, middle, last = chain.broadcast(2, n, e, 2), chain.broadcast(3, n, e, 2), chain.broadcast(1, n, e, 2)
    assert {st.send_to for st in root.steps} == {3} and {st.recv_from for st in root.steps} == {None}
    assert {(st.recv_from, st.send_to, st.forward) for st in middle.steps} == {(2, 0, True)}
    assert {(st.recv_from, st.send_to) for st in last.steps} == {(0, None)}


def schedule_of(kind: CollectiveKind, p: int, n: int, e: int, root: int = 0) -> Schedule:
    return Op("t", 1, "collective", kind, tuple(range(n)), p, e, root).schedule()


def run_mailbox(kind: CollectiveKind, n: int, e: int, root: int = 0) -> list[Int32Array]:
    """Every member's schedule run as the executor does, over mailboxes (step i from member q to p),
    members taking turns until all are done: what each ends with."""
    inputs = [input_of(1, "t", q, e) for q in range(n)]
    box: dict[tuple[int, int, int], Int32Array] = {}  # (sender, receiver, step) -> values

    def member(p: int) -> Generator[None, None, Int32Array]:
        s = schedule_of(kind, p, n, e, root)
        dst = np.zeros(s.dst_elements, dtype=np.int32)
        if s.in_place:
            dst[s.input_at : s.input_at + e] = inputs[p]
            src = dst
        else:
            src = inputs[p]
            if s.keep is not None:
                dst[s.keep[1][0] : s.keep[1][1]] = inputs[p][s.keep[0][0] : s.keep[0][1]]
        for i, st in enumerate(s.steps):
            if st.send_to is not None and not st.forward:
                box[(p, st.send_to, i)] = src[st.send[0] : st.send[1]].copy()
            if st.recv_from is not None:
                while (st.recv_from, p, i) not in box:
                    yield
                got = box.pop((st.recv_from, p, i))
                assert len(got) == st.recv[1] - st.recv[0]
                if st.add:
                    dst[st.recv[0] : st.recv[1]] += got
                else:
                    dst[st.recv[0] : st.recv[1]] = got
            if st.send_to is not None and st.forward:
                box[(p, st.send_to, i)] = src[st.send[0] : st.send[1]].copy()
        return dst[s.output[0] : s.output[1]]

    gens = {p: member(p) for p in range(n)}
    out: dict[int, Int32Array] = {}
    for _ in range(10_000):
        for p, g in list(gens.items()):
            try:
                next(g)
            except StopIteration as done:
                out[p] = done.value
                del gens[p]
        if not gens:
            break
    assert not gens, "a schedule deadlocked"
    assert not box, "a message was never received"
    return [out[p] for p in range(n)]


@pytest.mark.parametrize("kind", list(CollectiveKind))
@pytest.mark.parametrize("n,e", [(2, 7), (4, 8), (5, 23), (8, 3000)])
def test_schedules_compute_the_collective(kind: CollectiveKind, n: int, e: int) -> None:
    root = n // 2
    outs = run_mailbox(kind, n, e, root)
    inputs = [input_of(1, "t", q, e) for q in range(n)]
    for p in range(n):
        np.testing.assert_array_equal(outs[p], expected(kind, inputs, p, root))


def test_expected_by_hand() -> None:
    a, b = np.array([1, 2, 3, 4], dtype=np.int32), np.array([10, 20, 30, 40], dtype=np.int32)
    assert expected(CollectiveKind.ALL_REDUCE, [a, b], 0).tolist() == [11, 22, 33, 44]
    assert expected(CollectiveKind.REDUCE_SCATTER, [a, b], 1).tolist() == [33, 44]
    assert expected(CollectiveKind.ALL_GATHER, [a, b], 1).tolist() == [1, 2, 3, 4, 10, 20, 30, 40]
    assert expected(CollectiveKind.ALL_TO_ALL, [a, b], 0).tolist() == [1, 2, 10, 20]
    assert expected(CollectiveKind.ALL_TO_ALL, [a, b], 1).tolist() == [3, 4, 30, 40]
    assert expected(CollectiveKind.BROADCAST, [a, b], 0, root=1).tolist() == [10, 20, 30, 40]


def test_inputs_differ_and_repeat() -> None:
    x = input_of(3, "c/world/0", 1, 1000)
    assert np.array_equal(x, input_of(3, "c/world/0", 1, 1000))
    assert not np.array_equal(x, input_of(3, "c/world/0", 2, 1000))
    assert not np.array_equal(x, input_of(3, "c/world/1", 1, 1000))
    assert not np.array_equal(x, input_of(4, "c/world/0", 1, 1000))
    assert int(np.abs(x).max()) <= 1 << 15


def test_inputs_are_the_affine_sequence() -> None:
    """input_of's uint32 arithmetic gives the documented sequence, (i x step + start) mod 2^16 - 2^15, computed
    here with Python integers (the index times the step passes 2^32 at these lengths: wrap-around included)."""
    import hashlib

    for seed, op, rank, n in ((1, "c/world/0", 0, 1), (7, "s/0-1/3/2", 5, 4099), (2, "c/tp/9", 3, 2_000_003)):
        h = int.from_bytes(hashlib.blake2b(f"{seed}/{op}/{rank}".encode(), digest_size=8).digest(), "big")
        step, start = 2 * (h % 9973) + 1, (h >> 20) % (1 << 16)
        x = input_of(seed, op, rank, n)
        assert x.dtype == np.int32 and len(x) == n
        for i in sorted({0, n // 3, n // 2, n - 1}):
            assert int(x[i]) == (i * step + start) % (1 << 16) - (1 << 15), (op, i)


def test_sums_are_exact_at_the_extremes() -> None:
    """Every member at -2^15 (or 2^15 - 1): the all-reduce and reduce-scatter sums are exact in int32."""
    for v in (-(1 << 15), (1 << 15) - 1):
        inputs = [np.full(6, v, dtype=np.int32) for _ in range(1 << 10)]
        assert expected(CollectiveKind.ALL_REDUCE, inputs, 0).tolist() == [v << 10] * 6
        assert expected(CollectiveKind.REDUCE_SCATTER, inputs[:3], 2).tolist() == [3 * v] * 2


@pytest.mark.parametrize("kind", [k for k in CollectiveKind if k != CollectiveKind.BROADCAST])
def test_bytes_sent_meet_the_bound(kind: CollectiveKind) -> None:
    """Each member of the ring and pairwise algorithms sends exactly what the link-rate bound counts:
    the bound x B (one link per member, every member sending at once)."""
    n, e = 8, 8000
    bound_bytes = collective_bound_s(kind, n, e * 4, 1.0)
    for p in range(n):
        sent = sum(st.send[1] - st.send[0] for st in schedule_of(kind, p, n, e).steps if st.send_to is not None)
        assert sent * 4 == pytest.approx(bound_bytes)


def test_broadcast_sends_the_buffer_once_per_hop() -> None:
    n, e = 5, 10_000
    sent = [sum(st.send[1] - st.send[0] for st in schedule_of(CollectiveKind.BROADCAST, p, n, e, 1).steps
                if st.send_to is not None) for p in range(n)]
    assert sorted(sent) == [0, e, e, e, e] and sent[0] == 0  # position 0 is last in a chain from 1


def test_ops_numbered_alike_on_every_rank() -> None:
    g = two_groups(4, 4000)
    per_rank = [ops_of(g, r) for r in range(4)]
    world = {ops[4].number for ops in per_rank}
    assert len(world) == 1
    assert per_rank[0][2].number == per_rank[2][2].number != per_rank[1][2].number
    assert per_rank[0][2].members == (0, 2) and per_rank[2][2].position == 1
    assert per_rank[0][3].elements == 500
    p2p = send_recv(3, 100)
    assert ops_of(p2p, 0)[1].number == ops_of(p2p, 1)[2].number  # 0's send is 1's receive
    assert ops_of(p2p, 0)[1].key == "p/0-1/7/0"


class Clock:
    """A runtime on a simulated clock: each wait advances it; an operation ends `comm_s` after it starts."""

    def __init__(self, comm_s: float, work_s: float = 0.005) -> None:
        self.t = 100.0
        self.comm_s = comm_s
        self.work_s = work_s  # what one piece of host work (a check) takes
        self.started: dict[int, float] = {}
        self.outputs: list[tuple[int, float, int]] = []  # (node, when, its output's first value)
        self.checked: list[float] = []  # when each piece of host work ran

    def now(self) -> float:
        return self.t

    def wait(self, max_wait: float, what: str) -> None:
        self.t += max(max_wait, 1e-4)

    def start(self, node: Node) -> Generator[Wait, None, Int32Array]:
        self.started[node.id] = self.t
        end = self.t + self.comm_s
        yield lambda: self.t >= end
        return np.full(1, node.id, dtype=np.int32)

    def finish(self, node: Node, output: Int32Array) -> None:
        self.outputs.append((node.id, self.t, int(output[0])))

    def background(self, budget_s: float) -> bool:
        """One piece of host work (work_s of the clock) per finished output not yet looked at, if it fits."""
        if len(self.checked) == len(self.outputs) or budget_s < self.work_s:
            return False
        self.checked.append(self.t)
        self.t += self.work_s
        return True


def test_scheduler_timing() -> None:
    """A (1 s) -> {B: collective, C: 1 s, D: 0.5 s}; E after B and D. Dilation 2: A is 100-102; C and D
    share the one GPU in graph order (C 102-104, D 104-105); B runs during C; E starts when D ends."""
    coll = CollectiveNode(2, "B", CollectiveKind.ALL_REDUCE, "world", 4, (1,))
    rank = RankGraph(0, (ComputeNode(1, "A", 1.0), coll, ComputeNode(3, "C", 1.0, (1,)),
                         ComputeNode(4, "D", 0.5, (1,)), ComputeNode(5, "E", 0.1, (2, 4))))
    clock = Clock(comm_s=0.3)
    spans = GraphScheduler(rank, clock, dilation=2.0, timeout=60).run()
    assert (spans[1].start, spans[1].end) == (100.0, 102.0)
    assert (spans[3].start, spans[3].end) == (102.0, 104.0)
    assert (spans[4].start, spans[4].end) == (104.0, 105.0)
    assert spans[2].start == pytest.approx(102.0, abs=0.011) and spans[2].end == pytest.approx(102.3, abs=0.011)
    assert spans[5].start == pytest.approx(105.0) and spans[5].end == pytest.approx(105.2)


def test_scheduler_waits_for_a_slow_collective() -> None:
    """E depends on a collective that ends after the GPU went idle: E starts at the collective's end."""
    coll = CollectiveNode(2, "B", CollectiveKind.ALL_REDUCE, "world", 4, (1,))
    rank = RankGraph(0, (ComputeNode(1, "A", 0.1), coll, ComputeNode(3, "E", 0.1, (2,))))
    spans = GraphScheduler(rank, Clock(comm_s=1.0), dilation=1.0, timeout=60).run()
    assert spans[3].start == pytest.approx(spans[2].end) and spans[2].end >= 101.1 - 1e-9


def test_scheduler_deadline() -> None:
    rank = RankGraph(0, (CollectiveNode(1, "B", CollectiveKind.ALL_REDUCE, "world", 4),), "x.0.et")
    with pytest.raises(TimeoutError, match=r"x\.0\.et: the graph took over 0\.5 s; still running: node 1"):
        GraphScheduler(rank, Clock(comm_s=10.0), dilation=1.0, timeout=0.5).run()


def test_one_collective_graph_is_valid() -> None:
    from gradswitch.workload.graph import validate

    for kind in CollectiveKind:
        validate(one_collective(kind, 4, 1000, root=3))
    validate(send_recv(4, 10))
    validate(two_groups(4, 1000))


def test_outputs_checked_only_while_the_gpu_computes_alone() -> None:
    """B (a collective, 0.3 s) ends while C (2 s of compute) runs: its output goes to the runtime and is
    checked during C, once no communication is in progress; D's output, with no computation after it, is
    left for after the graph."""
    coll = CollectiveNode(2, "B", CollectiveKind.ALL_REDUCE, "world", 4, (1,))
    last = CollectiveNode(4, "D", CollectiveKind.ALL_REDUCE, "world", 4, (3,))
    rank = RankGraph(0, (ComputeNode(1, "A", 0.1), coll, ComputeNode(3, "C", 2.0, (1,)), last))
    clock = Clock(comm_s=0.3)
    spans = GraphScheduler(rank, clock, dilation=1.0, timeout=60).run()
    assert [(n, v) for n, _, v in clock.outputs] == [(2, 2), (4, 4)]
    assert len(clock.checked) == 1 and spans[2].end <= clock.checked[0] < spans[3].end - 0.02


def test_a_check_longer_than_the_computation_waits() -> None:
    """The same graph with checks of 1.69 s: B's does not fit in what is left of C when B ends (1.7 s) with
    BACKGROUND_SLACK_S to spare, so no check runs while the graph runs (a host busy past C's end would start D
    late); with 1.6 s, it does."""
    coll = CollectiveNode(2, "B", CollectiveKind.ALL_REDUCE, "world", 4, (1,))
    last = CollectiveNode(4, "D", CollectiveKind.ALL_REDUCE, "world", 4, (3,))
    rank = RankGraph(0, (ComputeNode(1, "A", 0.1), coll, ComputeNode(3, "C", 2.0, (1,)), last))
    for work_s, during in ((1.69, 0), (1.6, 1)):
        clock = Clock(comm_s=0.3, work_s=work_s)
        spans = GraphScheduler(rank, clock, dilation=1.0, timeout=60).run()
        assert len(clock.checked) == during
        assert spans[4].start == pytest.approx(spans[3].end, abs=0.011)  # D starts when C ends either way


def test_check_cost_is_learnt() -> None:
    """A first guess; then the last check's rate, but never under half the estimate before it."""
    cost = CheckCost()
    assert cost.estimate_s(1_000_000) == pytest.approx(1_000_000 * FIRST_S_PER_VALUE)
    cost.record(1_000_000, 0.002)  # 2 ns a value: the estimate halves, no more
    assert cost.per_value_s == pytest.approx(FIRST_S_PER_VALUE / 2)
    cost.record(1_000_000, 0.002)
    assert cost.per_value_s == pytest.approx(FIRST_S_PER_VALUE / 4)
    cost.record(100, 0.001)  # a slow one (a loaded machine) counts at once
    assert cost.per_value_s == pytest.approx(1e-5)


def test_a_slow_worker_stretches_the_hosts_computation_and_k_of_n_cuts_it_short() -> None:
    """A computation of no emulated time standing for 0.1 s of the host's own (the digits model's gradient): a slow
    worker of factor 5 waits 4 x 0.1 s more; once the sum its next operation would join is here (k of N, 0.15 s in),
    the computation ends then, as the loop's slow worker stops waiting."""
    coll = CollectiveNode(2, "B", CollectiveKind.ALL_REDUCE, "world", 4, (1,))
    rank = RankGraph(0, (ComputeNode(1, "A", 0.0), coll))
    normal = GraphScheduler(rank, Clock(comm_s=0.1), dilation=1.0, timeout=60, host_compute_s=0.1).run()
    assert (normal[1].start, normal[1].end) == (100.0, 100.0)
    slow = GraphScheduler(rank, Clock(comm_s=0.1), dilation=1.0, timeout=60, slowdown=lambda: 5.0,
                          host_compute_s=0.1).run()
    assert slow[1].start == 100.0 and slow[1].end == pytest.approx(100.4)
    clock = Clock(comm_s=0.1)
    cut = GraphScheduler(rank, clock, dilation=1.0, timeout=60, slowdown=lambda: 5.0, host_compute_s=0.1,
                         overtaken=lambda: clock.t >= 100.15).run()
    assert cut[1].end == pytest.approx(100.15, abs=0.011) and cut[2].start == pytest.approx(cut[1].end)
