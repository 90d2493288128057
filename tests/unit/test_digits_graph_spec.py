"""Running train-digits on the graph engine from a spec (engine = graph, gradswitch/experiment/digits_graph.py):
what it refuses in one line before anything starts (another workload, the simulator, a parameter server, block
exponents, a compare), the job it makes (payload train-digits), and how the report carries and prints what the
training learnt. The run itself: tests/unit/test_graph_digits.py (in memory), tests/mininet/test_graph_digits.py
(BMv2)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.digits_graph import run_digits_graph, spec_digits_graph
from gradswitch.experiment.graph_experiment import format_graph_table, run_graph_spec
from gradswitch.experiment.graph_run import GraphRunReport, graph_job, summarize
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec, SpecError, spec_from_dict
from gradswitch.workload.generators import digits_graph
from gradswitch.workload.generators.digits import digits_bytes
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.graph_payload import PayloadKind, TrainingOutcome
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.job import Algorithm, DType, FloatMode

DIGITS: dict[str, Any] = {"workload": "train-digits", "dtype": "float32", "engine": "graph", "workers": 4,
                          "iterations": 3, "bw_mbps": 20.0, "transport": "sr"}


def spec(**kw: Any) -> ExperimentSpec:
    return spec_from_dict({**DIGITS, **kw})


def test_a_digits_spec_on_the_graph_engine_is_fine_and_makes_the_digits_graph() -> None:
    s = spec()
    assert s.algorithm.engine == Engine.GRAPH and s.problems() == []
    assert spec(algo="netreduce").problems() == []
    assert spec(algo="ps", servers=2).problems() == []  # on BMv2 the servers run the graph's world all-reduces
    graph = spec_digits_graph(s)
    assert graph.world_size == 4 and len(graph.ranks[0].nodes) == 2 * 3 and graph.name == s.label
    job, _ = graph_job(s.topology(), s, graph, payload=PayloadKind.DIGITS)
    assert job.payload == PayloadKind.DIGITS and job.job.dtype == DType.FLOAT32
    assert {n.nbytes for _, n in graph.collectives()} == {digits_bytes()}
    ps = spec(algo="ps", servers=2)
    ps_job, _ = graph_job(ps.topology(), ps, spec_digits_graph(ps), payload=PayloadKind.DIGITS)
    assert [n.host for n in ps_job.job.servers] == ["h5", "h6"] and ps_job.payload == PayloadKind.DIGITS


@pytest.mark.parametrize(("kw", "says"), [
    ({"workload": "resnet50", "dtype": "int32"}, "not 'resnet50' without emulate"),
    ({"algo": "ps", "colocate_servers": True}, "parameter servers on hosts of their own (colocate_servers = false)"),
    ({"float_mode": "exponent"}, "fixed point (float_mode = fixed)"),
    ({"jobs": 2}, "engine = graph: one job"),
    ({"fault": None, "faults": [{"kind": "worker-crash", "target": "1", "at_s": 1.0}]},
     "a worker's in a model's training on BMv2"),
])
def test_what_the_graph_engine_does_not_run_is_one_line(kw: dict[str, Any], says: str) -> None:
    raw = {**DIGITS, **kw}
    raw.pop("fault", None)
    try:
        problems = spec_from_dict(raw).problems()
    except SpecError as e:  # a value refused as it is read
        problems = str(e).splitlines()
    assert [p for p in problems if says in p], problems


def test_on_the_simulator_it_is_one_line_pointing_at_the_graph_for_timing() -> None:
    problems = spec(backend="ns3").problems()
    assert problems == ["workload = 'train-digits' computes its gradients in Python: it runs on BMv2 only (backend = "
                        "bmv2); on ns-3 its graph runs for timing only, synthetic data in its place (gradswitch "
                        "export-et --workload train-digits, then --workload-et)"]
    s = spec().but(backend=spec(backend="ns3").network.backend)
    graph = digits_graph(4, 2)
    with pytest.raises(SpecError, match="BMv2 only"):
        run_graph_spec(s, graph, Path("/nonexistent"), PayloadKind.DIGITS)
    with pytest.raises(SpecError, match="BMv2 only"):
        run_digits_graph(s, Path("/nonexistent"))


def test_the_payload_is_refused_on_the_simulator_by_the_job_too() -> None:
    """graph_job, whatever the spec's workload: real gradients never go to the simulator."""
    graph = digits_graph(4, 2)
    s = ExperimentSpec.of(workers=4, bw_mbps=20.0, backend=spec(backend="ns3").network.backend)
    assert s.problems() == []
    with pytest.raises(ExperimentError, match="the simulator carries synthetic data only"):
        graph_job(s.topology(), s, graph, payload=PayloadKind.DIGITS)
    assert graph_job(s.topology(), s, graph)[0].payload == PayloadKind.SYNTHETIC  # the graph alone: timing


def test_the_job_refuses_settings_the_gradients_cannot_take() -> None:
    graph = digits_graph(4, 2)
    s = ExperimentSpec.of(workers=4, bw_mbps=20.0, dtype=DType.FLOAT32, float_mode=FloatMode.EXPONENT)
    with pytest.raises(ExperimentError, match="not block exponents"):
        graph_job(s.topology(), s, graph, payload=PayloadKind.DIGITS)


def test_a_compare_refuses_engine_graph_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[defaults]\nworkload = "train-digits"\ndtype = "float32"\nengine = "graph"\nbw_mbps = 20\n'
                    '[matrix]\nalgo = ["ring", "netreduce"]\n')
    with pytest.raises(SpecError, match="train-digits on the graph engine runs with gradswitch experiment"):
        load_spec(path)


def test_the_outcome_from_the_ranks_results_and_in_the_report() -> None:
    def result(acc: list[float], loss: list[float], digest: str) -> Any:
        return {"iterations": [{"extra": {"accuracy": a, "loss": x}} for a, x in zip(acc, loss, strict=True)],
                "model_digest": digest}

    same = TrainingOutcome.of({0: result([0.2, 0.5], [2.0, 1.0], "ab"), 1: result([0.3, 0.4], [2.1, 0.9], "ab")})
    assert same == TrainingOutcome((0.2, 0.4), (2.1, 1.0), {0: "ab", 1: "ab"}) and same.model_digest == "ab"
    differ = TrainingOutcome.of({0: result([0.2], [2.0], "ab"), 1: result([0.3, 0.4], [2.1, 0.9], "cd")})
    assert differ.accuracy == (0.2,) and differ.model_digest is None  # the iterations every rank recorded

    s = spec(workers=2, iterations=1)
    graph = spec_digits_graph(s)
    job, _ = graph_job(s.topology(), s, graph, payload=PayloadKind.DIGITS)
    AR = CollectiveKind.ALL_REDUCE
    run = GraphRun(tuple(t for r in range(2) for t in (NodeTiming(r, 0, "compute", 0.0, 0.1, None, None, 0, None),
                                                      NodeTiming(r, 1, "collective", 0.1, 0.2, AR, "world",
                                                                 digits_bytes(), True))))
    report = replace(summarize(job, run, ["h1", "h2"], 20.0, {}, 0.5, (), 1.0), training=same)
    assert GraphRunReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    text = format_graph_table(report, "bmv2")
    assert "training: accuracy 0.200 -> 0.400 over 2 iterations" in text and "model digest ab on every rank" in text
    assert "model digests DIFFER: rank 0 ab, rank 1 cd" in format_graph_table(replace(report, training=differ), "bmv2")
    plain = replace(report, training=None)
    assert "training" not in format_graph_table(plain, "bmv2")
    assert GraphRunReport.from_dict(json.loads(json.dumps(plain.to_dict()))).training is None


def test_the_command_line_takes_engine() -> None:
    from gradswitch.cli.main import build_parser, experiment_spec

    args = build_parser().parse_args(["experiment", "--workload", "train-digits", "--dtype", "float32", "--engine",
                                      "graph", "--bw", "20", "--algo", "netreduce"])
    s = experiment_spec(args)
    assert (s.algorithm.engine, s.algorithm.algo, s.workload.workload) == (Engine.GRAPH, Algorithm.NETREDUCE,
                                                                           "train-digits")
