"""bench/sim_faults.py, small and fast: the study's faults on the leaf-spine for one seed, each run's figures as the
bench stores them (code version, limits, the clean run each fault is timed from), and the docs' table from them.
Every run on the simulator's graph engine (the study runs its specs through simulated_graph.simulate_spec).

Shorter than the study's runs (179 iterations of 9 ms): every fault's times and the run's length are in RTOs
(run_length: 16 of them), so an RTO of 50 ms (the floor of placement.min_rto) instead of the path's 100 ms halves
the simulated time, and twice the study's slice of ResNet-50 (x0.1: an 18 ms iteration) halves the iterations
again (what the graph engine's driver spends its time on): 45 iterations. What the runs test is kept: the RTO above
both detection delays (30 and 40 ms: rerouted before the first timeout), each flap's window (1.5 RTOs, 75 ms) longer
than the link's detection, the restart (3 RTOs) and both flaps (6 RTOs) over before the run's last third."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.common import SIMULATED
from bench.sim_faults import CASES, Fabric, study
from gradswitch.experiment.tables.faults import sim_faults_table
from gradswitch.sim.faults import SWITCH_DETECT_S

pytestmark = pytest.mark.ns3

ITERATIONS = 12
MIN_RTO_MS = 50.0
SCALE = 0.1
JOBS = 2  # the fault runs two at a time: the suite runs one test at a time, and each simulator is one process


def test_the_fault_study_measures_every_fault_and_its_table_shows_them(tmp_path: Path) -> None:
    data = study([Fabric.LEAFSPINE], [0], ITERATIONS, tmp_path / "runs", scale=SCALE, jobs=JOBS, min_rto_ms=MIN_RTO_MS)
    assert data["code_version"] and data["limits"]["limited_by"] == SIMULATED
    assert data["limits"]["machine_bound"] is False
    runs = {r["case"]: r for r in data["runs"]}
    assert set(runs) == {"clean"} | {c.name for c in CASES}
    clean = runs["clean"]
    n = clean["iterations"]
    assert n == data["iterations"]["leafspine"] >= ITERATIONS  # long enough for 16 RTOs (run_length)
    assert clean["rto_s"] == pytest.approx(MIN_RTO_MS / 1000) and n * clean["iteration_s"] >= 0.95 * 16 * clean["rto_s"]
    assert clean["exact"] and clean["completed"] == n and clean["outcome"] is None
    for name in ("spine-crash", "spine-crash-restart", "link-down", "link-flap"):
        r = runs[name]
        assert r["exact"] and r["completed"] == n, name  # ridden through on retransmission
        assert r["outcome"] in ("recovered", "no-effect"), name
        if r["outcome"] == "recovered":
            assert r["time_to_recover_s"] is not None and r["time_to_recover_s"] > 0, name
            assert r["lost_packets"] > 0, name
    assert runs["spine-crash"]["time_to_detect_s"] == pytest.approx(SWITCH_DETECT_S, abs=1e-9)
    restarted = runs["spine-crash-restart"]
    assert restarted["throughput_after"] == pytest.approx(1 / clean["iteration_s"], rel=0.05)  # spine1 back: as clean
    crash = runs["worker-crash"]
    # interrupted, its job stopped at the crash, the iterations completed before it kept
    assert crash["outcome"] == "interrupted" and 0 < crash["completed"] < n
    assert crash["iterations_lost"] == 1 and crash["sim_s"] == pytest.approx(float(crash["fault"].split("@")[1]))
    slow = runs["slow-worker"]
    assert slow["outcome"] == "recovered" and slow["exact"]
    assert slow["throughput_during"] is not None and slow["throughput_before"] is not None
    assert slow["throughput_after"] < 0.9 * slow["throughput_before"]  # its computation x 2 from the fault on
    # the docs' table: one row per fault, from the stored JSON
    (tmp_path / "sim-faults.json").write_text(json.dumps(data))
    lines = sim_faults_table(tmp_path).splitlines()
    assert len(lines) == 2 + len(CASES)
    assert lines[2].startswith("| leafspine (8 workers): switch-crash:spine1@")
    assert lines[-1].endswith("| 1 of 1 |")
