"""docs/faults.md's stragglers table is bench/results/stragglers.json's (bench.stragglers.table), and every run it
summarises was exact (each sum against the workers it names) and is in the JSON."""

from __future__ import annotations

import json

from bench.stragglers import CONFIGS, table
from gradswitch.protocol.paths import REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "results" / "stragglers.json"


def test_the_docs_table_is_the_measured_one():
    data = json.loads(RESULTS.read_text())
    assert table(data) in (REPO_ROOT / "docs" / "faults.md").read_text()


def test_every_configuration_ran_on_every_seed_and_was_exact():
    data = json.loads(RESULTS.read_text())
    runs = {(r["config"], r["seed"]) for r in data["rows"]}
    assert runs == {(c, s) for c in CONFIGS for s in data["seeds"]} and len(data["seeds"]) >= 3
    assert all(r["ok"] and r["iterations"] == data["iterations"] for r in data["rows"])
    assert data["code_version"] and data["toolchain"]["bmv2"]
    assert all("machine_bound" in r["limits"] for r in data["rows"])
