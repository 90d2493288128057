"""bench.crossval_engines: a training pair's loop iteration against its graph's, each backend, the graph's emulated
seconds dilated as the loop's; agreement is the two engines' ranges overlapping (each widened by 1 %)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.crossval_engines import GRAPH_LOOP_SLACK, compare_engines
from gradswitch.experiment.crossval import MIN_REPETITIONS
from gradswitch.experiment.summary_file import RunSummary
from tests.crossval_store import reps, store


def loop_run(median: float, lo: float, hi: float, headline: int = 3, dilation: float = 4.0) -> RunSummary:
    spread: dict[str, Any] = {"iteration_s": {"min": lo, "median": median, "max": hi, "n": headline}}
    return RunSummary(iteration_s=median, headline_repetitions=headline, dilation=dilation,
                      spread=spread)


def test_the_graph_dilated_beside_the_loop_on_each_backend(tmp_path: Path) -> None:
    loop = {"prio": loop_run(2.92, 2.90, 2.95), "prio-ns3": loop_run(2.884, 2.884, 2.884, headline=3)}
    graph = store(tmp_path, {"prio": {"bmv2": reps(0.74, 0.73, 0.76, 0.9, bound=(3,)), "ns3": reps(0.7213)}})
    bmv2, ns3 = compare_engines(loop, graph, ["prio"], MIN_REPETITIONS)
    assert (bmv2.backend, ns3.backend) == ("bmv2", "ns3")
    assert bmv2.graph_s == pytest.approx(0.74 * 4) and bmv2.graph_range == pytest.approx((0.73 * 4, 0.76 * 4))
    assert bmv2.ratio == pytest.approx(0.74 * 4 / 2.92) and bmv2.judged and bmv2.agrees is True
    # The simulator's points 0.04 % apart agree; the row keeps what the JSON needs.
    assert ns3.ratio == pytest.approx(0.7213 * 4 / 2.884) and ns3.agrees is True
    row = ns3.row()
    assert row["graph_over_loop"] == pytest.approx(ns3.ratio) and row["agrees"] is True
    assert "graph / loop 1.000: agree" in ns3.line()


def test_ranges_apart_by_more_than_the_slack_differ(tmp_path: Path) -> None:
    off = 1 + 2.5 * GRAPH_LOOP_SLACK  # the points 2.5 % apart: each widened by 1 %, still apart
    loop = {"prio-ns3": loop_run(2.0, 2.0, 2.0, dilation=1.0)}
    graph = store(tmp_path, {"prio": {"ns3": reps(2.0 * off)}})
    [_, ns3] = compare_engines(loop, graph, ["prio"], MIN_REPETITIONS)
    assert ns3.agrees is False and "DIFFER" in ns3.line()


def test_too_few_unbound_repetitions_on_either_engine_is_not_judged(tmp_path: Path) -> None:
    loop = {"prio": loop_run(2.92, 2.90, 2.95, headline=1), "b": loop_run(2.9, 2.9, 2.9)}
    graph = store(tmp_path, {"prio": {"bmv2": reps(0.73, 0.74, 0.75)},
                             "b": {"bmv2": reps(0.73, 0.74, 0.75, bound=(0, 1))}})
    prio, prio_ns3, b, _ = compare_engines(loop, graph, ["prio", "b"], MIN_REPETITIONS)
    assert prio.agrees is None and not prio.judged  # the loop's one unbound repetition
    assert b.agrees is None and not b.judged  # the graph's one
    assert prio_ns3.loop_s is None and prio_ns3.graph_s is None and "not judged" in prio_ns3.line()


def test_the_dlcp_pair_at_another_rate_names_its_results(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.crossval import DLCP_BW_MBPS, dlcp_specs, parse_args

    assert {s.network.bw_mbps for s in dlcp_specs()} == {DLCP_BW_MBPS}
    assert {s.network.bw_mbps for s in dlcp_specs(2.5)} == {2.5}
    assert parse_args(["--only", "dlcp,dlcp-graph", "--dlcp-bw", "2.5"]).dlcp_bw == 2.5
    with pytest.raises(SystemExit):
        parse_args(["--dlcp-bw", "0"])
    assert "--dlcp-bw 0: give the DLCP pair's link rate in Mb/s, above 0" in capsys.readouterr().err
