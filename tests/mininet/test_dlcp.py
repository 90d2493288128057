"""DLCP end to end: a model trained through the BMv2 fabric with and without bounded loss;
spraying on a fabric where flow hashing collides, with order-tolerant receivers.

The same training run (an MLP on scikit-learn's digits, 4 ring workers on a 2x2 leaf-spine
fabric, gradients exchanged as RoCE through the switches, 3 % of the RoCE packets on every
worker link dropped by the switches' fault-injection table) on one network: `exact`
retransmits every lost packet; `bounded-loss` marks gradient packets droppable and the
receivers zero-fill lost ones within a 25 % budget per message instead of waiting for them.
Both must learn; the second must zero-fill and retransmit less. A third run sets the
switches' drop threshold to zero with every DLCP feature on: the switches drop droppable
packets (counted), the job still completes, and the default thresholds come back after it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.experiment.compare import load_spec
from controller.experiment.placement import topology_for
from controller.experiment.runner import run_on
from controller.experiment.spec import spec_from_dict
from controller.testbed import Testbed
from mininet_topos.network import NetworkOptions
from protocol.paths import EXPERIMENTS

pytestmark = pytest.mark.mininet

TRAIN: dict[str, Any] = {"algo": "ring", "workers": 4, "topo": "leafspine", "workload": "train-digits",
                         "dtype": "float32", "iterations": 30, "transport": "sr", "bw_mbps": 20.0, "loss_pct": 3.0,
                         "mtu": 1024}  # several packets per message: a lost one can be within the 25 % budget
BOUNDED: dict[str, Any] = {"bounded_loss": True, "loss_budget": 0.25, "drop_min_layer_class": 0,
                           "drop_max_magnitude_class": 3, "max_relative_error": 1.0}


def accuracy(report: dict[str, Any]) -> list[float]:
    return [it["accuracy"] for it in report["iterations"]]


def test_training_learns_with_and_without_bounded_loss(tmp_path):
    exact_spec = spec_from_dict({**TRAIN, "name": "exact"})
    with Testbed(topology_for(exact_spec), NetworkOptions(run_dir=tmp_path / "net")) as net:
        exact = run_on(net, exact_spec, tmp_path / "exact")
        lossy = run_on(net, spec_from_dict({**TRAIN, "name": "bounded-loss", "dlcp": BOUNDED}), tmp_path / "lossy")
        dropping = run_on(net, spec_from_dict({**TRAIN, "iterations": 5, "loss_pct": 0.0, "name": "threshold-0",
                                               "dlcp": {**BOUNDED, "priority": True, "drop": True, "spray": True,
                                                        "threshold_bytes": 0}}),
                          tmp_path / "dropping")
        thresholds = net.fabric.session("leaf1").read_table("dlcp_drop_thresholds")
    for report in (exact, lossy, dropping):
        assert report["ok"], report["errors"]
    assert len(accuracy(exact)) == len(accuracy(lossy)) == TRAIN["iterations"]
    assert accuracy(exact)[0] < 0.5 < 0.8 < accuracy(exact)[-1]  # from near chance to well above it
    assert accuracy(lossy)[-1] > 0.7  # still learns with some gradient packets read as zeros
    assert exact["headline_extra"]["zero_filled_packets"] == 0 and exact["retransmissions"] > 0
    assert lossy["headline_extra"]["zero_filled_packets"] > 0
    assert lossy["retransmissions"] < exact["retransmissions"]  # zeros instead of some retransmissions
    assert dropping["headline_extra"]["dlcp_dropped"] > 0  # threshold 0: the switches drop droppable packets
    assert thresholds and all(int(e.params["bytes"]) > 0 for e in thresholds)  # the defaults are back


def test_spraying_evens_out_colliding_uplinks_and_order_tolerant_receivers_resend_nothing(tmp_path):
    """experiments/dlcp-spray.toml, shortened: a ring of 8 workers whose every hop crosses a fabric of
    2 leaves and 4 spines trains VGG-16. ECMP hashes leaf1's 4 flows onto 2 of its 4 uplinks (two
    carry two flows each, the others nothing); spraying loads all of them evenly and trains faster.
    Order-tolerant receivers resend (next to) nothing under spraying's reordering; the previous
    receivers, which judge a hole a reorder delay after the first packet past it, resend more."""
    spec = load_spec(EXPERIMENTS / "dlcp-spray.toml")
    runs = {r.label: replace(r, iterations=3, scale=0.0005) for r in spec.runs}
    reports = {}
    with Testbed(topology_for(runs["ecmp"]), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for name, run in runs.items():
            reports[name] = run_on(net, run, tmp_path / name, progress=False)
    for report in reports.values():
        assert report["ok"], report["errors"]
        assert all(it["wrong_elements"] == 0 for it in report["iterations"])
    ecmp, spray, previous = (reports[n] for n in ("ecmp", "spray", "spray-reorder-delay"))
    assert ecmp["headline_extra"]["uplink_imbalance"] > 1.5, ecmp["link_loads"]  # a collision
    assert spray["headline_extra"]["uplink_imbalance"] < 1.15, spray["link_loads"]  # every spine alike
    assert spray["training"]["samples_per_s_real"] > 1.1 * ecmp["training"]["samples_per_s_real"]
    assert spray["retransmissions"] < previous["retransmissions"], (spray["retransmissions"],
                                                                   previous["retransmissions"])
