"""bench.ns3_speed, bench.ns3_profile and bench.mpi_scaling on the built simulator, on small scenarios of their own
kind: their runs are specs on the simulator's graph engine (simulated_graph.simulate_spec, spec_sim_config), their
JSON records the graph engine and reads back into their tables, and the MPI benchmark gives the same answer, every
worker's iterations to the tick, on one rank and on two (barrier and null messages)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import mpi_scaling, ns3_profile, ns3_speed
from gradswitch.experiment.spec import Engine
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, engines_of
from gradswitch.experiment.tables.simulator import mpi_projection_table, mpi_scaling_table, ns3_speed_table
from gradswitch.sim.build import status
from gradswitch.sim.sim_settings import EventList
from gradswitch.workload.job import Algorithm

pytestmark = pytest.mark.ns3

SMALL = [(Algorithm.RING, 16, "synthetic", 1 << 20, 2), (Algorithm.NETREDUCE, 16, "synthetic", 1 << 20, 2)]


def test_the_speed_benchmark_runs_its_scenarios_as_graphs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ns3_speed.SCENARIOS, "small", SMALL)
    out = tmp_path / "ns3-speed.json"
    monkeypatch.setattr(sys, "argv", ["ns3_speed", "--only", "small", "--out", str(out)])
    ns3_speed.main()
    doc = json.loads(out.read_text())
    assert doc["format"] == BENCHMARK_FORMAT
    assert engines_of(doc, out) == (Engine.GRAPH,)
    assert [(r["algo"], r["workers"]) for r in doc["runs"]] == [("ring", 16), ("netreduce", 16)]
    for r in doc["runs"]:
        assert r["ok"], r
        assert len(r["iteration_s"]) == 2
        # no faster than the link rate allows, and near it (an all-reduce alone on a 100 Gb/s fat tree)
        assert r["bound_s"] <= min(r["iteration_s"]) and max(r["iteration_s"]) < 3 * r["bound_s"], r
        assert r["events"] > 0 and r["packet_hops"] > 0 and r["wall_s"] > 0 and r["peak_rss_mb"] > 0
        assert r["window"] >= ns3_speed.WINDOW and r["credits"] >= ns3_speed.CREDITS  # the plan raises, never lowers
    assert "| small | netreduce | 16 |" in ns3_speed_table(tmp_path)


def test_the_profiles_configuration_is_the_graph_runs_on_each_event_list(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ns3_speed.SCENARIOS, "small", SMALL)
    outputs = []
    for scheduler in ns3_profile.SCHEDULERS:
        path = ns3_profile.config_file(tmp_path, "small", 1, scheduler)
        config = json.loads(path.read_text())
        assert config["scheduler"] == str(scheduler)
        (job,) = config["jobs"]
        assert "graph" in job  # the graph engine's job: its ranks' graphs
        assert ns3_profile.timed([str(status().binary), "--config", str(path), "--out",
                                  str(tmp_path / f"{scheduler}.json")]) > 0
        outputs.append(json.loads((tmp_path / f"{scheduler}.json").read_text()))
    # the event list changes the wall time, never the simulated run
    assert len({(o["sim_s"], o["events"], o["packet_hops"]) for o in outputs}) == 1
    assert outputs[0]["sim_s"] > 0 and outputs[0]["packet_hops"] > 0
    assert ns3_profile.SCHEDULERS[0] == EventList.PRIORITY_QUEUE  # the default first: what the profiles run on


@pytest.mark.ns3_mpi
@pytest.mark.parametrize("algo", [Algorithm.NETREDUCE, Algorithm.RING])
def test_the_mpi_benchmark_gives_the_same_answer_on_every_rank_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     algo: Algorithm) -> None:
    out = tmp_path / "mpi-scaling.json"
    monkeypatch.setattr(sys, "argv", ["mpi_scaling", "--algo", str(algo), "--workers", "16", "--size", "1MiB",
                                      "--out", str(out)])
    mpi_scaling.main()  # exits 1 when a rank count gives another answer
    doc = json.loads(out.read_text())
    assert engines_of(doc, out) == (Engine.GRAPH,)
    assert [(m["ranks"], m["sync"]) for m in doc["measured"]] == [(1, "none"), (2, "barrier"), (2, "null-message")]
    same = doc["same_answer"]
    assert same["all_correct"] and same["identical_iterations"] == [True, True]
    assert same["iteration_relative_difference"] == [[0.0], [0.0]]
    assert all(m["cut_links"] > 0 and len(m["peak_rss_mb_per_rank"]) == 2 for m in doc["measured"][1:])
    assert [p["ranks"] for p in doc["projected"]] == [1, 2, 4]  # a k=4 fat tree: 4 pods
    assert doc["run"]["topology"] == "fattree k=4" and doc["run"]["size_bytes"] == 1 << 20
    assert mpi_scaling_table(tmp_path).count("\n") >= 4 and "| 4 |" in mpi_projection_table(tmp_path)
