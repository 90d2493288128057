"""train-digits (gradswitch/hosts/digits_job.py) checks its sums: every worker computes every other worker's gradient
on its own model, so a wrong element fails the run and, with DLCP's zero-filling, the error against that
exact sum is what the records report. Real worker threads on an in-memory network (tests/inmemory.py)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gradswitch.workload.dlcp import DlcpPolicy
from tests.inmemory import job, run_job, run_ok
from tests.memlink import MemoryHub

DIGITS: dict[str, Any] = {"workload": "train-digits", "dtype": "float32", "transport": "sr", "linger_timeout": 1.0}


def iterations(results: dict[int, dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Per worker, its iteration records."""
    return [r["iterations"] for r in results.values()]


def test_an_exact_run_checks_every_sum_and_keeps_the_models_identical(tmp_path):
    cfg = job("ring", 3, iterations=4, **DIGITS)
    results = run_ok(cfg, tmp_path)
    for its in iterations(results):
        assert len(its) == 4
        for it in its:
            assert it["check"] == "exact" and it["correct"] and it["wrong_elements"] == 0
            assert it["extra"]["relative_error"] == 0.0 and 0 < it["max_abs_error"] < 1e-4  # fixed point's rounding
        # wall time per iteration, and the cumulative time a report reads time to accuracy from
        assert [it["extra"]["train_s"] for it in its] == pytest.approx(list(np.cumsum([it["time_s"] for it in its])))
        assert all(0 < it["extra"]["comm_s"] <= it["time_s"] for it in its)
    assert len({r["model_digest"] for r in results.values()}) == 1  # every worker's model the same


def test_a_wrong_element_fails_the_worker_that_received_it(tmp_path, monkeypatch):
    """One element of one sum changed on one worker (as a switch or receiver bug would): that worker's
    check finds it and the run fails naming the iteration; the others' sums were right."""
    from gradswitch.hosts.ring import Ring

    original = Ring.allreduce

    def corrupting(self: Ring, iteration: int, index: int, data: Any) -> Any:
        total = original(self, iteration, index, data)
        if self.rank == 1 and iteration == 1 and index == 2:
            total = total.copy()
            total[5] += 1
        return total

    monkeypatch.setattr(Ring, "allreduce", corrupting)
    cfg = job("ring", 3, iterations=2, **DIGITS)
    results = run_job(cfg, tmp_path)
    bad = results[1]
    assert not bad["ok"] and "iteration 1: 1 wrong elements" in bad["error"]
    assert [(it["correct"], it["wrong_elements"]) for it in bad["iterations"]] == [(True, 0), (False, 1)]
    for nid in (0, 2):
        assert results[nid]["ok"] and all(it["wrong_elements"] == 0 for it in results[nid]["iterations"])


def test_trimmed_gradient_packets_are_zero_filled_and_their_error_reported(tmp_path):
    """Every gradient packet droppable, a network that trims a quarter of them: the workers zero-fill
    within a 25 % budget and report each iteration's error against the exact sum computed on their own
    model; models that received different sums end up different, and their digests say so."""
    rnd = random.Random(5)
    hub = MemoryHub(seed=2, trim=lambda d: rnd.random() < 0.25)
    policy = DlcpPolicy(drop=True, loss_budget=0.25, drop_min_layer_class=0, drop_max_magnitude_class=3,
                        max_relative_error=1.0)
    cfg = replace(job("ring", 3, iterations=4, **DIGITS), dlcp=policy)
    results = run_ok(cfg, tmp_path, hub)
    records = [it for its in iterations(results) for it in its]
    assert hub.trimmed and sum(it["extra"]["zero_filled_packets"] for it in records) > 0
    assert all(it["check"] == "exact" and it["correct"] for it in records)
    errors = [it["extra"]["relative_error"] for it in records]
    assert any(e > 0 for e in errors) and all(e <= policy.max_relative_error for e in errors)
    for it in records:
        assert (it["wrong_elements"] > 0) == (it["extra"]["relative_error"] > 0)
    # Dozens of packets zero-filled per worker and iteration, each worker its own: they added up different
    # sums (a ring's all-gather carries a zero-filled chunk downstream only), so their models differ.
    assert len({round(its[-1]["extra"]["relative_error"], 12) for its in iterations(results)}) > 1
    assert len({r["model_digest"] for r in results.values()}) == len(results)
