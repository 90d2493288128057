"""`engine = graph` on the simulator through the product's run (gradswitch/experiment/simulated_graph.py): the same
spec's training job on the graph engine gives the training loop's results.json, figures within 1 % (the
judgement on ns-3), on runs of gradswitch/specs/training-speedup.toml (4 emulated V100s, D = 4: the computation
dilated as the loop's is) and a point of the scaling study (8 workers on the fat tree at 100 Gb/s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scaling import scaling_spec
from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.report import format_table
from gradswitch.experiment.runner import run_experiment
from gradswitch.experiment.shipped_specs import shipped_spec
from gradswitch.experiment.spec import Backend, Engine, ExperimentSpec
from gradswitch.workload.job import DType, FloatMode
from tests.ns3.helpers import both_engines

pytestmark = pytest.mark.ns3

TOLERANCE = 0.01


def speedup_run(label: str) -> ExperimentSpec:
    path = shipped_spec("training-speedup")
    assert path is not None
    [run] = [r for r in load_spec(path).runs if r.label == label]
    return run.but(backend=Backend.NS3)


@pytest.mark.parametrize("label", ["resnet50-rack-ring-fifo", "bert-base-rack-ps-priority",
                                   "vgg16-leafspine-netreduce-fifo"])
def test_a_training_speedup_run_on_the_graph_engine_gives_the_loops_results(tmp_path: Path, label: str) -> None:
    loop, graph = both_engines(speedup_run(label), tmp_path)
    assert loop["ok"] and graph["ok"] and graph["outcome"] == "ok" and graph["check"] == loop["check"] == "exact"
    assert len(graph["iterations"]) == len(loop["iterations"]) == 4
    lt, gt = loop["training"], graph["training"]
    assert lt is not None and gt is not None
    assert gt["dilation"] == lt["dilation"] == 4.0
    assert gt["samples_per_s_real"] == pytest.approx(lt["samples_per_s_real"], rel=TOLERANCE)
    assert gt["compute_s"] == pytest.approx(lt["compute_s"], rel=1e-6)  # the same emulated GPUs, dilated alike
    assert gt["exposed_comm_s"] == pytest.approx(lt["exposed_comm_s"], rel=0.05, abs=1e-3)
    assert graph["bytes_on_wire"] == loop["bytes_on_wire"]  # the same all-reduces, packet for packet
    assert graph["retransmissions"] == loop["retransmissions"] == 0
    assert gt["timeline"] and all((tmp_path / "graph" / f).exists() for f in gt["timeline"])
    assert (tmp_path / "graph" / "sim" / "sim-results.json").exists()


@pytest.mark.parametrize("label", ["resnet50-rack-ring-fifo", "bert-base-rack-ps-priority",
                                   "vgg16-leafspine-netreduce-fifo"])
def test_block_exponents_on_the_graph_engine_give_the_loops_results(tmp_path: Path, label: str) -> None:
    """float32 with block exponents (float_mode = exponent): the graph carries the loop's exponent codes' all-reduces
    (each before the values that wait for them), so the same bytes on the wire and the loop's training figures."""
    spec = speedup_run(label).but(dtype=DType.FLOAT32, float_mode=FloatMode.EXPONENT)
    assert spec.but(engine=Engine.GRAPH).problems() == []
    loop, graph = both_engines(spec, tmp_path)
    assert loop["ok"] and graph["ok"] and graph["check"] == loop["check"] == "exact"
    lt, gt = loop["training"], graph["training"]
    assert lt is not None and gt is not None
    assert gt["samples_per_s_real"] == pytest.approx(lt["samples_per_s_real"], rel=TOLERANCE)
    assert graph["bytes_on_wire"] == loop["bytes_on_wire"]  # the codes' all-reduces too, packet for packet
    # float32 on the simulator: max_abs_error 0 on both engines (it adds integers, every sum exact), as its loop's
    assert graph["headline_extra"]["max_abs_error"] == loop["headline_extra"]["max_abs_error"] == 0.0
    assert [it["max_abs_error"] for it in graph["iterations"]] == [it["max_abs_error"] for it in loop["iterations"]]
    fixed = run_experiment(spec.but(float_mode=FloatMode.FIXED, engine=Engine.GRAPH), tmp_path / "fixed",
                           progress=False)
    assert fixed["bytes_on_wire"] < graph["bytes_on_wire"]  # the codes are on the wire
    print(f"{label} exponent: samples/s loop {lt['samples_per_s_real']:.4f} graph {gt['samples_per_s_real']:.4f}, "
          f"bytes {loop['bytes_on_wire']} / {graph['bytes_on_wire']} (fixed point {fixed['bytes_on_wire']})")


def test_a_scaling_point_on_the_graph_engine_gives_the_loops_iteration(tmp_path: Path) -> None:
    loop, graph = both_engines(scaling_spec("resnet50", 8, "netreduce-hier").but(iterations=3), tmp_path)
    assert loop["ok"] and graph["ok"] and graph["check"] == "digest"
    assert graph["summary"]["median_s"] == pytest.approx(loop["summary"]["median_s"], rel=TOLERANCE)
    assert graph["simulator"]["packet_hops"] > 0 and not graph["simulator"]["time_limit_hit"]
    assert "on the ns-3 simulator, graph engine" in format_table(graph)
    assert "graph engine" not in format_table(loop)


@pytest.mark.parametrize("label", ["resnet50-rack-ring-fifo", "resnet50-leafspine-netreduce-fifo"])
def test_two_jobs_at_once_on_the_graph_engine_give_the_loops_results(tmp_path: Path, label: str) -> None:
    """jobs = 2: both jobs' graphs in one simulation, on hosts of their own, sharing the fabric (NetReduce: each its
    own switch job), as the loop runs them."""
    loop, graph = both_engines(speedup_run(label).but(jobs=2, iterations=3), tmp_path)
    assert loop["ok"] and graph["ok"] and set(graph["jobs"]) == {"1", "2"} == set(loop["jobs"])
    assert all(j["outcome"] == "ok" and j["check"] == "exact" for j in graph["jobs"].values())
    # which job a shared link serves first may differ; the pair's median iterations agree
    medians = {name: sorted(float(j["median_s"] or 0.0) for j in r["jobs"].values())
               for name, r in (("loop", loop), ("graph", graph))}
    assert medians["graph"] == pytest.approx(medians["loop"], rel=TOLERANCE) and min(medians["loop"]) > 0
    assert graph["bytes_on_wire"] == loop["bytes_on_wire"]


def test_two_jobs_parameter_servers_on_one_host_on_the_graph_engine_give_the_loops_results(tmp_path: Path) -> None:
    """colocate_servers (TensorLights' setting): both jobs' parameter servers on one host, as the loop places them;
    the graph engine gives the loop's iterations, job by job."""
    loop, graph = both_engines(speedup_run("resnet50-rack-ps-fifo").but(jobs=2, colocate_servers=True, iterations=3),
                       tmp_path)
    assert loop["ok"] and graph["ok"]
    for job in ("1", "2"):
        assert graph["jobs"][job]["median_s"] == pytest.approx(loop["jobs"][job]["median_s"], rel=TOLERANCE)
    assert graph["bytes_on_wire"] == loop["bytes_on_wire"]
