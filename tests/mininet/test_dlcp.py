"""DLCP end to end: a model trained through the BMv2 fabric with and without bounded-loss dropping.

The same training run (an MLP on scikit-learn's digits, 4 ring workers on a 2x2 leaf-spine
fabric, gradients exchanged as RoCE through the switches) twice on one network: once exact,
once with every DLCP feature on and the switches' drop threshold at zero, so that every packet
the hosts marked droppable is dropped by a switch (the worst case of the loss budget). The
second run must still learn, with zero-filled packets reported and the drops counted by the
switches; afterwards the switches' default thresholds are back.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.experiment import ExperimentSpec, run_on, topology_for
from mininet_topos.network import GradNetwork, NetworkOptions

pytestmark = pytest.mark.mininet

TRAIN: dict[str, Any] = {"algo": "ring", "workers": 4, "topo": "leafspine", "workload": "train-digits",
                         "dtype": "float32", "iterations": 30, "transport": "sr", "bw_mbps": 20.0}
DROP_ALL: dict[str, Any] = {"priority": True, "drop": True, "spray": True, "threshold_bytes": 0,
                            "loss_budget": 0.1, "drop_min_layer_class": 0, "drop_max_magnitude_class": 3,
                            "max_relative_error": 1.0}


def accuracy(report: dict[str, Any]) -> list[float]:
    return [it["accuracy"] for it in report["iterations"]]


def test_training_learns_with_and_without_bounded_loss_dropping(tmp_path):
    exact_spec = ExperimentSpec(**TRAIN, name="exact")
    with GradNetwork(topology_for(exact_spec), NetworkOptions(run_dir=tmp_path / "net")) as net:
        assert net.fabric is not None
        exact = run_on(net, exact_spec, tmp_path / "exact")
        lossy = run_on(net, ExperimentSpec(**TRAIN, name="bounded-loss", dlcp=DROP_ALL), tmp_path / "lossy")
        thresholds = net.fabric.session("leaf1").read_table("dlcp_drop_thresholds")
    assert exact["ok"] and lossy["ok"], (exact["errors"], lossy["errors"])
    assert len(accuracy(exact)) == len(accuracy(lossy)) == TRAIN["iterations"]
    assert accuracy(exact)[0] < 0.5 < 0.8 < accuracy(exact)[-1]  # from near chance to well above it
    assert accuracy(lossy)[-1] > 0.7  # still learns with a tenth of some messages zero-filled
    assert exact["headline_extra"]["zero_filled_packets"] == 0
    assert lossy["headline_extra"]["zero_filled_packets"] > 0
    assert lossy["headline_extra"]["dlcp_dropped"] > 0
    assert thresholds and all(int(e.params["bytes"]) > 0 for e in thresholds)  # the defaults are back
