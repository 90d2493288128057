"""NetReduce falls back to ring all-reduce when its aggregation switch dies, and returns when it is back, on real
BMv2 (gradswitch/hosts/fallback.py, gradswitch/experiment/netreduce_watch.py): a 2x2 leaf-spine, 4 workers, spine1 (job
1's aggregation switch) killed mid-run by the run's own fault schedule (`--fault switch-crash:spine1@...`), restarted or
not; every iteration exact, the reductions between the two agreements by ring, the later ones by the switch again. On a
rack the only switch cannot be replaced by ring: the job stops at once, naming the switch.

The tests run the default engine, the graph's: the fault's target, spine1, aggregates its all-reduce switch job as it
does the loop's NetReduce job 1 (the switch job aggregates on its graph's job id's spine);
tests/mininet/test_faults_bmv2.py runs a training's fallback and return on both engines, the same spine killed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.netreduce_watch import RECORDS_FILE, read_records
from gradswitch.experiment.spec import spec_from_dict
from tests.results import run_experiment

pytestmark = pytest.mark.mininet

BASE: dict[str, Any] = {"algo": "netreduce", "workers": 4, "topo": "leafspine", "size_bytes": 256 << 10,
                        "bw_mbps": 20.0}


def worker_results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((out / "run" / "job1").glob("result-*.json"))]


def watch_records(out: Path) -> list[dict[str, Any]]:
    return read_records(out / "run" / "job1" / RECORDS_FILE)


def exact(report: dict[str, Any], iterations: int) -> bool:
    its = report["iterations"]
    return len(its) == iterations and all(it["correct"] and it["wrong_elements"] == 0 for it in its)


def test_spine_killed_and_restarted_falls_back_to_ring_and_returns(tmp_path):
    iterations = 50
    spec = spec_from_dict({**BASE, "iterations": iterations,
                           "faults": ["switch-crash:spine1@3,restart=4"]})
    report = run_experiment(spec, tmp_path, progress=False)
    assert report["ok"] and exact(report, iterations), report["errors"]
    (fault,) = report["faults"]
    assert fault["outcome"] == "recovered" and fault["fallback"] == "ring", fault
    workers = worker_results(tmp_path)
    assert len(workers) == 4
    changes = [w["fallback"]["changes"] for w in workers]
    for w, c in zip(workers, changes, strict=True):
        assert w["ok"], w.get("error")
        assert [x["path"] for x in c] == ["ring", "switch"] and c[0]["switch"] == "spine1"
        assert w["fallback"]["by_ring"] > 0
    ring_from, switch_from = changes[0][0]["from_reduction"], changes[0][1]["from_reduction"]
    assert all((c[0]["from_reduction"], c[1]["from_reduction"]) == (ring_from, switch_from) for c in changes)
    total = workers[0]["fallback"]["by_switch"] + workers[0]["fallback"]["by_ring"]
    assert switch_from < total  # later reductions went through the (restarted) switch again
    for w in workers:
        assert w["fallback"]["by_ring"] + w["fallback"]["redone_for_others"] == switch_from - ring_from
    down, up = watch_records(tmp_path)
    assert (down["path"], up["path"]) == ("ring", "switch")
    assert "leaf1" in down["detail"] and "spine1" in up["detail"]  # cells cleared: the leaves, then all three
    # The fallback came long before the workers' retransmissions to the dead switch would have given up
    # (bench/results/netreduce-fallback-*.json: 40-65 ms from the controller noticing spine1's loss to every
    # worker on ring, 82-133 ms from its return to every worker back on the switch).
    fell_back = max(c[0]["agreed_at"] for c in changes) - down["noticed_at"]
    returned = max(c[1]["agreed_at"] for c in changes) - up["noticed_at"]
    assert 0 < fell_back < 1.0 and 0 < returned < 1.0, (fell_back, returned)


def test_spine_killed_for_good_leaves_the_rest_of_the_run_to_ring(tmp_path):
    iterations = 20
    spec = spec_from_dict({**BASE, "iterations": iterations, "faults": ["switch-crash:spine1@2"]})
    report = run_experiment(spec, tmp_path, progress=False)
    assert report["ok"] and exact(report, iterations), report["errors"]
    for w in worker_results(tmp_path):
        fb = w["fallback"]
        assert [x["path"] for x in fb["changes"]] == ["ring"]
        assert fb["by_ring"] + fb["redone_for_others"] == iterations - fb["changes"][0]["from_reduction"]
        assert str(iterations - 1) in fb["ring_by_iteration"]  # the last iteration by ring


def test_the_only_switch_of_a_rack_killed_stops_the_job_naming_it(tmp_path):
    """Ring all-reduce needs the switch too: the job stops within a second, with one line naming the switch and
    the hosts, the iterations before the crash kept (not a timeout after the transport's retries)."""
    spec = spec_from_dict({**BASE, "topo": "rack", "iterations": 40, "faults": ["switch-crash:s1@2,restart=3"]})
    report = run_experiment(spec, tmp_path, progress=False)
    assert not report["ok"]
    (fault,) = report["faults"]
    assert fault["outcome"] == "interrupted", fault
    assert fault["job_stopped_s"] - fault["injected_s"] < 1.5, fault  # measured 0.43 s
    assert 0 < len(report["iterations"]) < 40 and all(it["correct"] for it in report["iterations"])
    # the switch job: the loop's job 1, or the graph engine's all-reduces' job of their own (the default's)
    why = re.compile(r"NetReduce job \d+: switch s1 is down and h1, h2, h3, h4 are attached to it")
    assert any(why.search(e) for e in report["errors"].values()), report["errors"]
    (record,) = watch_records(tmp_path)
    assert record["path"] is None and why.search(record["detail"])
