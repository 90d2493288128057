"""The NetReduce worker (credits, windows, message numbering) against the Python switch model.

The switch program itself is tested on BMv2 (tests/bmv2/test_traces.py and the
Mininet tests); here the hosts' side is checked quickly, with loss, in both transport modes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradswitch.protocol.netreduce import MESSAGE_ELEMENTS, MTU, PACKETS, JobLayout
from gradswitch.workload.floats import BLOCK
from tests.inmemory import job, run_job
from tests.netreduce_model import NetReduceHub


def run(tmp_path: Path, workers: int, loss: float = 0.0, credits: int = 2, **kw: Any) -> tuple[dict, NetReduceHub]:
    kw.setdefault("size_bytes", 12000)
    cfg = job("netreduce", workers, iterations=3, mtu=MTU, job_id=3, credits=credits, **kw)
    hub = NetReduceHub(JobLayout(3, workers, credits), [n.ip for n in cfg.nodes], loss=loss, seed=5)
    return run_job(cfg, tmp_path, hub), hub


@pytest.mark.parametrize("workers", [2, 4])
def test_netreduce_sums_exactly(tmp_path, workers):
    results, hub = run(tmp_path, workers)
    for r in results.values():
        assert r["ok"], r.get("error")
        assert all(it["correct"] for it in r["iterations"])
    messages = results[0]["netreduce"]["messages"]
    assert hub.events["completion"] == messages * PACKETS  # every packet of every message completed once
    assert hub.events["contribution"] == messages * PACKETS * workers


@pytest.mark.parametrize("transport", ["gbn", "sr"])
def test_netreduce_recovers_from_loss(tmp_path, transport):
    results, hub = run(tmp_path, 3, loss=0.03, transport=transport)
    for r in results.values():
        assert r["ok"], r.get("error")
    assert hub.dropped > 0
    assert hub.events.get("retransmitted-result", 0) + hub.events.get("duplicate", 0) > 0


def test_credits_bound_messages_in_flight(tmp_path):
    results, hub = run(tmp_path, 3, credits=1, size_bytes=3 * MESSAGE_ELEMENTS * 4)  # three messages a tensor
    for r in results.values():
        assert r["ok"], r.get("error")
        assert r["netreduce"]["credit_waits"] > 0
    assert "no-credit" not in hub.events  # honest workers never over-send


def test_float32_through_netreduce(tmp_path):
    results, _ = run(tmp_path, 3, dtype="float32", fixed_point_bits=18)
    for r in results.values():
        assert r["ok"]
        assert all(0 < it["max_abs_error"] <= 3 * 2.0**-19 for it in r["iterations"])


def test_float32_shared_exponent_through_netreduce(tmp_path):
    results, _ = run(tmp_path, 3, dtype="float32", float_mode="exponent")
    for r in results.values():
        assert r["ok"], r.get("error")
        assert all(0 < it["max_abs_error"] < 1e-8 for it in r["iterations"])
    # the codes travel as their own messages (one code per block of one packet's values)
    blocks = -(-3000 // BLOCK)  # 12000 B = 3000 values
    assert results[0]["netreduce"]["messages"] == 3 * (-(-3000 // MESSAGE_ELEMENTS) + -(-blocks // MESSAGE_ELEMENTS))
