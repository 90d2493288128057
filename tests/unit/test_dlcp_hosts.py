"""DLCP on the hosts: class marking, magnitude classes from real gradients, order-tolerant receivers
and trimmed packets zero-filled by real workers on an in-memory network."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pytest

from gradswitch.control.controls.dlcp import default_classes, rate_param
from gradswitch.control.p4rt import TableEntry, Ternary
from gradswitch.protocol.dlcp import DROPPABLE, MAGNITUDE_CLASSES, marking
from gradswitch.roce.headers import Opcode, Transport
from gradswitch.roce.qp import QpConfig, Requester
from gradswitch.workload.dlcp import DlcpPolicy, Magnitudes, Marker, Tag, layer_class, magnitude_class, packet_means
from tests.memlink import RESV7_BYTE, MemoryHub


def test_marking_layout():
    assert marking(True, 5, 2) == 0b1_101_10_0
    assert marking(False, 0, 0) == 0
    with pytest.raises(ValueError):
        marking(False, 8, 0)


def test_front_layers_get_class_zero():
    assert layer_class(9, 10) == 0  # index 9 = the first layer (tensors go in back-propagation order)
    assert layer_class(0, 10) == 7
    assert [layer_class(i, 1) for i in range(1)] == [0]


def test_default_mapping_puts_front_layers_and_large_values_higher():
    rules = default_classes(3, by_magnitude=True)
    by_value = {}
    for r in rules:
        key = r.match["hdr.bth.resv7"]
        assert isinstance(key, Ternary)
        by_value[(key.value, key.mask)] = r.params["priority"]
    assert by_value[(0 << 3, 0b0111000)] == 6  # front layer
    assert by_value[(7 << 3, 0b0111000)] == 1  # back layer
    assert by_value[(7 << 3 | 3 << 1, 0b0111110)] == 2  # back layer, large values: one higher
    assert len(default_classes(3)) == 8  # by default, one queue per layer class only
    assert rate_param(100) == 12800  # 100 Mb/s = 12800 bytes per 1024 us


def ints(values: list[int]) -> bytes:
    return np.array(values, dtype=">i4").tobytes()


def digits_gradient_values(mtu: int = 256) -> list[npt.NDArray[np.int32]]:
    """A real gradient: train-digits' MLP on a minibatch of scikit-learn's digits, in fixed point as sent."""
    from gradswitch.workload.digits import Model, data
    from gradswitch.workload.floats import FixedPoint

    x, y, _, _ = data(1)
    grads, _ = Model.initial(1).gradients(x[:32], y[:32])
    return [FixedPoint(20, 4).encode(g.ravel())[0] for g in reversed(grads)]


def test_magnitude_classes_are_the_quartiles_of_a_real_gradients_packets():
    """Thresholds: the quartiles of the per-packet mean |v| of the gradient a worker sends; its own packets
    then fall a quarter into each class, and a packet's class is its place among them."""
    values = digits_gradient_values()
    per_packet = 64  # MTU 256
    m = Magnitudes.of(values, per_packet)
    means = np.concatenate([packet_means(v, per_packet) for v in values])
    assert len(means) == 1 + 20 + 2 + 128  # fc2.bias 10 values, fc2.weight 1280, fc1.bias 128, fc1.weight 8192
    assert m.thresholds == tuple(np.quantile(means, [0.25, 0.5, 0.75]))
    assert m.thresholds[0] < m.thresholds[1] < m.thresholds[2]  # a real spread, not one value
    counts = np.bincount([m.classify(float(v)) for v in means], minlength=MAGNITUDE_CLASSES)
    assert all(abs(int(c) - len(means) / 4) <= 1 for c in counts), counts
    # packet_means is a per-packet mean: its first entry is the mean |v| of the first 64 values
    assert means[0] == pytest.approx(np.mean(np.abs(values[0][:64].astype(np.float64))))


def test_the_marker_classes_every_packet_by_its_values_per_contribution():
    """Any packet may be droppable, first and last included; its magnitude class comes from the sender's
    thresholds and its mean |v| over the gradients it sums (a sum of 3 of one size reads as one of them)."""
    mtu = 256
    m = Magnitudes((10.0, 100.0, 1000.0))
    marker = Marker(DlcpPolicy(drop=True, drop_min_layer_class=4, drop_max_magnitude_class=1))
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=mtu, window=128), marker=marker)
    means = [5, 50, 500, 5000, 60]  # classes 0 1 2 3 1
    data = b"".join(ints([v] * 64) for v in means)
    req.post_write(data, 0, 9, tag=Tag(layer_class=6, magnitudes=m))
    req.post_write(ints([3 * 50] * 64), 0, 9, tag=Tag(layer_class=6, magnitudes=m, contributions=3))  # Only
    req.post_write(data, 0, 9, tag=Tag(layer_class=1, magnitudes=m))  # a front layer
    req.post_write(data, 0, 9, tag=Tag(layer_class=6, magnitudes=m, droppable=False))  # e.g. exponent codes
    packets: list[Transport] = req.transmit(0.0)
    classes = [(p.bth.resv7 >> 1) & 3 for p in packets]
    droppable = [bool(p.bth.resv7 & DROPPABLE) for p in packets]
    assert classes[:6] == [0, 1, 2, 3, 1, 1] and all((p.bth.resv7 >> 3) & 7 == 6 for p in packets[:6])
    assert droppable[:6] == [True, True, False, False, True, True]  # the first, the last and an Only too
    assert packets[0].opcode == Opcode.WRITE_FIRST and packets[4].opcode == Opcode.WRITE_LAST
    assert packets[5].opcode == Opcode.WRITE_ONLY
    assert not any(droppable[6:])  # front layer, and a write that may not lose packets
    assert not any(p.bth.resv7 & 1 for p in packets)  # the TRIMMED bit is the switches' alone


@pytest.mark.parametrize(("dtype", "float_mode"), [("int32", "fixed"), ("float32", "fixed"), ("float32", "exponent")])
def test_the_values_a_worker_contributes_for_its_thresholds(dtype, float_mode):
    """What Magnitudes.of sees: int32 gradients as they are, fixed point as sent, and in exponent mode the
    values scaled by the worker's own block exponents (each nonzero block's peak in [2**(B-1), 2**B))."""
    from gradswitch.workload.encoding import Encoder
    from tests.inmemory import job

    enc = Encoder(job("ring", 4, dtype=dtype, float_mode=float_mode))
    x = enc.gradient(3000, 1, 0, 0)
    got = enc.magnitude_values(x)
    assert got.dtype == np.int32 and len(got) == 3000
    if float_mode == "exponent":
        b = enc.block.value_bits
        peaks = np.abs(got[: 2048].astype(np.int64)).reshape(-1, enc.block.block).max(axis=1)
        assert all(2 ** (b - 1) <= p <= 2**b for p in peaks)
    elif dtype == "float32":
        assert np.array_equal(got, enc.fixed.encode(np.asarray(x))[0])
    else:
        assert np.array_equal(got, x)


def test_without_thresholds_every_packet_is_in_the_top_class():
    assert magnitude_class(ints([1] * 64), Tag(7)) == MAGNITUDE_CLASSES - 1


# ---- trimmed packets: real workers, a scripted switch that trims droppable packets ----


def test_a_ring_job_whose_switch_trims_completes_with_zero_filled_packets_and_a_bounded_error(tmp_path):
    """A DLCP ring job (ResNet-50's gradients, int32) whose in-memory network trims 30 % of the droppable
    packets, as a switch over its drop threshold would. Only back layers' small-valued packets are
    droppable; each trimmed one is zero-filled within the 10 % budget (or resent beyond it), so the job
    completes, every iteration within its error bound. An iteration whose packets all arrived is exact,
    and no more elements are wrong than the zero-filled packets held, times the workers they reach."""
    import random

    from tests.inmemory import job, run_ok

    rnd = random.Random(3)
    hub = MemoryHub(seed=1, trim=lambda d: rnd.random() < 0.3)
    policy = DlcpPolicy(drop=True, loss_budget=0.1, max_relative_error=1.0)
    cfg = replace(job("ring", 3, iterations=3, transport="sr", workload="resnet50", scale=0.001, window=32),
                  dlcp=policy)
    results = run_ok(cfg, tmp_path, hub)

    assert hub.trimmed
    for datagram in hub.trimmed:
        resv7 = datagram[RESV7_BYTE] & 0x7F
        assert (resv7 >> 3) & 7 >= policy.drop_min_layer_class and (resv7 >> 1) & 3 <= policy.drop_max_magnitude_class
    stats = {nid: r["stats"] for nid, r in results.items()}
    zero = sum(s["responder"].get("zero_filled", 0) for s in stats.values())
    assert sum(s["responder"].get("trimmed", 0) for s in stats.values()) == len(hub.trimmed)
    assert 0 < zero < len(hub.trimmed)  # some over the budget: resent instead
    assert sum(s["requester"].get("retransmitted", 0) for s in stats.values()) >= len(hub.trimmed) - zero
    per_packet = cfg.mtu // 4
    for it in range(cfg.iterations):
        records = [r["iterations"][it] for r in results.values()]
        zeroed = sum(rec["extra"]["zero_filled_packets"] for rec in records)
        wrong = sum(rec["wrong_elements"] for rec in records)
        assert all(rec["correct"] and rec["check"] == "exact" for rec in records)
        assert wrong <= zeroed * per_packet * len(results)
        if zeroed == 0:
            assert wrong == 0
        for rec in records:
            assert (rec["wrong_elements"] > 0) == (rec["extra"]["relative_error"] > 0)
            assert rec["extra"]["relative_error"] <= policy.max_relative_error
    assert any(rec["wrong_elements"] for r in results.values() for rec in r["iterations"])


def test_a_parameter_server_classes_its_pulls_from_the_pushes_it_received(tmp_path):
    """A PS server has no gradient of its own: its pulls are classed against thresholds from the workers'
    pushes, per contribution (the sum of N over N). On real gradients (train-digits: the workers' gradients
    of one model agree in sign and size) the pulls spread over every class like the pushes; a network that
    trims some of them leaves a job that completes, zero-filled within its budget."""
    import random

    from tests.inmemory import job, run_ok

    sent: list[bytes] = []

    def record(datagram: bytes) -> float:
        sent.append(datagram)
        return 0.0

    rnd = random.Random(4)
    hub = MemoryHub(seed=1, delay=record, trim=lambda d: rnd.random() < 0.2)
    policy = DlcpPolicy(drop=True, loss_budget=0.2, drop_min_layer_class=0, drop_max_magnitude_class=1,
                        max_relative_error=1.0)
    cfg = replace(job("ps", 2, 1, iterations=3, transport="sr", workload="train-digits", dtype="float32",
                      ps_key_bytes=4096), dlcp=policy)
    results = run_ok(cfg, tmp_path, hub)

    def classes(src: str) -> list[int]:
        data = [d for d in sent if d[12:16] == bytes(int(b) for b in src.split(".")) and d[28] != Opcode.ACKNOWLEDGE]
        return [(d[RESV7_BYTE] >> 1) & 3 for d in data]

    for src in ("10.0.2.1", "10.0.1.1"):  # the server's pulls, a worker's pushes
        counts = np.bincount(classes(src), minlength=MAGNITUDE_CLASSES)
        assert all(c > 0 for c in counts), (src, counts)
    assert hub.trimmed and sum(r["stats"]["responder"].get("zero_filled", 0) for r in results.values()) > 0


def test_dlcp_job_ids_beyond_the_switch_counters_are_refused():
    from gradswitch.control.controls.dlcp import Features, features_entry

    assert features_entry(63, Features(priority=True)).params["priority"] == 1
    for job in (0, 64, 200):
        with pytest.raises(ValueError, match="DLCP_MAX_JOBS"):
            features_entry(job, Features())


# ---- order-tolerant receivers with real workers on a reordering in-memory network ----


def reorder_like_dlcp(datagram: bytes) -> float:
    """The reordering DLCP's switches cause, scripted: back layers' packets (layer class >= 4) wait
    in a lower strict-priority queue (40 ms), and every odd PSN takes the slower of two sprayed
    paths (10 ms). Acknowledgements go straight through. Nothing is lost."""
    opcode, resv7, psn = datagram[28], datagram[36] & 0x7F, int.from_bytes(datagram[37:40], "big")
    if opcode == Opcode.ACKNOWLEDGE:
        return 0.0
    return (0.04 if (resv7 >> 3) & 0b111 >= 4 else 0.0) + (0.01 if psn % 2 else 0.0)


@pytest.mark.parametrize("order_tolerant", [False, True])
def test_reordering_alone_causes_no_retransmission_with_order_tolerant_receivers(tmp_path, order_tolerant):
    """A DLCP ring job training VGG-16 (priority partitions, layer sync) through a network that only
    reorders. Order-tolerant receivers judge holes a reorder delay (rto / 4 = 50 ms) after their
    message's end: they NAK nothing, so nothing is resent for reordering (a resend can only be the
    sender's own timeout, when this shared machine stalls a thread past the RTO), and every result
    is exact. Today's receivers (order_tolerant = false) judge a hole 50 ms after the first packet
    past it, NAK packets that are still queued, and those are resent."""
    from dataclasses import replace

    from gradswitch.workload.job import Scheduling, Sync
    from tests.inmemory import run_ok, training, training_job

    hub = MemoryHub(seed=1, delay=reorder_like_dlcp)
    cfg = replace(training_job("ring", 3, iterations=2, transport="sr", workload="vgg16", scale=0.0005, rto=0.2),
                  dlcp=DlcpPolicy(reorder=True, order_tolerant=order_tolerant),
                  training=training(scheduling=Scheduling.PRIORITY, sync=Sync.LAYER, in_flight=3))
    results = run_ok(cfg, tmp_path, hub)

    def total(side: str, name: str) -> int:
        return sum(r["stats"][side].get(name, 0) for r in results.values())

    assert hub.delayed > 0 and hub.dropped == 0 and total("responder", "out_of_order") > 100
    for r in results.values():
        assert [it["correct"] for it in r["iterations"]] == [True] * 2
    if order_tolerant:
        assert total("requester", "naks") == 0
        assert total("requester", "retransmitted") <= total("requester", "timeouts")
    else:  # what DLCP's receivers must not do: resend for reordering alone
        assert total("requester", "naks") > 0 and total("requester", "retransmitted") > total("requester", "timeouts")


class _Tables:
    """A switch session that keeps entries in memory (the write/read logic of DlcpSettings alone)."""

    def __init__(self) -> None:
        self.entries: list[TableEntry] = []

    def read_table(self, table: str) -> list[TableEntry]:
        return [e for e in self.entries if e.table == table]

    def insert(self, entries: list[TableEntry]) -> None:
        self.entries += entries

    def modify(self, entries: list[TableEntry]) -> None:
        keys = {(e.table, tuple(e.match.items())) for e in entries}
        self.entries = [e for e in self.entries if (e.table, tuple(e.match.items())) not in keys] + entries

    def delete(self, entries: list[TableEntry]) -> None:
        keys = {(e.table, tuple(e.match.items())) for e in entries}
        self.entries = [e for e in self.entries if (e.table, tuple(e.match.items())) not in keys]


def test_a_partial_threshold_change_keeps_each_switchs_own_defaults():
    """Hosts at 10 Mb/s, the fabric at 100 Mb/s: leaves and spines have different defaults; setting
    priority 1 on every switch must not copy the first switch's other thresholds to the rest."""
    from typing import Any

    from gradswitch.control.dlcp_settings import DlcpSettings
    from gradswitch.topology.generators import leafspine

    topo = leafspine(leaves=2, spines=1, hosts_per_leaf=1, bw_mbps=10.0, fabric_bw_mbps=100.0)
    sessions = {s.name: _Tables() for s in topo.switches}

    class Fabric:
        def __init__(self) -> None:
            self.topo = topo

        def switch_names(self) -> list[str]:
            return list(sessions)

        def session(self, name: str) -> Any:
            return sessions[name]

    settings = DlcpSettings(Fabric())  # type: ignore[arg-type]
    defaults = settings.set_thresholds()
    assert defaults["leaf1"] != defaults["spine1"]  # per link rate
    now = settings.set_thresholds({1: 500}, keep_others=True)
    for name, values in now.items():
        assert values == {**defaults[name], 1: 500}, name
        assert settings.thresholds(name) == values
