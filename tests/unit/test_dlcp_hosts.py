"""DLCP on the hosts: class marking, framing with droppable bitmaps, and marker/trailer agreement."""

from __future__ import annotations

import numpy as np
import pytest

from controller.controls.dlcp import default_classes, rate_param
from controller.p4rt import TableEntry, Ternary
from protocol.dlcp import marking
from roce.headers import Opcode, Transport
from roce.qp import TRAILER_BYTES, QpConfig, Requester, droppable_bitmap
from tests.memlink import MemoryHub
from workers.dlcp import DlcpPolicy, Framing, Tag, layer_class, magnitude_class


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


def test_framing_cuts_messages_and_marks_only_small_back_layer_middle_packets():
    mtu = 256
    f = Framing(mtu, DlcpPolicy(drop=True, drop_min_layer_class=4, drop_max_magnitude_class=1))
    small, large = [1] * 64, [1000] * 64
    data = b"".join(ints(small if i % 2 else large) for i in range(100))  # 100 packets of data
    msgs = f.messages(data, Tag(layer_class=6, mean_abs=500.0))
    assert [off for off, _ in msgs] == [0, 64 * mtu]  # two messages of at most 64 packets
    assert all(len(m) <= 64 * mtu for _, m in msgs)
    bitmap = droppable_bitmap(msgs[0][1])
    dropped = [i for i in range(64) if bitmap >> i & 1]
    assert dropped and all(i % 2 == 1 for i in dropped) and 0 not in dropped and 63 not in dropped
    assert f.read(bytearray(b"".join(m for _, m in msgs)), 0, len(data)) == data
    assert f.slot_bytes(len(data)) == 64 * mtu + (len(data) - f.piece) + TRAILER_BYTES
    front = f.messages(data, Tag(layer_class=1, mean_abs=500.0))
    assert droppable_bitmap(front[0][1]) == 0  # front layers are never droppable


def test_requester_marks_exactly_the_packets_the_trailer_calls_droppable():
    mtu = 256
    f = Framing(mtu, DlcpPolicy(drop=True))
    req = Requester(QpConfig(qpn=1, remote_qpn=2, mtu=mtu, window=128), marker=f.marker)
    data = b"".join(ints([1] * 64 if i % 3 else [900] * 64) for i in range(20))
    tag = Tag(layer_class=7, mean_abs=300.0)
    (_, message), = f.messages(data, tag)
    req.post_write(message, 0, 9, tag=tag)
    packets: list[Transport] = req.transmit(0.0)
    bitmap = droppable_bitmap(message)
    assert [p.bth.resv7 >> 6 for p in packets] == [bitmap >> i & 1 for i in range(len(packets))]
    assert all((p.bth.resv7 >> 3) & 7 == 7 for p in packets)
    assert [(p.bth.resv7 >> 1) & 3 for p in packets[1:3]] == [magnitude_class(p.payload, 300.0) for p in packets[1:3]]


def test_dlcp_job_ids_beyond_the_switch_counters_are_refused():
    from controller.controls.dlcp import Features, features_entry

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

    from tests.inmemory import run_ok, training, training_job
    from workers.config import Scheduling, Sync

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

    from controller.dlcp_settings import DlcpSettings
    from mininet_topos.topologies import leafspine

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
