"""Running train-digits on the graph engine from a spec (engine = graph: gradswitch/experiment/graph_as_loop.py
training_graph_jobs, run by runner.run_on as a model's training is): the graph it makes (block exponents' codes where
the spec has them), the jobs it makes (payload train-digits; several jobs on hosts of their own, parameter servers
sharing a host), what it still refuses in one line before anything starts, and that the ranks' results are kept as
the loop's. The run itself: tests/unit/test_graph_digits.py (in memory), tests/mininet/test_graph_digits.py (BMv2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.graph_as_loop import training_graph_jobs
from gradswitch.experiment.graph_run import graph_job
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.runner import graph_results
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec, SpecError, spec_from_dict
from gradswitch.experiment.training_graph import spec_digits_graph
from gradswitch.workload.dlcp import layer_class
from gradswitch.workload.encoding import job_profile
from gradswitch.workload.generators import digits_graph
from gradswitch.workload.generators.digits import digits_bytes, digits_codes, digits_reductions
from gradswitch.workload.gradients import digits_profile
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.graph_payload import PayloadKind
from gradswitch.workload.job import Algorithm, DType
from tests.results import run_experiment

DIGITS: dict[str, Any] = {"workload": "train-digits", "dtype": "float32", "engine": "graph", "workers": 4,
                          "iterations": 3, "bw_mbps": 20.0, "transport": "sr"}


def spec(**kw: Any) -> ExperimentSpec:
    return spec_from_dict({**DIGITS, **kw})


def test_a_digits_spec_on_the_graph_engine_makes_the_digits_graph_and_its_jobs() -> None:
    s = spec()
    assert s.algorithm.engine == Engine.GRAPH and s.problems() == []
    graph = spec_digits_graph(s)
    assert graph.world_size == 4 and len(graph.ranks[0].nodes) == 5 * 3 and graph.name == s.label
    assert [n.nbytes for _, n in graph.collectives()][:4] == [4 * r.elements for r in digits_reductions()]
    assert sum(n.nbytes for _, n in graph.collectives()) == 4 * 3 * digits_bytes()  # 4 ranks, 3 iterations
    [tg] = training_graph_jobs(s, topology_for(s))
    assert tg.job.payload == PayloadKind.DIGITS and tg.job.job.dtype == DType.FLOAT32 and tg.dilation == 1.0
    assert tg.job.job.workload == "train-digits" and tg.job.job.seed == s.measurement.seed
    assert spec(algo="netreduce").problems() == []


def test_block_exponents_make_the_codes_all_reduce_before_the_values() -> None:
    s = spec(float_mode="exponent", algo="netreduce")
    assert s.problems() == []
    graph = spec_digits_graph(s)
    assert [n.name for n in graph.ranks[0].nodes[:3]] == ["it0.gradient", "it0.exponents.fc2.bias",
                                                          "it0.all_reduce.fc2.bias"]
    assert sum(n.nbytes for _, n in graph.collectives()) == 4 * 3 * (4 * digits_codes() + digits_bytes())
    [tg] = training_graph_jobs(s, topology_for(s))
    assert set(tg.job.in_network) == {"all_reduce"}  # codes and values: one NetReduce job
    assert len(spec_digits_graph(spec(float_mode="exponent", dtype="float32")).ranks[0].nodes) == 9 * 3


def test_several_jobs_and_servers_sharing_a_host_are_the_loops_placement() -> None:
    """jobs = 2 with their parameter servers on one host (colocate_servers, TensorLights' setting): each job's
    ranks on hosts of their own, both jobs' servers on the one host, each job with its own seed, as the loop's."""
    s = spec(algo="ps", servers=1, jobs=2, colocate_servers=True, workers=3)
    assert s.problems() == []
    jobs = training_graph_jobs(s, topology_for(s))
    assert [tg.job.job.job_id for tg in jobs] == [1, 2]
    servers = {n.host for tg in jobs for n in tg.job.job.servers}
    workers = [{n.host for n in tg.job.job.workers} for tg in jobs]
    assert len(servers) == 1 and not workers[0] & workers[1] and not servers & (workers[0] | workers[1])
    assert len({tg.job.job.seed for tg in jobs}) == 2 and all(tg.job.payload == PayloadKind.DIGITS for tg in jobs)
    assert spec(algo="ps", servers=2).problems() == []
    assert spec(jobs=2).problems() == []


@pytest.mark.parametrize("kw", [
    {"dlcp": {"drop": True}},
    {"faults": [{"kind": "worker-crash", "target": "1", "at_s": 1.0}]},
    {"crash": {"node": 1, "after": 1}},
])
def test_what_the_graph_engine_refused_in_train_digits_it_now_runs(kw: dict[str, Any]) -> None:
    """DLCP dropping, a worker's crash and `crash` were refused on train-digits' graph; the spec now takes them."""
    raw = {**DIGITS, **kw}
    raw.pop("fault", None)
    assert spec_from_dict(raw).engine_problems() == []


def test_dlcp_dropping_makes_the_job_of_the_loops_policy_with_droppable_values_and_the_loops_classes() -> None:
    """dlcp = { drop = true }: the spec is valid on the graph engine (BMv2), the ranks' job carries the spec's policy,
    and the graph's all-reduces carry the layer class the loop's writes of their tensor carry (layer_class of the
    tensor's index in the loop's profile, exponent codes included), droppable but for the codes."""
    for mode, classes in (("fixed", [6, 4, 2, 0]), ("exponent", [7, 6, 5, 4, 3, 2, 1, 0])):
        s = spec(float_mode=mode, dlcp={"drop": True, "loss_budget": 0.2, "max_relative_error": 0.5})
        assert s.problems() == [], s.problems()
        [tg] = training_graph_jobs(s, topology_for(s))
        assert tg.job.job.dlcp is not None and tg.job.job.dlcp.drop and tg.job.job.dlcp.max_relative_error == 0.5
        nodes = [n for _, n in spec_digits_graph(s).collectives()][:len(classes)]
        profile = job_profile(tg.job.job, digits_profile())
        assert [n.layer_class for n in nodes] == classes == [layer_class(i, len(profile.tensors))
                                                              for i in range(len(profile.tensors))]
        assert [n.droppable for n in nodes] == [t.kind != "exponents" for t in profile.tensors]
    # on the simulator train-digits runs on neither engine: the one line says so, dropping or not
    problems = spec(backend="ns3", dlcp={"drop": True}).problems()
    assert [p for p in problems if "it runs on BMv2 only" in p] and not [p for p in problems if "DLCP" in p]
    # a run without training (all-reduces in a row) drops on the graph engine too, on both backends
    for backend in ("bmv2", "ns3"):
        plain = spec_from_dict({"workload": "synthetic", "engine": "graph", "workers": 4, "bw_mbps": 20.0,
                                "transport": "sr", "backend": backend, "dlcp": {"drop": True}})
        assert plain.problems() == [], plain.problems()


def test_on_the_simulator_it_is_one_line_pointing_at_the_graph_for_timing() -> None:
    problems = spec(backend="ns3").problems()
    assert problems == ["workload = 'train-digits' computes its gradients in Python: it runs on BMv2 only (backend = "
                        "bmv2); on ns-3 its graph runs for timing only, synthetic data in its place (gradswitch "
                        "export-et --workload train-digits, then --workload-et)"]
    with pytest.raises(SpecError, match="BMv2 only"):  # before anything starts
        run_experiment(spec(backend="ns3"), Path("/nonexistent"))


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
    s = ExperimentSpec.of(workers=4, bw_mbps=20.0, dtype=DType.INT32)
    with pytest.raises(ExperimentError, match="dtype = float32"):
        graph_job(s.topology(), s, graph, payload=PayloadKind.DIGITS)


def test_the_ranks_records_are_kept_as_the_loops(tmp_path: Path) -> None:
    """A digits run's ranks report the loop's records themselves (accuracy, loss, digest): graph_results keeps them as
    they are, where a model's training graph's are rebuilt from its node timings."""
    s = spec()
    [tg] = training_graph_jobs(s, topology_for(s))
    results: Any = {0: {"role": "worker", "node_id": 0, "iterations": [{"index": 0, "extra": {"accuracy": 0.5}}],
                        "model_digest": "ab"}}
    assert graph_results(tg, tmp_path, results, tg.job.job) is results


def test_a_compare_runs_train_digits_on_the_graph_engine(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[defaults]\nworkload = "train-digits"\ndtype = "float32"\nengine = "graph"\nbw_mbps = 20\n'
                    '[matrix]\nalgo = ["ring", "netreduce"]\n')
    runs = load_spec(path).runs
    assert [(r.algorithm.engine, r.algorithm.algo) for r in runs] == [(Engine.GRAPH, Algorithm.RING),
                                                                      (Engine.GRAPH, Algorithm.NETREDUCE)]


def test_the_command_line_takes_engine() -> None:
    from gradswitch.cli.main import build_parser, experiment_spec

    args = build_parser().parse_args(["experiment", "--workload", "train-digits", "--dtype", "float32", "--engine",
                                      "graph", "--bw", "20", "--algo", "netreduce", "--float-mode", "exponent"])
    s = experiment_spec(args)
    assert (s.algorithm.engine, s.algorithm.algo, s.workload.workload, str(s.workload.float_mode)) == (
        Engine.GRAPH, Algorithm.NETREDUCE, "train-digits", "exponent")


def test_the_results_table_says_what_the_model_learnt() -> None:
    """format_table's learning line (either engine): the accuracy first to last, and one digest on every worker of job
    1 or each worker's where they differ; nothing for a job that trains no model."""
    from gradswitch.experiment.report import _learning_lines

    report: Any = {"iterations": [{"accuracy": 0.25}, {"accuracy": 0.5}],
                   "extra": {"0": {"model_digest": "ab"}, "1": {"model_digest": "ab"}, "2": {"keys_served": 3}}}
    assert _learning_lines(report) == ["  learning              accuracy 0.250 -> 0.500 over 2 iterations (the worst "
                                       "worker's); model digest ab on every worker"]
    report["extra"]["1"]["model_digest"] = "cd"
    assert _learning_lines(report)[0].endswith("model digests DIFFER: node 0 ab, node 1 cd")
    report["iterations"] = [{"time_s": 1.0}]
    assert _learning_lines(report) == []


def test_k_of_n_on_the_graph_engine_is_the_all_reduce_switch_jobs() -> None:
    """NetReduce k of N (and its deadline) on the graph engine: the spec is fine (fixed point, as the loop's), the job
    carries k and the deadline as the loop's does, the all-reduce switch job takes them and the others none; k of N
    stays on one switch; the spec takes a slow worker and a worker's crash with it as the loop's does (a crash k of
    N does not ride through: docs/faults.md, "Stragglers: k of N")."""
    from gradswitch.experiment.graph_run import k_of_n

    s = spec(algo="netreduce", netreduce_k=3, netreduce_deadline_ms=20.0)
    assert s.problems() == []
    [tg] = training_graph_jobs(s, topology_for(s))
    assert (tg.job.job.netreduce_k, tg.job.job.netreduce_deadline_us) == (3, 20_000)
    assert k_of_n(tg.job.job, CollectiveKind.ALL_REDUCE) == (3, 20_000)
    assert k_of_n(tg.job.job, CollectiveKind.REDUCE_SCATTER) == (None, 0)
    assert [p for p in spec(algo="netreduce", netreduce_k=3, topo="leafspine").problems() if "one switch" in p]
    exponent = spec(algo="netreduce", netreduce_k=3, float_mode="exponent").problems()
    assert [p for p in exponent if "train-digits' in fixed point" in p], exponent
    slow = spec(algo="netreduce", netreduce_k=3, faults=["slow-worker:3@0,factor=1000"])
    assert slow.problems() == []  # the straggler case on BMv2: a slow worker, its computation stretched
    crash = spec(algo="netreduce", netreduce_k=3, faults=["worker-crash:3@1"])
    assert crash.problems() == crash.but(engine="loop").problems() == []


def test_the_results_table_says_how_many_workers_the_sums_held() -> None:
    """results.json's iterations take the workers' contributors and gradient error as the loop's (report._iteration:
    the largest of each), and format_table's partial-sums line reads them (either engine)."""
    from gradswitch.experiment.report import _iteration, _partial_sums_lines

    def record(contributors: float, error: float) -> Any:
        return {"index": 0, "time_s": 0.1, "start": 0.0, "end": 0.1, "check": "exact", "correct": True,
                "wrong_elements": 0, "extra": {"contributors": contributors, "gradient_error": error}}

    it = _iteration(0, [record(3.0, 0.3), record(3.0, 0.2)])
    assert (it["contributors"], it["gradient_error"]) == (3.0, 0.3)
    report: Any = {"spec": {"netreduce_k": 3, "netreduce_deadline_ms": None, "workers": 4},
                   "iterations": [it, _iteration(1, [record(4.0, 0.0), record(4.0, 0.0)])]}
    [line] = _partial_sums_lines(report)
    assert "3 of 4: an iteration's fewest per sum 3-4 workers" in line, line
    report["spec"]["netreduce_k"] = None
    assert _partial_sums_lines(report) == []
