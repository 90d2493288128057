"""DLCP dropping in a run without training on the graph engine on the simulator (`engine = graph`, no emulate, no
train-digits: gradswitch/workload/generators/plain.py, each iteration's tensors all-reduced in a row) with
`dlcp = { drop = true }`: the same spec on both engines. The switches trim the plain graph's droppable packets (every
all-reduce's but exponent codes', as the loop marks its writes), the receivers zero-fill within the loss budget and
NAK the rest, and each iteration is judged by the error its zero-filled packets left against max_relative_error, as
the loop's: iteration times within 1 % of the loop's, trimmed and zero-filled packets, retransmissions and the error
comparable (the engines' generated data differ, docs/dlcp.md), the same outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.spec import Engine, ExperimentSpec, spec_from_dict
from tests.ns3.helpers import both_engines
from tests.ns3.test_graph_dlcp_drop_sim import COMPARABLE, TOLERANCE, receivers

pytestmark = pytest.mark.ns3


# a synthetic all-reduce is one tensor, layer class 0: every layer and magnitude droppable (drop_min_layer_class 0)
DROP: dict[str, Any] = {"priority": True, "drop": True, "threshold_bytes": 0, "loss_budget": 0.2,
                        "drop_min_layer_class": 0, "drop_max_magnitude_class": 3}


def plain(**kw: Any) -> ExperimentSpec:
    """Two ring jobs of a synthetic all-reduce behind 2 bulk TCP streams on a leaf-spine, every droppable packet
    behind another trimmed (threshold 0, any layer and magnitude), a fifth of each message may be zero-filled, any
    error accepted."""
    return spec_from_dict({"backend": "ns3", "algo": "ring", "workers": 4, "jobs": 2, "background_flows": 2,
                           "topo": "leafspine", "bw_mbps": 10, "size_bytes": 256 << 10, "iterations": 3,
                           "transport": "sr", "roce_class": True, "mtu": 1024,
                           "dlcp": {**DROP, "max_relative_error": 1.0}, **kw})


def test_a_run_without_training_drops_on_the_graph_engine_as_on_the_loop(tmp_path: Path) -> None:
    spec = plain()
    assert spec.but(engine=Engine.LOOP).problems() == [] and spec.but(engine=Engine.GRAPH).problems() == []
    loop, graph = both_engines(spec, tmp_path)
    assert loop["ok"] and graph["ok"], graph["errors"]
    assert graph["outcome"] == loop["outcome"] == "ok" and graph["check"] == loop["check"] == "exact"
    assert graph["training"] is None and loop["training"] is None
    for g, lo in zip(graph["iterations"], loop["iterations"], strict=True):
        assert g["time_s"] == pytest.approx(lo["time_s"], rel=TOLERANCE)
    le, ge = loop["headline_extra"], graph["headline_extra"]
    for figure in ("dlcp_dropped", "max_relative_error", "zero_filled_packets"):
        assert ge[figure] > 0 and ge[figure] == pytest.approx(le[figure], rel=COMPARABLE), (figure, le, ge)
    lr, gr = receivers(tmp_path / "loop"), receivers(tmp_path / "graph")
    for counter in ("trimmed", "zero_filled", "over_loss_budget"):
        assert gr[counter] > 0 and gr[counter] == pytest.approx(lr[counter], rel=COMPARABLE), (counter, lr, gr)
    assert graph["retransmissions"] > 0  # over the budget: NAKed and resent
    its = graph["iterations"]
    assert all(it["correct"] and 0 <= it["relative_error"] <= 1.0 for it in its)
    assert any(it["zero_filled_packets"] > 0 and it["relative_error"] > 0 for it in its)  # bounded loss, judged


def test_an_error_over_the_bound_fails_the_check_on_both_engines(tmp_path: Path) -> None:
    """The same run judged against a bound under the error its zero-filled packets leave: the loop's failed check,
    on both engines."""
    spec = plain(jobs=1, iterations=2, dlcp={**DROP, "max_relative_error": 1e-6})
    loop, graph = both_engines(spec, tmp_path)
    assert loop["outcome"] == graph["outcome"] == "check_failed"
    assert graph["headline_extra"]["max_relative_error"] > 1e-6
