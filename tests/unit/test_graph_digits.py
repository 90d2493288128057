"""train-digits as an execution graph (gradswitch.workload.generators.digits_graph) carrying the MLP's real gradients
on the hosts' graph engine (GraphJob payload train-digits, gradswitch/hosts/graph_digits.py): ranks as threads on an
in-memory network (tests/memlink.py). Every sum checked exact, accuracy per iteration, and the model at the end the
same, digest for digest, as the iteration loop's (gradswitch/hosts/digits_job.py) with the same seed and settings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gradswitch.hosts.collectives.ops import Op, ops_of
from gradswitch.hosts.graph_data import SyntheticData
from gradswitch.hosts.graph_digits import DigitsData
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.hosts.graph_sources import data_source
from gradswitch.hosts.netreduce_quorum import held_mask
from gradswitch.protocol.netreduce import MESSAGE_ELEMENTS
from gradswitch.workload.digits import Minibatches, Model
from gradswitch.workload.encoding import Encoder, Reduced, uses_exponents
from gradswitch.workload.generators import collective_graph, digits_graph
from gradswitch.workload.generators.digits import digits_bytes, digits_codes, digits_reductions
from gradswitch.workload.gradients import digits_profile
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode
from gradswitch.workload.graph_payload import PayloadKind
from gradswitch.workload.job import DType, FloatMode, JobConfig
from tests.inmemory import job, run_ok
from tests.memlink import MemoryHub
from tests.unit.test_graph_engine_hosts import run_graph_threads

DIGITS: dict[str, Any] = {"workload": "train-digits", "dtype": "float32", "transport": "sr", "linger_timeout": 1.0,
                          "seed": 3}


def digits_job(workers: int, iterations: int, **kw: Any) -> JobConfig:
    return job("ring", workers, iterations=iterations, **{**DIGITS, **kw})


def graph_job(cfg: JobConfig, payload: PayloadKind = PayloadKind.DIGITS) -> GraphJob:
    return GraphJob(cfg, digits_graph(len(cfg.workers), cfg.iterations, exponents=uses_exponents(cfg)),
                    payload=payload)


TENSORS = ["fc2.bias", "fc2.weight", "fc1.bias", "fc1.weight"]  # back-propagation order, as the loop reduces them
SIZES = [10, 128 * 10, 128, 64 * 128]
CODES = [1, 2, 1, 8]  # one per block of 1024 values of each tensor


def test_the_graph_is_a_gradient_then_the_loops_all_reduce_of_each_tensor_per_iteration() -> None:
    """One all-reduce per tensor, in the loop's order and sizes (gradswitch/hosts/digits_job.py: Encoder.reduce of
    each tensor, one at a time), so the wire carries what the loop's does."""
    graph = digits_graph(3, 4, compute_s=0.002)
    assert digits_bytes() == 4 * digits_profile().elements == 4 * sum(SIZES)
    assert [t.name for t in digits_profile().tensors] == TENSORS
    for r in graph.ranks:
        nodes = list(r.nodes)
        assert [n.name for n in nodes[:6]] == ["it0.gradient", *(f"it0.all_reduce.{t}" for t in TENSORS),
                                               "it1.gradient"]
        assert len(nodes) == 4 * 5
        for i, n in enumerate(nodes):
            assert n.deps == ((i - 1,) if i else ())  # each waits for the one before: the next gradient for the sums
            if isinstance(n, ComputeNode):
                assert n.duration_s == 0.002
            else:
                assert isinstance(n, CollectiveNode)
                assert (n.collective, n.group, n.nbytes) == (CollectiveKind.ALL_REDUCE, "world",
                                                             4 * SIZES[i % 5 - 1])
    with pytest.raises(ValueError, match="0 iterations"):
        digits_graph(2, 0)


def test_with_block_exponents_each_tensor_reduces_its_codes_first() -> None:
    """float_mode = exponent: per iteration the gradient, then per tensor the all-reduce of its exponent codes (one
    per block of 1024 values: 1, 2, 1, 8) and its values' after it, as the loop's Encoder.reduce does."""
    graph = digits_graph(2, 2, exponents=True)
    assert digits_codes() == sum(CODES) == 12
    assert [(r.name, r.codes, r.elements) for r in digits_reductions(True)] == [
        x for t, c, e in zip(TENSORS, CODES, SIZES, strict=True) for x in ((t, True, c), (t, False, e))]
    nodes = list(graph.ranks[0].nodes)
    per_iteration = [x for t in TENSORS for x in (f"exponents.{t}", f"all_reduce.{t}")]
    assert [n.name for n in nodes] == [f"it{i}.{x}" for i in range(2) for x in ("gradient", *per_iteration)]
    assert [getattr(n, "nbytes", 0) for n in nodes[:9]] == [0, *(4 * x for c, e in zip(CODES, SIZES, strict=True)
                                                                 for x in (c, e))]
    assert all(n.deps == ((i - 1,) if i else ()) for i, n in enumerate(nodes))


def test_the_payload_travels_with_the_job_file() -> None:
    job_ = graph_job(digits_job(2, 2))
    assert GraphJob.from_json(job_.to_json()).payload == PayloadKind.DIGITS
    old = job_.to_json().replace('"payload": "train-digits"', '"payload_gone": 0')
    assert GraphJob.from_json(old).payload == PayloadKind.SYNTHETIC  # a job file of before: synthetic


def test_the_source_follows_the_payload() -> None:
    cfg = digits_job(2, 2)
    ops = ops_of(digits_graph(2, 2), 0)
    assert isinstance(data_source(PayloadKind.SYNTHETIC, cfg, 0, ops), SyntheticData)
    assert isinstance(data_source(PayloadKind.DIGITS, cfg, 0, ops), DigitsData)
    with pytest.raises(ValueError, match="only all-reduces of the world group"):
        data_source(PayloadKind.DIGITS, cfg, 0, ops_of(collective_graph(CollectiveKind.ALL_GATHER, 2, 400), 0))
    with pytest.raises(ValueError, match="dtype = float32"):
        data_source(PayloadKind.DIGITS, replace(cfg, dtype=DType.INT32, workload="synthetic"), 0, ops)
    with pytest.raises(ValueError, match="block exponents has only all-reduces of the world group of 1, 10, 2, 1280, "):
        data_source(PayloadKind.DIGITS, replace(cfg, float_mode=FloatMode.EXPONENT), 0, ops)  # the codes' missing


def test_a_rank_alone_trains_as_the_loop_computes(tmp_path: Path) -> None:
    """The source on its own, every rank's part played in one process: the sums it is given are the exact ones,
    so each check passes, the model learns, and the records say so."""
    cfg = digits_job(2, 3)
    ops = ops_of(digits_graph(2, 3), 0)
    sources = [DigitsData(cfg, r, ops_of(digits_graph(2, 3), r)) for r in range(2)]
    for op in sorted(ops.values(), key=lambda o: o.sequence):
        total = np.sum([s.input(op).astype(np.int64) for s in sources], axis=0).astype(np.int32)
        for s in sources:
            s.finished(op, total)
            assert np.array_equal(s.expected(op), total)
    reports = [s.report() for s in sources]
    assert reports[0].extra == reports[1].extra and "model_digest" in reports[0].extra
    assert [it["correct"] for it in reports[0].iterations] == [True] * 3
    assert all(0 < it["extra"]["accuracy"] <= 1 for it in reports[0].iterations)


def test_checks_run_in_order() -> None:
    cfg = digits_job(2, 2)
    ops = sorted(ops_of(digits_graph(2, 2), 0).values(), key=lambda o: o.sequence)
    s = DigitsData(cfg, 0, {o.number: o for o in ops})
    for op in ops:
        s.finished(op, s.input(op))
    with pytest.raises(RuntimeError, match="out of order"):
        s.expected(ops[1])


@pytest.mark.parametrize("workers,iterations,mode", [(4, 5, "fixed"), (3, 3, "fixed"), (3, 4, "exponent")])
def test_the_graph_engine_trains_the_same_model_as_the_loop(tmp_path: Path, workers: int, iterations: int,
                                                            mode: str) -> None:
    """Same seed and settings: the loop's and the graph's all-reduces of the four tensors add up the same fixed point
    (with block exponents: the same codes, then the same values scaled by each tensor's shared exponents), so every rank
    of both runs ends with the same parameters; every sum exact, the accuracy and loss per iteration equal."""
    cfg = digits_job(workers, iterations, float_mode=mode)
    (tmp_path / "loop").mkdir()
    (tmp_path / "graph").mkdir()
    loop = run_ok(cfg, tmp_path / "loop")
    results, run = run_graph_threads(graph_job(cfg), tmp_path / "graph", MemoryHub(seed=4))
    assert all(r["ok"] for r in results.values()), [r.get("error") for r in results.values()]
    assert all(n.checked is True for n in run.nodes if n.kind == "collective")
    digests = {r["model_digest"] for r in [*loop.values(), *results.values()]}
    assert len(digests) == 1, digests
    for rank, r in results.items():
        its = r["iterations"]
        assert [it["index"] for it in its] == list(range(iterations))
        assert all(it["check"] == "exact" and it["correct"] and it["wrong_elements"] == 0 for it in its)
        assert [it["extra"]["accuracy"] for it in its] == [it["extra"]["accuracy"] for it in loop[rank]["iterations"]]
        assert [it["extra"]["loss"] for it in its] == [it["extra"]["loss"] for it in loop[rank]["iterations"]]
        assert [it["saturated"] for it in its] == [it["saturated"] for it in loop[rank]["iterations"]]
        for key in ("contributors", "gradient_error"):  # N of N: every worker in every sum, as the loop's
            assert [it["extra"][key] for it in its] == [it["extra"][key] for it in loop[rank]["iterations"]], key
        assert all(0 < it["extra"]["comm_s"] <= it["time_s"] <= it["extra"]["train_s"] for it in its)


def test_through_parameter_servers_the_graph_engine_trains_the_same_model(tmp_path: Path) -> None:
    """The graph's all-reduces through two parameter servers (algo = ps, keys of 1 KiB) add up the same fixed point
    as the loop's ring: every rank ends with the loop's parameters, every sum exact, every key served."""
    cfg = digits_job(3, 3)
    (tmp_path / "loop").mkdir()
    (tmp_path / "graph").mkdir()
    loop = run_ok(cfg, tmp_path / "loop")
    ps = job("ps", 3, servers=2, iterations=3, ps_key_bytes=1024, **DIGITS)
    results, run = run_graph_threads(graph_job(ps), tmp_path / "graph", MemoryHub(seed=4))
    assert all(r["ok"] for r in results.values()), [r.get("error") for r in results.values()]
    assert all(n.checked is True for n in run.nodes if n.kind == "collective")
    ranks = [r for r in results.values() if r["role"] == "worker"]
    assert len(ranks) == 3 and {r["model_digest"] for r in [*loop.values(), *ranks]} == {loop[0]["model_digest"]}
    keys = sum(-(-4 * e // 1024) for e in SIZES)  # each tensor's all-reduce in keys of its own, as the loop's
    assert sum(r["keys_served"] for r in results.values() if r["role"] == "server") == 3 * keys


def test_a_wrong_sum_is_caught_and_so_is_the_model_it_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One element of rank 1's second iteration's first sum (fc2.bias) changed as it arrives: rank 1's check finds it
    (the rank fails naming the node); its model is no longer the others', so its next gradient is not the one they
    compute for it, and the third iteration's sums fail every rank's check."""
    import gradswitch.hosts.graph_main as graph_main

    original = graph_main.HostRuntime.finish

    def corrupt(self: graph_main.HostRuntime, node: Any, output: Any) -> None:
        if self.comm.me.node_id == 1 and node.id == 6:
            output = output.copy()
            output[7] += 1
        original(self, node, output)

    monkeypatch.setattr(graph_main.HostRuntime, "finish", corrupt)
    cfg = digits_job(3, 3)
    results, run = run_graph_threads(graph_job(cfg), tmp_path)
    assert all(not r["ok"] and r.get("check_failed") for r in results.values())
    assert "node 6 (it1.all_reduce.fc2.bias, c/world/4): 1 of 10 elements wrong" in results[1]["error"]
    assert [it["correct"] for it in results[1]["iterations"]] == [True, False, False]
    assert [it["wrong_elements"] for it in results[1]["iterations"]][1] == 1
    for r in (0, 2):
        assert [it["correct"] for it in results[r]["iterations"]] == [True, True, False]
        assert "it1" not in results[r]["error"] and "it2.all_reduce" in results[r]["error"]
    checked = [n.checked for n in run.nodes if n.rank == 0 and n.kind == "collective"]
    assert checked[:8] == [True] * 8 and False in checked[8:], checked


class LockstepClock:
    """Rank 0's scheduler on a simulated clock, the other ranks played alongside in lockstep: an all-reduce takes
    `comm_s`, its output the sum of every rank's input (their sources'), and every rank's source hears it end; the
    host work is rank 0's checks, as graph_main's runtime does them."""

    def __init__(self, sources: list[DigitsData], ops: dict[int, Any], comm_s: float) -> None:
        self.t, self.comm_s, self.sources, self.ops = 0.0, comm_s, sources, ops
        self.pending: list[tuple[int, Any]] = []
        self.checks: list[tuple[float, bool]] = []  # when each check ran, and whether it passed

    def now(self) -> float:
        return self.t

    def wait(self, max_wait: float, what: str) -> None:
        self.t += max(max_wait, 1e-4)

    def start(self, node: Any) -> Any:
        op = self.ops[node.id]
        total = np.sum([s.input(op).astype(np.int64) for s in self.sources], axis=0).astype(np.int32)
        end = self.t + self.comm_s
        yield lambda: self.t >= end
        return total

    def finish(self, node: Any, output: Any) -> None:
        for s in self.sources:
            s.finished(self.ops[node.id], output)
        self.pending.append((node.id, output))

    def background(self, budget_s: float = float("inf")) -> bool:
        """A check takes no time on this clock: it fits in any budget left."""
        if not self.pending or budget_s < 0:
            return False
        nid, output = self.pending.pop(0)
        self.checks.append((self.t, bool(np.array_equal(self.sources[0].expected(self.ops[nid]), output))))
        return True


def reference_digest(cfg: JobConfig) -> str:
    """train-digits without any network or engine: every worker's gradient, fixed point, summed, averaged, applied."""
    from gradswitch.workload.digits import Minibatches, Model
    from gradswitch.workload.floats import FixedPoint

    n = len(cfg.workers)
    batches, model, fixed = Minibatches(cfg.seed, n), Model.initial(cfg.seed), FixedPoint(cfg.fixed_point_bits, n)
    for _ in range(cfg.iterations):
        grads = [np.concatenate(batches.gradients(model, r)[0]) for r in range(n)]
        total = np.sum([fixed.encode(g)[0].astype(np.int64) for g in grads], axis=0).astype(np.int32)
        mean = fixed.decode(total) / n
        model.step(np.split(mean, np.cumsum([t.elements for t in digits_profile().tensors])[:-1]))
    return model.digest()


def test_on_a_simulated_clock_checks_run_while_the_gradient_computes_and_the_model_is_the_reference() -> None:
    """4 ranks, 4 iterations, each gradient 50 ms at dilation 1: the scheduler applies each sum before the next
    gradient is drawn (the source's model moves on), checks the previous sum during the next computation, every
    check passes, and the model is the one plain numpy training gives."""
    from gradswitch.hosts.graph_engine import GraphScheduler

    cfg = digits_job(4, 4)
    graph = digits_graph(4, 4, compute_s=0.05)
    ops = ops_of(graph, 0)
    sources = [DigitsData(cfg, r, ops_of(graph, r)) for r in range(4)]
    clock = LockstepClock(sources, ops, comm_s=0.02)
    spans = GraphScheduler(graph.ranks[0], clock, dilation=1.0, timeout=60).run()
    gradient_spans = [spans[n.id] for n in graph.ranks[0].nodes if isinstance(n, ComputeNode)]
    checked_during = [t for t, _ in clock.checks if any(s.start <= t < s.end for s in gradient_spans)]
    assert len(checked_during) == 3 * 4  # iterations 0-2's four sums, each during the next gradient; the last's left
    while clock.background():
        pass
    assert [ok for _, ok in clock.checks] == [True] * 4 * 4
    report = sources[0].report()
    assert [it["correct"] for it in report.iterations] == [True] * 4
    assert {s.report().extra["model_digest"] for s in sources} == {reference_digest(cfg)}


def contributors_of(op: Op) -> tuple[tuple[int, ...], ...]:
    """A 3-of-4 all-reduce's contributors as the switch names them, per message: each tensor's sum of its own, a
    different rank left out per message, tensor and iteration; an iteration's second tensor (fc2.weight) holds all 4,
    and the last iteration's every tensor (the fewest an iteration held: 3, 3, 4)."""
    messages = -(-op.elements // MESSAGE_ELEMENTS)
    reductions = len(digits_reductions())
    if op.sequence % reductions == 1 or op.sequence // reductions == 2:
        return tuple((0, 1, 2, 3) for _ in range(messages))
    return tuple(tuple(r for r in range(4) if r != (op.number + m) % 4) for m in range(messages))


def partial_sum(sources: list[DigitsData], op: Op) -> tuple[Any, tuple[tuple[int, ...], ...]]:
    """A k-of-N all-reduce's output as the switch makes it: per message, the sum of the ranks it names."""
    inputs = [s.input(op) for s in sources]
    contributors = contributors_of(op)
    held = held_mask(contributors, 4, op.elements)
    total = np.sum([np.where(held[r], x, 0).astype(np.int64) for r, x in enumerate(inputs)], axis=0)
    return total.astype(np.int32), contributors


def loop_of(cfg: JobConfig, ops: list[Op]) -> tuple[str, list[tuple[float, float]]]:
    """The loop's arithmetic (gradswitch/hosts/digits_job.py TrainLoop.run) on the same sums: per tensor the fixed
    point of exactly the ranks its messages name, each element divided by them, SGD; per iteration the fewest
    contributors over the tensors and the averaged gradient's relative error against the mean of all 4. The final
    model's digest and, per iteration, (contributors, gradient_error)."""
    batches, model, encoder = Minibatches(cfg.seed, 4), Model.initial(cfg.seed), Encoder(cfg)
    per_iteration = len(digits_reductions())
    records = []
    for i in range(cfg.iterations):
        before = model.copy()
        grads = [batches.gradients(before, r)[0] for r in range(4)]
        held = [held_mask(contributors_of(op), 4, op.elements) for op in ops[i * per_iteration:(i + 1) * per_iteration]]
        means = []
        for j, h in enumerate(held):
            total = np.sum([np.where(h[r], encoder.fixed.encode(g[j])[0], 0).astype(np.int64)
                            for r, g in enumerate(grads)], axis=0).astype(np.int32)
            means.append(encoder.decode(Reduced(total)) / h.sum(axis=0))
        model.step(means)
        full = [sum(g[j] for g in grads) / 4 for j in range(len(held))]
        error = float(np.sqrt(sum(np.sum((m - f) ** 2) for m, f in zip(means, full, strict=True))
                              / sum(np.sum(f**2) for f in full)))
        records.append((float(min(int(h.sum(axis=0).min()) for h in held)), error))
    return model.digest(), records


def test_a_k_of_n_sum_is_checked_against_the_ranks_it_holds_and_divided_by_them() -> None:
    """NetReduce 3 of 4, per tensor: each tensor's all-reduce names its own messages' contributors; every rank divides
    each tensor's elements by the workers its own sum holds (the same step everywhere: one model, the loop's
    arithmetic's), checks each tensor's sum exactly against those ranks' gradients, and records the fewest contributors
    over the iteration's tensors and the gradient's error against the mean of all 4 over all tensors, both as the
    loop computes them. A sum of all 4 that names 3 fails the check."""
    cfg = digits_job(4, 3)
    graph = digits_graph(4, 3)
    sources = [DigitsData(cfg, r, ops_of(graph, r)) for r in range(4)]
    ops = sorted(ops_of(graph, 0).values(), key=lambda o: o.sequence)
    assert [o.elements for o in ops[:4]] == SIZES and SIZES[-1] > MESSAGE_ELEMENTS  # fc1.weight: several messages
    for op in ops:
        total, contributors = partial_sum(sources, op)
        for s in sources:
            s.finished(op, total, contributors)
            assert np.array_equal(s.expected(op), total)
    reports = [s.report() for s in sources]
    digest, loop = loop_of(cfg, ops)
    assert {r.extra["model_digest"] for r in reports} == {digest}  # every rank took the loop's step
    for r in reports:
        assert all(it["correct"] and it["wrong_elements"] == 0 for it in r.iterations)
        assert [(it["extra"]["contributors"], it["extra"]["gradient_error"]) for it in r.iterations] == loop
    assert [c for c, _ in loop] == [3.0, 3.0, 4.0]
    assert all(0.01 < e < 1 for _, e in loop[:2]) and loop[2][1] < 1e-3  # all 4: the fixed point's rounding alone
    n_of_n = [DigitsData(cfg, r, ops_of(graph, r)) for r in range(4)]  # the same sums, told nothing: divided by N
    for op in ops:
        total, _ = partial_sum(n_of_n, op)
        for s in n_of_n:
            s.finished(op, total)
    assert n_of_n[0].model.digest() != digest  # another model than each tensor divided by its own sum's workers

    wrong = [DigitsData(cfg, r, ops_of(graph, r)) for r in range(4)]
    op = ops[0]
    full = np.sum([s.input(op).astype(np.int64) for s in wrong], axis=0).astype(np.int32)
    wrong[0].finished(op, full, contributors_of(op))
    assert not np.array_equal(wrong[0].expected(op), full)  # fc2.bias: the sum of all 4 where 3 were named

    exponent = digits_job(4, 1, float_mode="exponent")  # block exponents' sums hold every rank (the spec says so too)
    source = DigitsData(exponent, 0, ops_of(digits_graph(4, 1, exponents=True), 0))
    codes = min(ops_of(digits_graph(4, 1, exponents=True), 0).values(), key=lambda o: o.sequence)
    with pytest.raises(ValueError, match=r"k of N\) is for fixed point"):
        source.finished(codes, source.input(codes), ((0, 1, 2),))


def test_synthetic_data_checks_a_k_of_n_sum_against_its_contributors() -> None:
    """A synthetic all-reduce's k-of-N output must be the sum of exactly the ranks each message names; an N-of-N
    one every rank's, as before; only an all-reduce's sum may leave ranks out."""
    graph = collective_graph(CollectiveKind.ALL_REDUCE, 4, 3 * MESSAGE_ELEMENTS * 4)
    op = next(iter(ops_of(graph, 0).values()))
    source = SyntheticData(5)
    inputs = [op.input(5, q) for q in range(4)]
    contributors = ((0, 1, 2), (1, 2, 3), (0, 1, 2, 3))
    source.finished(op, inputs[0], contributors)
    want = source.expected(op)
    m = MESSAGE_ELEMENTS
    assert np.array_equal(want[:m], inputs[0][:m] + inputs[1][:m] + inputs[2][:m])
    assert np.array_equal(want[m : 2 * m], inputs[1][m : 2 * m] + inputs[2][m : 2 * m] + inputs[3][m : 2 * m])
    assert np.array_equal(want[2 * m :], np.sum(inputs, axis=0)[2 * m :])
    assert np.array_equal(source.expected(op), op.expected(5))  # told nothing: every rank
    gather = next(iter(ops_of(collective_graph(CollectiveKind.ALL_GATHER, 4, 4096), 0).values()))
    with pytest.raises(ValueError, match="only an all-reduce's sum holds some ranks alone, not all_gather's"):
        source.finished(gather, inputs[0][:4], contributors)
