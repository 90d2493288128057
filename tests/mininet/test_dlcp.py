"""DLCP end to end: a model trained through the BMv2 fabric with and without bounded loss.

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

from typing import Any

import pytest

from controller.experiment.placement import topology_for
from controller.experiment.runner import run_on
from controller.experiment.spec import spec_from_dict
from controller.testbed import Testbed
from mininet_topos.network import NetworkOptions

pytestmark = pytest.mark.mininet

TRAIN: dict[str, Any] = {"algo": "ring", "workers": 4, "topo": "leafspine", "workload": "train-digits",
                         "dtype": "float32", "iterations": 30, "transport": "sr", "bw_mbps": 20.0, "loss_pct": 3.0}
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
