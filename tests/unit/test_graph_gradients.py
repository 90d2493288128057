"""A float32 job's all-reduces in a row on the hosts' graph engine carry the loop's float32 gradients (payload
`gradients`, gradswitch/hosts/graph_gradients.py): exact on the wire, and each iteration's error against the float64
sum the loop's max_abs_error, to the bit, in both float modes; a wrong sum is caught and its error is larger; a
spec's float32 job takes the payload on BMv2 and reports the error in results.json's iterations."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gradswitch.experiment.graph_as_loop import loop_results, training_graph_jobs
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.hosts.collectives.ops import ops_of
from gradswitch.hosts.graph_data import SyntheticData
from gradswitch.hosts.graph_gradients import GradientData
from gradswitch.hosts.graph_job import GraphJob
from gradswitch.hosts.graph_sources import data_source
from gradswitch.workload.generators import collective_graph, plain_graph
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.graph_iterations import iteration_float_errors
from gradswitch.workload.graph_payload import PayloadKind
from gradswitch.workload.job import DType, JobConfig
from gradswitch.workload.records import CheckKind
from gradswitch.workload.worker_result import WorkerResult
from tests.inmemory import job, run_ok
from tests.memlink import MemoryHub
from tests.unit.test_graph_engine_hosts import run_graph_threads

FLOATS: dict[str, Any] = {"dtype": "float32", "transport": "sr", "linger_timeout": 1.0, "seed": 5,
                          "size_bytes": 40_000}


def float_job(mode: str, workers: int = 3, iterations: int = 3, **kw: Any) -> JobConfig:
    return job("ring", workers, iterations=iterations, **{**FLOATS, "float_mode": mode, **kw})


@pytest.mark.parametrize("mode", ["fixed", "exponent"])
def test_the_graphs_error_is_the_loops_to_the_bit(tmp_path: Path, mode: str) -> None:
    """The same job on the loop and as its graph of all-reduces in a row: every sum exact on the wire, and per rank
    and iteration the same max_abs_error (the same gradients from the seed, the same sums, decoded alike), above 0
    and within fixed point's bound N x 2^-(bits + 1) (block exponents: far below it)."""
    cfg = float_job(mode)
    for d in ("loop", "graph"):
        (tmp_path / d).mkdir()
    loop = run_ok(cfg, tmp_path / "loop")
    results, run = run_graph_threads(GraphJob(cfg, plain_graph(cfg), payload=PayloadKind.GRADIENTS),
                                     tmp_path / "graph", MemoryHub(seed=4))
    assert all(r["ok"] for r in results.values()), [r.get("error") for r in results.values()]
    comm = [n for n in run.nodes if n.kind == "collective"]
    assert comm and all(n.checked is True for n in comm)
    bound = 3 * 2.0 ** -21
    for rank in range(3):
        errors = iteration_float_errors(plain_graph(cfg), run, rank)
        want = [it["max_abs_error"] for it in loop[rank]["iterations"]]
        assert [errors[i] for i in range(cfg.iterations)] == want, (rank, errors, want)
        assert all(0 < e <= bound for e in want)
        if mode == "exponent":
            assert all(e < bound / 100 for e in want)
    # the codes' sums carry no numbers: no error of their own
    codes = [n for n in comm if ".codes." in plain_graph(cfg).ranks[n.rank].by_id()[n.node_id].name]
    assert (mode == "exponent") == bool(codes) and all(n.float_error is None for n in codes)
    # results.json's iterations as the loop's report takes them (gradswitch/experiment/graph_as_loop.py)
    ranks: dict[int, WorkerResult] = {r: {**results[r], "role": "worker"} for r in range(3)}  # type: ignore[typeddict-item]
    reported = loop_results(plain_graph(cfg), run, ranks, cfg, CheckKind.EXACT)
    assert [it["max_abs_error"] for it in reported[0]["iterations"]] == [it["max_abs_error"]
                                                                         for it in loop[0]["iterations"]]
    # on the simulator (int32 sums, exact): 0, as its loop reports it
    simulated = loop_results(plain_graph(cfg), run, ranks, cfg, CheckKind.EXACT, simulated=True)
    assert all(it["max_abs_error"] == 0.0 for it in simulated[0]["iterations"])


def test_a_wrong_sum_is_caught_and_its_error_is_larger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One element of a sum off by one unit on the wire: its check counts it wrong, and its error against the
    float64 sum grows by about one fixed-point unit (2^-20) over the exact sum's."""
    cfg = float_job("fixed", iterations=1)
    graph = plain_graph(cfg)
    ops = ops_of(graph, 0)
    sources = [GradientData(cfg, r, ops_of(graph, r)) for r in range(3)]
    (nid, op), = ops.items()
    exact = np.sum([s.input(ops_of(graph, r)[nid]) for r, s in enumerate(sources)], axis=0).astype(np.int32)
    source = sources[0]
    source.finished(op, exact)
    assert np.array_equal(source.expected(op), exact)
    right = source.float_error(op, exact)
    assert right is not None and 0 < right <= 3 * 2.0 ** -21
    wrong = exact.copy()
    wrong[7] += 1
    again = GradientData(cfg, 0, ops)
    again.finished(op, wrong)
    assert int(np.count_nonzero(again.expected(op) != wrong)) == 1
    worse = again.float_error(op, wrong)
    assert worse is not None and worse >= 2.0 ** -20 - right


def test_the_source_follows_the_payload_and_refuses_what_it_cannot_carry() -> None:
    cfg = float_job("fixed")
    ops = ops_of(plain_graph(cfg), 0)
    assert isinstance(data_source(PayloadKind.GRADIENTS, cfg, 0, ops), GradientData)
    assert isinstance(data_source(PayloadKind.SYNTHETIC, cfg, 0, ops), SyntheticData)
    with pytest.raises(ValueError, match="dtype = float32"):
        data_source(PayloadKind.GRADIENTS, replace(cfg, dtype=DType.INT32), 0, ops)
    with pytest.raises(ValueError, match="only all-reduces of the world group of 10000 elements"):
        data_source(PayloadKind.GRADIENTS, cfg, 0, ops_of(collective_graph(CollectiveKind.ALL_GATHER, 3, 400), 0))
    assert GraphJob.from_json(GraphJob(cfg, plain_graph(cfg), payload=PayloadKind.GRADIENTS).to_json()).payload \
        == PayloadKind.GRADIENTS


def test_a_float32_spec_carries_the_gradients_on_bmv2_only() -> None:
    """A spec's float32 job without training: its graph carries the loop's gradients on the hosts (BMv2); on the
    simulator and for int32 or a training graph, synthetic data."""
    base = {"algo": "ring", "workers": 3, "topo": "rack", "size_bytes": 40_000, "bw_mbps": 8.0, "iterations": 2}
    for extra, payload in (({"dtype": "float32"}, PayloadKind.GRADIENTS),
                           ({"dtype": "float32", "float_mode": "exponent"}, PayloadKind.GRADIENTS),
                           ({}, PayloadKind.SYNTHETIC),
                           ({"dtype": "float32", "backend": "ns3"}, PayloadKind.SYNTHETIC),
                           ({"dtype": "float32", "workload": "resnet50", "scale": 0.002,
                             "emulate": {"link_gbps": 10.0, "batch": 32}}, PayloadKind.SYNTHETIC)):
        spec = spec_from_dict({**base, **extra})
        (tg,) = training_graph_jobs(spec, topology_for(spec))
        assert tg.job.payload == payload, extra
