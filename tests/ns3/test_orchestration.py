"""`gradswitch experiment --backend ns3` and compare specs with `backend = "ns3"` (one spec, two backends, and its
"Done when"): the same specs run on the simulator through the orchestration, with every feature of a spec
reaching the simulator, and come out in the same results.json, table, plots and compare reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment import results_file
from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.placement import PACKET_OVERHEAD, place, topology_for
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import Backend, Engine, ExperimentError, ExperimentSpec, Topo, spec_from_dict
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.version import code_version
from gradswitch.workload.job import Algorithm
from gradswitch.workload.plan import allreduce_bound_s
from tests.results import read, run_compare, run_experiment

pytestmark = pytest.mark.ns3

NS3 = Backend.NS3


def _run(spec: ExperimentSpec, tmp_path: Path) -> dict[str, Any]:
    report = run_experiment(spec, tmp_path / spec.label, progress=False)
    saved = results_file.read(tmp_path / spec.label / "results.json")
    assert saved["format"] == results_file.FORMAT and saved["code_version"] == code_version()
    assert saved["backend"] == "ns3" and saved["summary"] == report["summary"]
    return report


def test_the_issues_first_command_as_written(tmp_path):
    """`gradswitch experiment --backend ns3 --algo ring --workers 4 --topo rack --size 1MiB --bw 20 --iterations 3`:
    exact, within 15 % of its link-rate bound, "backend": "ns3" in results.json."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "gradswitch", "experiment", "--backend", "ns3", "--algo", "ring",
                           "--workers", "4", "--topo", "rack", "--size", "1MiB", "--bw", "20", "--iterations", "3",
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert proc.returncode == 0, proc.stderr
    report = read(out / "results.json")
    assert report["backend"] == "ns3" and report["check"] == "exact" and report["summary"]["correct"] is True
    bound = allreduce_bound_s(Algorithm.RING, 4, 0, 1 << 20, 20e6 / 8)
    assert report["summary"]["lower_bound_s"] == pytest.approx(bound)
    assert bound <= report["summary"]["median_s"] <= 1.15 * bound
    assert "on the ns-3 simulator" in proc.stdout and "M events/s" in proc.stdout
    sim = report["simulator"]
    assert sim["events"] > 0 and sim["wall_s"] > 0
    assert sim["events_per_s"] == pytest.approx(sim["events"] / sim["wall_s"], rel=0.05)
    assert report["headline_extra"]["machine_bound"] is False and report["headline_extra"]["events_per_s"] > 0
    assert (out / "iterations.png").exists() and (out / "table.txt").exists()


@pytest.mark.parametrize("algo", [Algorithm.RING, Algorithm.NETREDUCE, Algorithm.PS])
@pytest.mark.parametrize("topo", [Topo.RACK, Topo.LEAFSPINE])
def test_every_algorithm_on_both_testbed_topologies(tmp_path, algo, topo):
    spec = ExperimentSpec.of(backend=NS3, algo=algo, topo=topo, workers=4, size_bytes=256 << 10, bw_mbps=20,
                             iterations=2)
    report = _run(spec, tmp_path)
    s = report["summary"]
    assert report["ok"] and s["correct"] and s["iterations_done"] == 2
    assert s["median_s"] >= s["lower_bound_s"] and s["ratio_to_bound"] < 1.5
    assert report["headline_extra"]["busiest_link_load"] > 0.5


def ring_latency_s(spec: ExperimentSpec) -> float:
    """The latency term of a ring all-reduce by hand (the alpha of an alpha-beta model): its critical path goes
    around the ring 2(N-1)/N times, and each hop from rank i to i+1 costs a packet's store-and-forward and the
    propagation delay of every link on the path after the first (whose serialization is in S/B)."""
    topo = topology_for(spec)
    nodes = place(spec, topo).jobs[0]
    assert spec.network.bw_mbps is not None
    packet_s = (spec.transport.mtu + PACKET_OVERHEAD) / (spec.network.bw_mbps * 1e6 / 8)
    edge = {node.host: topo.attachment(node.host)[0] for node in nodes}
    around = 0.0
    for a, b in zip(nodes, nodes[1:] + nodes[:1], strict=True):
        links = topo.distances_to(edge[b.host])[edge[a.host]] + 2
        around += links * spec.network.sim.link_delay_us * 1e-6 + (links - 1) * packet_s
    return 2 * (spec.network.workers - 1) / spec.network.workers * around


def test_beyond_bmv2s_limits_on_a_fat_tree(tmp_path):
    """A ring of 160 (more than 128), NetReduce of 40 members (more than 32) with 12 credits (more than 8), on a
    fat tree: checked by digest, at or above the link-rate bound. A ring of 160 moving 4 MiB sends chunks of
    26 KiB (2 us at 100 Gb/s) over 318 steps: its time is mostly the ring's latency (about 1.1 ms against a
    link-rate bound of 0.67 ms), so the ring is held to the bound plus that latency, computed by hand."""
    ring = ExperimentSpec.of(backend=NS3, algo=Algorithm.RING, topo=Topo.FATTREE, workers=160, size_bytes=4 << 20,
                             bw_mbps=100_000, iterations=1)
    nr = ExperimentSpec.of(backend=NS3, algo=Algorithm.NETREDUCE, topo=Topo.FATTREE, workers=40, credits=12,
                           size_bytes=4 << 20, bw_mbps=100_000, iterations=1, k=8)
    for spec in (ring, nr):
        assert spec.problems() == []
        report = _run(spec, tmp_path)
        assert report["ok"] and report["summary"]["correct"], report["errors"]
        assert report["check"] == "digest"
        s = report["summary"]
        assert s["ratio_to_bound"] >= 1.0
        if spec is ring:
            alpha_beta = s["lower_bound_s"] + ring_latency_s(spec)
            assert alpha_beta <= s["median_s"] < 1.15 * alpha_beta, (s["median_s"], alpha_beta)
        else:
            assert s["ratio_to_bound"] < 1.5
    assert json.loads((tmp_path / nr.label / "job1.json").read_text())["credits"] >= 12


def test_features_of_a_spec_reach_the_simulator():
    spec = spec_from_dict({"backend": "ns3", "algo": "ps", "workers": 2, "jobs": 2, "colocate_servers": True,
                           "tensorlights": True, "tensorlights_rotate_s": 0.5, "background_flows": 3,
                           "topo": "leafspine", "loss_pct": 1.5, "roce_class": True, "ecmp_seed": 7,
                           "load_balance": "flowlet", "flowlet_gap_us": 300, "transport": "sr",
                           "dlcp": {"priority": True, "drop": True, "threshold_bytes": 9000, "loss_budget": 0.1},
                           "sim": {"switch_delay_us": 20, "host_delay_us": 30, "link_delay_us": 2, "check": "exact",
                                   "queue_bytes": 100_000}, "bw_mbps": 20, "seed": 5})
    assert spec.problems() == []
    plan = plan_run(spec)
    placement = plan.placement
    s = plan.sim_settings(progress=True)
    assert (s.loss_pct, s.roce_class, s.ecmp_seed, str(s.load_balance), s.flowlet_gap_us) == (1.5, True, 7, "flowlet",
                                                                                               300)
    assert (s.dlcp.priority, s.dlcp.drop, s.dlcp.spray, s.dlcp.threshold_bytes) == (True, True, False, 9000)
    assert (s.switch_delay_s, s.host_message_delay_s, s.link_delay_s) == pytest.approx((20e-6, 30e-6, 2e-6))
    assert str(s.check) == "exact" and s.queue_bytes == 100_000 and s.seed == 5 and s.progress_s > 0
    assert s.background is not None and (s.background.sender, s.background.receiver) == placement.background
    assert s.background.flows == 3 and s.background.mss == spec.transport.mtu
    assert s.tensorlights is not None and s.tensorlights.host == placement.server_host
    assert s.tensorlights.servers == ((1, 2), (2, 2)) and s.tensorlights.rotate_s == 0.5
    assert plan.sim_settings(progress=False).progress_s == 0


def test_dlcp_contention_with_background_tcp_and_tensorlights_run(tmp_path):
    """DLCP trimming at threshold 0 under bulk TCP (every droppable packet behind another is trimmed), with the
    BMv2 test's loss settings (tests/mininet/test_dlcp.py LOSSY): receivers zero-fill within the budget and
    NAK the rest at once, as gradswitch/roce/qp.py does. (Dropping those silently and waiting for the sender's timer
    made iterations 46x their bound.)"""
    contention = spec_from_dict({"backend": "ns3", "algo": "ring", "workers": 4, "jobs": 2, "background_flows": 2,
                                 "topo": "leafspine", "bw_mbps": 10, "workload": "vgg16", "scale": 0.002,
                                 "transport": "sr", "roce_class": True, "sync": "layer", "scheduling": "priority",
                                 "partition_mb": 16, "iterations": 3, "mtu": 1024,
                                 "dlcp": {"priority": True, "drop": True, "threshold_bytes": 0, "loss_budget": 0.2,
                                          "max_relative_error": 1.0},
                                 "emulate": {"link_gbps": 10, "batch": 32}})
    report = _run(contention, tmp_path)
    assert report["ok"], report["errors"]
    assert report["training"]["samples_per_s_real"] > 0
    extra = report["headline_extra"]
    assert extra["dlcp_dropped"] > 0 and extra["zero_filled_packets"] > 0  # trimmed at threshold 0, zero-filled
    assert 0 < extra["max_relative_error"] <= 1.0
    assert report["retransmissions"] > 0  # over the budget: NAKed and resent
    assert report["summary"]["ratio_to_bound"] < 4  # resent at once, not after a timeout
    assert extra["background_goodput_mbps"] > 0
    assert set(report["jobs"]) == {"1", "2"}
    assert (tmp_path / contention.label / "timeline.json").exists()
    lights = spec_from_dict({"backend": "ns3", "algo": "ps", "workers": 2, "jobs": 2, "colocate_servers": True,
                             "tensorlights": True, "size_bytes": 256 << 10, "bw_mbps": 20, "iterations": 2})
    assert _run(lights, tmp_path)["ok"]


@pytest.mark.parametrize("transport", ["gbn", "sr"])
def test_loss_is_recovered_through_the_orchestration(tmp_path, transport):
    spec = spec_from_dict({"backend": "ns3", "algo": "netreduce", "workers": 4, "size_bytes": 256 << 10,
                           "bw_mbps": 20, "iterations": 2, "loss_pct": 2, "transport": transport})
    report = _run(spec, tmp_path)
    assert report["ok"] and report["summary"]["correct"] and report["retransmissions"] > 0


def test_training_on_the_simulator_runs_at_dilation_one(tmp_path):
    spec = spec_from_dict({"backend": "ns3", "algo": "netreduce", "workers": 8, "topo": "fattree",
                           "bw_mbps": 100_000, "workload": "resnet50", "iterations": 2, "warmup": 0,
                           "emulate": {"device": "v100", "batch": 32}})
    report = _run(spec, tmp_path)
    t = report["training"]
    assert t["dilation"] == 1.0 and t["emulate"]["link_gbps"] == 100.0
    assert report["ok"] and report["check"] == "digest" and report["summary"]["correct"]
    assert 0.8 < t["of_ideal"] <= 1.0001  # at 100 Gb/s on 8 workers ResNet-50 is near its ideal
    assert t["samples_per_s_real"] == pytest.approx(8 * 32 / t["iteration_s_real"])
    assert (tmp_path / spec.label / "timeline.png").exists()


def test_a_compare_spec_with_both_backends_and_repetitions(tmp_path):
    """BMv2 and ns-3 rows in one table: here every run on ns-3 (tests/mininet runs the BMv2 side), with a backend
    matrix that puts ns3 first, repetitions and a baseline; resumed, nothing runs again."""
    path = tmp_path / "both.toml"
    path.write_text('name = "both"\nrepeat = 2\nbaselines = ["ring"]\nfigures = ["median_s"]\n'
                    '[defaults]\nbackend = "ns3"\nworkers = 4\nsize_bytes = 262144\nbw_mbps = 20\niterations = 2\n'
                    '[[runs]]\nname = "ring"\nalgo = "ring"\n[[runs]]\nname = "netreduce"\nalgo = "netreduce"\n')
    spec = load_spec(path)
    logged: list[str] = []
    summary = run_compare(spec, tmp_path / "out", log=logged.append)
    assert summary["netreduce"]["backend"] == "ns3" and summary["netreduce"]["repetitions_done"] == 2
    ratio = summary["netreduce"]["over_baseline"]["ratio"]
    netreduce, ring = summary["netreduce"].get("median_s"), summary["ring"].get("median_s")
    assert ratio is not None and netreduce is not None and ring is not None
    assert ratio == pytest.approx(netreduce / ring)
    assert 0.55 < ratio < 0.8  # NetReduce S/B against ring's 2(N-1)/N S/B = 1.5 S/B: 0.67
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| netreduce | ns3 | 2 of 2 |" in report
    again: list[str] = []
    run_compare(spec, tmp_path / "out", log=again.append)
    assert sum("skipped" in line for line in again) == 4


def test_trimming_at_scale_costs_no_timer(tmp_path):
    """The study's DLCP contention (bench/scaling.py), 8 workers per job: trimming with a loss budget must not slow
    an iteration down. A trimmed packet SACKed by a hole's NAK and then NAKed over the budget was skipped as
    received when resent, and waited for the 50 ms timer: 27x slower than priority alone."""
    from bench.scaling import dlcp_runs

    runs = {s.name: s.but(workers=8, iterations=2) for s in dlcp_runs()}
    drop = _run(runs["dlcp-priority+drop"], tmp_path)
    alone = _run(runs["dlcp-priority"], tmp_path)
    assert drop["headline_extra"]["dlcp_dropped"] > 0 and drop["headline_extra"]["zero_filled_packets"] > 0
    assert drop["retransmissions"] > 0  # over the budget: resent
    assert drop["training"]["iteration_s_real"] < 1.2 * alone["training"]["iteration_s_real"]


def test_a_finished_run_is_summarized_again_without_simulating(tmp_path):
    """resummarize: results.json written again from the simulator's output with today's report code gives what
    the run wrote (the same document, to the byte), and only reads: the simulator's files are not touched. A run of
    the simulator's loops (engine = loop); a spec on the graph engine is refused in one line."""
    from gradswitch.experiment.simulated import resummarize

    spec = ExperimentSpec.of(algo=Algorithm.PS, workers=4, size_bytes=256 << 10, bw_mbps=20, iterations=2, backend=NS3,
                             loss_pct=1.0, engine=Engine.LOOP)
    out = tmp_path / spec.label
    _run(spec, tmp_path)
    written = (out / "results.json").read_text()
    sim_files = {p.name: p.stat().st_mtime_ns for p in (out / "sim").iterdir()}
    uncounted = {**json.loads(written), "timeouts": None, "duplicates": None}  # as written before they were counted
    results_file.write(out / "results.json", results_file.parse(uncounted))
    again = resummarize(spec, out)
    assert again is not None and (out / "results.json").read_text() == written
    assert again["retransmissions"] > 0 and again["duplicates"] is not None and again["timeouts"] is not None
    assert {p.name: p.stat().st_mtime_ns for p in (out / "sim").iterdir()} == sim_files
    with pytest.raises(ExperimentError, match=r"engine = graph: only a run of the simulator's loops \(engine = loop\)"):
        resummarize(spec.but(engine=Engine.GRAPH), out)
    assert resummarize(spec, tmp_path / "nothing-here") is None
