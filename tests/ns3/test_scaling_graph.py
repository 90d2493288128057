"""The scaling study's training job run as an execution graph on the simulator's graph engine
(bench/scaling_graph.py) iterates at the pace of the simulator's training loop (bench/scaling.py) on the
same fat tree, with ring all-reduce and with NetReduce in the switches: both engines run now, so a change
to either that moves them apart fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scaling import scaling_spec
from bench.scaling_graph import TOLERANCE, point
from gradswitch.experiment.runner import run_experiment

pytestmark = pytest.mark.ns3


@pytest.mark.parametrize(("model", "algo"), [("resnet50", "ring"), ("bert-base", "ring"),
                                             ("resnet50", "netreduce-hier")])
def test_a_training_graph_iterates_as_the_training_loop_does(tmp_path: Path, model: str, algo: str) -> None:
    spec = scaling_spec(model, 8, algo)
    loop = run_experiment(spec, tmp_path / "loop")
    training = loop["training"]
    assert loop["ok"] and training is not None
    earlier = {"iteration_s": training["iteration_s_real"], "samples_per_s": training["samples_per_s_real"],
               "wall_s": 0.0}
    row = point(model, 8, earlier, tmp_path / "graph", algo)
    assert row["checked"] and not row["errors"]
    assert row["iteration_s"] == pytest.approx(earlier["iteration_s"], rel=TOLERANCE)
    assert row["within_tolerance"]
    assert row["samples_per_s"] == pytest.approx(earlier["samples_per_s"], rel=TOLERANCE)
