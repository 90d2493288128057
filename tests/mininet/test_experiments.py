"""Ring all-reduce and the parameter server as processes in Mininet hosts, through BMv2.

Exact int32 sums on rack and leaf-spine; still exact with 2% loss injected by the switches on
every worker link, in both recovery modes; a crashed worker makes the others fail within a
bounded time with an error naming it.
"""

from __future__ import annotations

import time

import pytest

from controller.experiment.runner import run_experiment
from controller.experiment.spec import spec_from_dict
from mininet_topos.bmv2 import resolve_bmv2

pytestmark = pytest.mark.mininet

SMALL = {"size_bytes": 128 << 10, "iterations": 2, "bw_mbps": 20.0, "workers": 4}


def run(tmp_path, **kw) -> dict:
    spec = spec_from_dict({**SMALL, **kw})
    return run_experiment(spec, tmp_path / spec.label, progress=False)


def assert_exact(report: dict) -> None:
    assert report["ok"], report["errors"]
    assert report["summary"]["correct"] and report["summary"]["iterations_done"] == report["spec"]["iterations"]
    assert all(it["wrong_elements"] == 0 for it in report["iterations"])


@pytest.mark.parametrize("topo", ["rack", "leafspine"])
@pytest.mark.parametrize("algo", ["ring", "ps"])
def test_exact_sums(tmp_path, algo, topo):
    report = run(tmp_path, algo=algo, topo=topo)
    assert_exact(report)
    assert report["summary"]["ratio_to_bound"] >= 1.0  # nothing beats the link-rate bound
    assert (tmp_path / report["name"] / "iterations.png").exists()
    # What limited it, and which BMv2 ran (the build GradNetwork resolved, as results.json keeps it).
    extra = report["headline_extra"]
    assert extra["busiest_link_load"] > 0.0 and 0.0 <= extra["cpu_idle"] <= 1.0
    build = resolve_bmv2()
    assert report["bmv2"]["path"] == str(build.executable) and report["bmv2"]["logging_macros"] == build.logging
    assert report["bmv2"]["version"] == build.version


@pytest.mark.parametrize("transport", ["gbn", "sr"])
@pytest.mark.parametrize("algo", ["ring", "ps"])
def test_exact_sums_with_two_percent_loss(tmp_path, algo, transport):
    report = run(tmp_path, algo=algo, transport=transport, loss_pct=2.0, topo="rack")
    assert_exact(report)
    switch_drops = sum(s["drops"].get("fault-injected", 0) for s in report["switches"].values())
    assert switch_drops > 0 and report["retransmissions"] > 0  # the loss happened and was repaired


def test_a_crashed_worker_fails_the_run_quickly_and_is_named(tmp_path):
    started = time.monotonic()
    report = run(tmp_path, algo="ring", iterations=4, crash={"node": 2, "after": 0})
    elapsed = time.monotonic() - started
    assert not report["ok"]
    errors = report["errors"]
    assert any("h3" in who and "exit status 3" in err for who, err in errors.items()), errors
    # Every other worker stops (the runner tells them, or their QP to it fails) and names it.
    survivors = {who: err for who, err in errors.items() if "h3" not in who}
    assert len(survivors) == 3 and all("h3" in err for err in survivors.values()), errors
    assert elapsed < 60
