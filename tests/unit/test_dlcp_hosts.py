"""DLCP on the hosts: class marking, framing with droppable bitmaps, and marker/trailer agreement."""

from __future__ import annotations

import numpy as np
import pytest

from controller.controls.dlcp import default_classes, rate_param
from controller.p4rt import Ternary
from protocol.dlcp import marking
from roce.headers import Transport
from roce.qp import TRAILER_BYTES, QpConfig, Requester, droppable_bitmap
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
