"""The training iteration: compute model, plan, the scheduler on a simulated clock, and real workers.

The scheduler tests drive `gradswitch.hosts.iteration.Scheduler` through a runtime whose clock only moves
when the scheduler waits and whose reductions take a fixed time each, one at a time (a link):
every time asserted is computed from the test's own layer and op durations.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace

import pytest

from gradswitch.hosts.iteration import Scheduler
from gradswitch.workload.compute import iteration_s, layer_times
from gradswitch.workload.gradients import compute_profile
from gradswitch.workload.job import Emulation, JobConfig, Scheduling, Sync
from gradswitch.workload.plan import Layer, Op, Piece, Plan, fifo_ops, plan, priority_ops
from gradswitch.workload.timeline import Event, EventKind, timings
from tests.inmemory import run_ok, training, training_job
from tests.memlink import MemoryHub
from tests.netreduce_model import NetReduceHub

# ---- compute model ----


@pytest.mark.parametrize("model, gflops", [("resnet50", 4.1), ("vgg16", 15.5), ("bert-base", 11.2)])
def test_forward_flops_match_the_published_multiply_accumulates(model, gflops):
    # ResNet-50 4.1 and VGG-16 15.5 GMACs per 224x224 image; BERT-base ~11.2 GMACs per 128 tokens
    # (85M encoder weights x 128 tokens + attention + the masked-LM head on 20 tokens).
    compute = compute_profile(model)
    assert compute is not None
    assert compute.forward_flops / 2 / 1e9 == pytest.approx(gflops, rel=0.06)


# Training FLOPs per sample of the models the calibrations were measured on, counted independently
# of gradswitch/workload/models/generate.py: 3x the forward pass (forward, input and weight gradients) of the
# published multiply-accumulates (ResNet-50: 4.1 G per 224x224 image), and for BERT-large the usual
# 6 x parameters x tokens (its 302 M non-embedding weights, Kaplan et al. 2020) plus attention's
# 6 x 2 x layers x tokens^2 x hidden. The efficiencies stored in gradswitch/workload/models/*.json were derived
# from the measured throughputs with generate.py's own layer-by-layer count: agreeing with these
# within a few percent shows that each was computed on the model that was measured, not on the
# model that borrows it (BERT-base borrows BERT-large's: its own FLOPs are 3x fewer).
INDEPENDENT_TRAIN_FLOPS = {
    "resnet50": 3 * 2 * 4.1e9,
    "bert-large-seq384": 6 * 302e6 * 384 + 6 * 2 * 24 * 384**2 * 1024,
    "bert-large-seq128": 6 * 302e6 * 128 + 6 * 2 * 24 * 128**2 * 1024,
}


@pytest.mark.parametrize("model", ["resnet50", "vgg16", "bert-base"])
def test_calibrated_efficiency_is_the_measured_throughput_on_the_measured_model(model):
    from gradswitch.workload.compute import PEAK_FLOPS

    compute = compute_profile(model)
    assert compute is not None and len(compute.calibrations) == 4
    for c in compute.calibrations:
        assert c.source.startswith("https://")
        flops = INDEPENDENT_TRAIN_FLOPS[c.measured_model]
        assert c.efficiency == pytest.approx(flops * c.samples_per_s / PEAK_FLOPS[(c.device, c.precision)],
                                             rel=0.08), (c.device, c.precision, c.measured_model)
    # the model that was measured runs at its measured throughput; one that borrows the efficiency
    # at its own FLOPs' pace (VGG-16: 15.5 G multiply-accumulates, 3.8x ResNet-50's, so about that slower)
    own = compute.calibration(compute.calibrations[0].device, compute.calibrations[0].precision)
    assert own is not None
    per_sample = iteration_s(compute, own.device, own.precision, own.batch) / own.batch
    assert per_sample * own.samples_per_s == pytest.approx(compute.train_flops / INDEPENDENT_TRAIN_FLOPS[
        own.measured_model], rel=0.08)


def test_backward_is_twice_forward_except_the_first_layer():
    compute = compute_profile("vgg16")
    assert compute is not None
    times = layer_times(compute, compute.calibrations[0].device, compute.calibrations[0].precision, 32)
    assert times[0].backward_s == pytest.approx(times[0].forward_s)
    assert all(t.backward_s == pytest.approx(2 * t.forward_s) for t in times[1:])


# ---- the plan ----


def layers3() -> list[Layer]:
    # forward order: front (tensor 2), middle (tensor 1), back (tensor 0); backward 1 s each
    return [Layer(0, "front", 0.5, 1.0, (2,)), Layer(1, "middle", 0.5, 1.0, (1,)), Layer(2, "back", 0.5, 1.0, (0,))]


def test_fifo_buckets_follow_backward_and_are_ready_with_their_last_tensor():
    ops = fifo_ops(layers3(), [100, 100, 100], bucket_elements=150)
    assert [[p.tensor for p in op.pieces] for op in ops] == [[0, 1], [2]]
    assert [op.ready_s for op in ops] == [2.0, 3.0]  # back ready at 1 s, middle at 2 s, front at 3 s


def test_priority_lets_a_front_layer_overtake_a_back_layer_being_sent():
    # back layer: 1000 elements ready at 1 s, in partitions of 100 at 0.01 s per element (1 s each);
    # the middle's 10 are ready at 2 s, the front's 100 at 3 s: each goes as soon as the link is free,
    # before the back layer's remaining partitions.
    ops = priority_ops(layers3(), [1000, 10, 100], partition_elements=100, per_element_s=0.01)
    order = [(op.layer, op.pieces[0].lo) for op in ops]
    # 1-2 s back[0]; 2-2.1 middle; 2.1-3.1 back[100]; 3.1 front (ready at 3 s), then the back's other 8
    assert order[:4] == [(2, 0), (1, 0), (2, 100), (0, 0)]
    assert [o for o in order if o[0] == 2] == [(2, lo) for lo in range(0, 1000, 100)]


def test_priority_packs_small_ready_partitions_into_one_reduction():
    # the back layer (1000) occupies the link 1-11 s; the middle's 10 (ready 2 s) and the front's 30
    # (ready 3 s) wait, then leave together as one reduction of 40 <= 1000, front first; without the
    # link busy (a fast link) each goes alone when it is ready.
    ops = priority_ops(layers3(), [1000, 10, 30], partition_elements=1000, per_element_s=0.01)
    assert [[(p.tensor, p.elements) for p in op.pieces] for op in ops] == [[(0, 1000)], [(2, 30), (1, 10)]]
    assert (ops[1].layer, ops[1].ready_s) == (0, 3.0)
    alone = priority_ops(layers3(), [1000, 10, 30], partition_elements=1000, per_element_s=1e-6)
    assert [op.layer for op in alone] == [2, 1, 0]


def test_every_node_derives_the_same_plan():
    """The plan is a function of the job alone, and every node reads the job from the JSON file the
    runner wrote: what a node derives there is what the runner's config gives."""
    cfg = replace(training_job("ring", 4), training=training(scheduling=Scheduling.PRIORITY))
    as_read = JobConfig.from_json(cfg.to_json())
    assert as_read == cfg
    assert plan(as_read) == plan(cfg) and len(plan(cfg).ops) > 10


# ---- the scheduler on a simulated clock ----


class SimRuntime:
    """A clock that moves only when the scheduler waits; reductions take `op_s` each, one at a time."""

    def __init__(self, op_s: dict[int, float]) -> None:
        self.t = 0.0
        self.op_s = op_s
        self.link_free = 0.0
        self.produced: list[tuple[int, str, float]] = []

    def now(self) -> float:
        return self.t

    def wait(self, max_wait: float, what: str) -> None:
        self.t += max(max_wait, 1e-4)

    def start(self, iteration: int, op: Op) -> Generator[object, None, None]:
        begin = max(self.t, self.link_free)
        self.link_free = done = begin + self.op_s[op.index]
        yield lambda: self.t >= done - 1e-9

    def gradients(self, iteration: int, layer: Layer) -> None:
        self.produced.append((iteration, layer.name, self.t))

    def background(self, budget_s: float) -> bool:
        return False


def sim(ops: list[Op], op_s: dict[int, float], sync: Sync = Sync.ITERATION, iterations: int = 2,
        in_flight: int = 4) -> tuple[Scheduler, SimRuntime, list]:
    layers = layers3()
    p = Plan(tuple(layers), tuple(ops), (2, 1, 0), (100, 100, 100))
    rt = SimRuntime(op_s)
    s = Scheduler(p, training(sync=sync, in_flight=in_flight, dilation=1.0), rt, timeout=1000)  # type: ignore[arg-type]
    return s, rt, s.run(iterations)


def one_op_per_layer() -> list[Op]:
    return [Op(0, (Piece(0, 0, 100),), 2, 1.0), Op(1, (Piece(1, 0, 100),), 1, 2.0), Op(2, (Piece(2, 0, 100),), 0, 3.0)]


def test_a_bucket_starts_when_backward_produced_it_while_backward_goes_on():
    s, rt, _ = sim(one_op_per_layer(), {0: 0.5, 1: 0.5, 2: 0.5})
    starts = {e.name: e.start for e in s.events if e.kind == EventKind.OP and e.iteration == 0}
    # forward 1.5 s, then backward: back's gradient at 2.5 s, middle's at 3.5 s, front's at 4.5 s
    assert starts == pytest.approx({"op 0": 2.5, "op 1": 3.5, "op 2": 4.5}, abs=2e-3)
    assert [(n, round(t, 2)) for i, n, t in rt.produced if i == 0] == [("back", 2.5), ("middle", 3.5), ("front", 4.5)]


def test_iteration_sync_waits_for_every_gradient_and_exposed_is_what_computation_did_not_hide():
    _, _, t = sim(one_op_per_layer(), {0: 0.5, 1: 0.5, 2: 2.0})
    # the front's op ends at 4.5 + 2.0 = 6.5: the next forward starts then
    assert t[0].start == pytest.approx(0.0) and t[0].end == pytest.approx(6.5, abs=2e-3)
    assert t[0].compute_s == pytest.approx(4.5) and t[0].exposed_comm_s == pytest.approx(2.0, abs=2e-3)
    # communication in progress 2.5-3.0, 3.5-4.0, 4.5-6.5 = 3.0 s, of which 1.0 s under backward
    assert t[0].comm_s == pytest.approx(3.0, abs=5e-3) and t[0].overlap == pytest.approx(1 / 3, abs=5e-3)


def test_layer_sync_starts_a_layer_as_soon_as_its_gradient_is_back():
    # the back layer's op is slow (4 s from 2.5 s, to 6.5 s); the front's and middle's are quick, behind it
    # on the link: middle's done 7.0, front's done 7.5 (one link). Under layer sync the front
    # forward starts at 7.5 and the back layer's forward, last, needs nothing more.
    ops = one_op_per_layer()
    s, _, t = sim(ops, {0: 4.0, 1: 0.5, 2: 0.5}, sync=Sync.LAYER)
    fwd = {e.name: e.start for e in s.events if e.kind == EventKind.FORWARD and e.iteration == 1}
    assert fwd["front"] == pytest.approx(7.5, abs=2e-3)
    assert fwd["middle"] == pytest.approx(8.0, abs=2e-3) and fwd["back"] == pytest.approx(8.5, abs=2e-3)
    # with priority the front's op would go first: here the order is given, and layer sync only follows it
    _, _, t_iter = sim(ops, {0: 4.0, 1: 0.5, 2: 0.5}, sync=Sync.ITERATION)
    assert t[0].end == pytest.approx(t_iter[0].end, abs=2e-3)  # the front layer's gradient came last in both


def test_priority_order_reduces_exposed_communication_under_layer_sync():
    # The same gradients, front-first: the front's op goes first once ready, and the next forward
    # overlaps the back layer's long reduction.
    fifo = [Op(0, (Piece(0, 0, 100),), 2, 1.0), Op(1, (Piece(2, 0, 100),), 0, 3.0)]
    prio = [Op(0, (Piece(2, 0, 100),), 0, 3.0), Op(1, (Piece(0, 0, 100),), 2, 1.0)]
    middle = Op(2, (Piece(1, 0, 100),), 1, 2.0)
    a = sim([*fifo, replace(middle, index=2)], {0: 4.0, 1: 0.2, 2: 0.2}, sync=Sync.LAYER)[2]
    b = sim([*prio, replace(middle, index=2)], {0: 0.2, 1: 4.0, 2: 0.2}, sync=Sync.LAYER)[2]
    assert b[0].exposed_comm_s < a[0].exposed_comm_s - 0.5


def test_in_flight_bounds_reductions_started_and_not_done():
    ops = [Op(i, (Piece(0, 20 * i, 20 * (i + 1)),), 2, 1.0) for i in range(5)] + [
        Op(5, (Piece(1, 0, 100),), 1, 2.0), Op(6, (Piece(2, 0, 100),), 0, 3.0)]
    s, _, _ = sim(ops, dict.fromkeys(range(7), 1.0), in_flight=2, iterations=1)
    spans = sorted((e.start, e.end) for e in s.events if e.kind == EventKind.OP)
    for t, _ in spans:
        assert sum(1 for a, b in spans if a <= t < b - 1e-9) <= 2


class CheckingRuntime(SimRuntime):
    """SimRuntime with host work: each check takes `check_s` of the clock, done only if it fits the budget."""

    def __init__(self, op_s: dict[int, float], check_s: float) -> None:
        super().__init__(op_s)
        self.check_s = check_s
        self.to_check = 0
        self.checks: list[tuple[float, float]] = []  # (start, end)
        self.budgets: list[tuple[float, float]] = []  # (when asked, budget)

    def start(self, iteration: int, op: Op) -> Generator[object, None, None]:
        yield from super().start(iteration, op)
        self.to_check += 1

    def background(self, budget_s: float) -> bool:
        self.budgets.append((self.t, budget_s))
        if not self.to_check or self.check_s > budget_s:
            return False
        self.to_check -= 1
        self.checks.append((self.t, self.t + self.check_s))
        self.t += self.check_s
        return True


def test_host_work_runs_only_where_the_computation_leaves_time_for_it():
    """The scheduler offers host work (checks) the time the emulated GPU's computation has left, less the slack;
    a check that does not fit waits (a host busy past the computation answers its peers late). Every check done
    ends before the computation it ran under does; the long ones are left for later."""
    from gradswitch.hosts.iteration import BACKGROUND_SLACK_S

    for check_s, fits in ((0.1, True), (5.0, False)):
        rt = CheckingRuntime({0: 0.2, 1: 0.2, 2: 0.2}, check_s)
        p = Plan(tuple(layers3()), tuple(one_op_per_layer()), (2, 1, 0), (100, 100, 100))
        s = Scheduler(p, training(dilation=1.0), rt, timeout=1000)  # type: ignore[arg-type]
        s.run(2)
        computing = [(e.start, e.end) for e in s.events if e.kind in (EventKind.FORWARD, EventKind.BACKWARD)]
        assert rt.budgets and all(b > 0 for _, b in rt.budgets)
        for t, b in rt.budgets:  # offered: what the computation in progress has left, less the slack
            ends = [e for a, e in computing if a <= t < e]
            assert ends and b == pytest.approx(ends[0] - t - BACKGROUND_SLACK_S, abs=1e-9)
        for a, e in rt.checks:
            assert any(ca <= a and e <= ce - BACKGROUND_SLACK_S + 1e-9 for ca, ce in computing)
        assert bool(rt.checks) == fits


def test_exposed_communication_arithmetic():
    fwd, bwd, op = EventKind.FORWARD, EventKind.BACKWARD, EventKind.OP
    events = [Event(0, fwd, "a", 0.0, 1.0), Event(0, bwd, "a", 1.0, 3.0), Event(0, op, "op 0", 2.0, 5.0),
              Event(1, fwd, "a", 5.0, 6.0)]
    (t,) = timings(events, [(0.0, 5.0)])
    assert (t.compute_s, t.exposed_comm_s, t.comm_s) == (3.0, 2.0, 3.0)
    assert t.overlap == pytest.approx(1 / 3)


# ---- real workers on an in-memory network ----


def test_one_worker_computes_on_the_clock_for_the_modelled_time(tmp_path):
    """One worker (nothing to reduce) computes its iterations back to back. Its records' times are the
    emulated GPU's timeline (each layer ends its modelled time x D after it started), so an iteration's
    `time_s` and `compute_s` are the modelled computation by construction; what can fail is that the
    timeline is the clock's: the iterations happen inside the wall-clock window the test measures
    (CLOCK_MONOTONIC, shared with the worker), so the worker really computed for that long."""
    import time

    tr = training(dilation=2.0)
    cfg = replace(training_job("ring", 1, iterations=4), training=tr)
    compute = compute_profile("resnet50")
    assert compute is not None
    modelled = iteration_s(compute, tr.emulate.device, tr.emulate.precision, tr.emulate.batch) * tr.dilation
    before = time.monotonic()
    its = run_ok(cfg, tmp_path)[0]["iterations"]
    after = time.monotonic()
    assert before <= its[0]["start"] and its[-1]["end"] <= after
    assert its[-1]["end"] - its[0]["start"] == pytest.approx(4 * modelled, rel=0.03)
    assert after - before >= 4 * modelled


@pytest.mark.parametrize("scheduling", [Scheduling.FIFO, Scheduling.PRIORITY])
@pytest.mark.parametrize("algo, servers", [("ring", 0), ("ps", 2)])
def test_training_reductions_are_exact_with_several_in_flight_and_loss(tmp_path, algo, servers, scheduling):
    cfg = replace(training_job(algo, 3, servers, iterations=3, transport="sr"),
                  training=training(scheduling=scheduling, sync=Sync.LAYER, in_flight=3))
    results = run_ok(cfg, tmp_path, MemoryHub(loss=0.01, seed=3))
    for r in results.values():
        if r["role"] == "worker":
            assert [it["correct"] for it in r["iterations"]] == [True] * 3
            assert len({e["lane"] for e in r["timeline"] if e["kind"] == "op"}) > 1  # reductions overlapped
    assert sum(r["stats"]["requester"].get("retransmitted", 0) for r in results.values()) > 0


def test_training_through_netreduce_with_exponents(tmp_path):
    cfg = replace(training_job("netreduce", 3, iterations=3, dtype="float32", float_mode="exponent", scale=0.002),
                  training=training(scheduling=Scheduling.PRIORITY, in_flight=3))
    from gradswitch.protocol.netreduce import JobLayout

    hub = NetReduceHub(JobLayout(3, 3, 2), [n.ip for n in cfg.nodes], seed=5)
    results = run_ok(cfg, tmp_path, hub)
    for r in results.values():
        assert all(it["correct"] and 0 < it["max_abs_error"] < 1e-7 for it in r["iterations"])
    assert hub.events["completion"] == results[0]["netreduce"]["messages"] * 4


def test_zero_computation_is_the_all_reduce_loop(tmp_path):
    """With no computation, one reduction at a time and one tensor per bucket, a training run is
    today's all-reduce loop: the same reductions in the same order, and the same time. The two
    run in turn, three times each, and the faster median of each is compared (the machine is shared: with two
    turns each, one suite run on the 2-core machine had the trained median 1.26x the plain one, both passing alone)."""
    base = training_job("ring", 3, iterations=5, scale=0.002, workload="vgg16")
    train = replace(base, training=training(emulate=Emulation(25.0, compute_scale=0.0), bucket_bytes=4, in_flight=1))
    med: dict[str, float] = {}
    for attempt in range(3):
        for name, cfg in (("plain", base), ("trained", train)):
            (tmp_path / f"{name}{attempt}").mkdir()
            res = run_ok(cfg, tmp_path / f"{name}{attempt}")
            times = sorted(it["time_s"] for it in res[0]["iterations"][1:])
            med[name] = min(med.get(name, float("inf")), times[len(times) // 2])
            if name == "trained":
                assert res[0]["plan"]["ops"] == 32  # one reduction per tensor of VGG-16
                assert all(it["extra"]["compute_s"] == 0 for it in res[0]["iterations"])
    assert med["trained"] == pytest.approx(med["plain"], rel=0.25)


# ---- the ideal iteration (every reduction at its link-rate bound) ----


def test_ideal_iteration_is_computation_plus_what_the_link_bounds_leave_exposed():
    from gradswitch.hosts.ideal import ideal, ideal_iteration_s
    from gradswitch.workload.plan import allreduce_bound_s

    tr = training(emulate=Emulation(10.0, batch=32), bucket_bytes=1 << 30)  # one bucket: nothing overlaps
    cfgs = {algo: replace(training_job(algo, 4, 1 if algo == "ps" else 0), training=tr)
            for algo in ("ring", "ps", "netreduce")}
    compute = compute_profile("resnet50")
    assert compute is not None
    gpu = iteration_s(compute, tr.emulate.device, tr.emulate.precision, 32)
    step = 4 * sum(plan(cfgs["ring"]).elements) / 0.001  # real bytes of one iteration's gradients
    rate = 10e9 / 8
    for algo, cfg in cfgs.items():
        comm = allreduce_bound_s(cfg.algo, 4, len(cfg.servers), step, rate)
        assert ideal_iteration_s(cfg) == pytest.approx(gpu + comm, rel=1e-3), algo
    # communication only: the algorithms' bound ratios (ring / NetReduce = 2(N-1)/N, PS / NetReduce = N)
    none = replace(tr, emulate=Emulation(10.0, batch=32, compute_scale=0.0))
    t = {a: ideal_iteration_s(replace(c, training=none)) for a, c in cfgs.items()}
    assert t["ring"] / t["netreduce"] == pytest.approx(1.5, rel=1e-3)
    assert t["ps"] / t["netreduce"] == pytest.approx(4.0, rel=1e-3)
    assert ideal(replace(cfgs["ring"], training=none)).link_load == pytest.approx(1.0)  # nothing but transfers
    assert ideal(cfgs["ring"]).link_load == pytest.approx(t["ring"] / ideal_iteration_s(cfgs["ring"]), rel=1e-3)
    # priority partitions overlap backward: the ideal iteration is shorter than one bucket after it
    prio = replace(tr, scheduling=Scheduling.PRIORITY, sync=Sync.LAYER)
    assert ideal_iteration_s(replace(cfgs["ring"], training=prio)) < ideal_iteration_s(cfgs["ring"])
