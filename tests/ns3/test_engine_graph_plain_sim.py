"""`engine = graph` on the simulator for a workload without emulate (gradswitch/workload/generators/plain.py: each
iteration's tensors all-reduced in a row, no computation): the same spec on both engines through the product's run
gives the loop's results.json, its iteration times within 1 % (the judgement on ns-3) and the same bytes on the
wire, every sum checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.report import format_table
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.spec import Backend, ExperimentSpec, spec_from_dict
from tests.ns3.helpers import both_engines

pytestmark = pytest.mark.ns3

TOLERANCE = 0.01


def plain(**kw: Any) -> ExperimentSpec:
    return spec_from_dict({"workers": 4, "size_bytes": 2 << 20, "iterations": 3, "bw_mbps": 10_000, **kw},
                          ExperimentSpec.of(backend=Backend.NS3))


def agree(loop: Results, graph: Results) -> None:
    assert loop["ok"] and graph["ok"] and graph["outcome"] == loop["outcome"] == "ok"
    assert graph["check"] == loop["check"] != "none"
    assert len(graph["iterations"]) == len(loop["iterations"]) == loop["spec"]["iterations"]
    for g, lo in zip(graph["iterations"], loop["iterations"], strict=True):
        assert g["time_s"] == pytest.approx(lo["time_s"], rel=TOLERANCE) and g["correct"] and lo["correct"]
    assert graph["summary"]["median_s"] == pytest.approx(loop["summary"]["median_s"], rel=TOLERANCE)
    assert graph["goodput_mbps"] == pytest.approx(loop["goodput_mbps"], rel=TOLERANCE)
    assert graph["bytes_on_wire"] == loop["bytes_on_wire"] > 0  # the same all-reduces, packet for packet
    assert graph["retransmissions"] == loop["retransmissions"] == 0
    # the loop's results.json: the same fields, at the top, per iteration and in the headline
    assert set(graph) == set(loop)
    assert set(graph["iterations"][0]) == set(loop["iterations"][0])
    assert set(graph["headline_extra"]) == set(loop["headline_extra"])
    # a float32 run's max_abs_error too: 0 on both (the simulator adds integers, every sum exact)
    if loop["spec"]["dtype"] == "float32":
        assert [it["max_abs_error"] for it in graph["iterations"]] == [it["max_abs_error"] for it in loop["iterations"]]
        assert graph["headline_extra"]["max_abs_error"] == loop["headline_extra"]["max_abs_error"] == 0.0
    assert graph["training"] is None and loop["training"] is None


@pytest.mark.parametrize("algo", ["ring", "ps", "netreduce"])
def test_a_synthetic_all_reduce_on_the_graph_engine_gives_the_loops_results(tmp_path: Path, algo: str) -> None:
    loop, graph = both_engines(plain(algo=algo), tmp_path)
    agree(loop, graph)
    assert graph["check"] == "exact"
    assert "on the ns-3 simulator, graph engine" in format_table(graph)


def test_a_model_profile_without_emulate_on_the_graph_engine_gives_the_loops_results(tmp_path: Path) -> None:
    """ResNet-50's 161 tensors one after another, at full size (the loop checks it by digest)."""
    loop, graph = both_engines(plain(workload="resnet50"), tmp_path)
    agree(loop, graph)
    assert graph["step_bytes"] == loop["step_bytes"] > 90e6


def test_two_jobs_and_block_exponents_on_the_graph_engine_give_the_loops_results(tmp_path: Path) -> None:
    """jobs = 2 of PS (each on hosts of its own), and float32 as block exponents (each tensor's codes reduced
    before it: two all-reduces an iteration)."""
    loop, graph = both_engines(plain(algo="ps", jobs=2, size_bytes=1 << 20), tmp_path / "jobs")
    agree(loop, graph)
    assert set(graph["jobs"]) == {"1", "2"} and all(j["check"] == "exact" for j in graph["jobs"].values())
    for job in ("1", "2"):
        assert graph["jobs"][job]["median_s"] == pytest.approx(loop["jobs"][job]["median_s"], rel=TOLERANCE)
    loop, graph = both_engines(plain(dtype="float32", float_mode="exponent", size_bytes=1 << 20), tmp_path / "exponent")
    agree(loop, graph)


def test_more_than_4096_keys_an_operation_on_the_graph_engine_give_the_loops_results(tmp_path: Path) -> None:
    """PS with 1 MiB in keys of 128 bytes over two servers: 8,192 keys an all-reduce, past the 4,096 one
    operation number's steps hold on the hosts (gradswitch/hosts/collectives/ops.py Op.imm: rounds), run on the
    simulator's graph engine (24-bit steps) as the loop runs them."""
    loop, graph = both_engines(plain(algo="ps", servers=2, size_bytes=1 << 20, ps_key_bytes=128), tmp_path)
    agree(loop, graph)
    assert graph["check"] == "exact"
