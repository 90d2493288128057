"""docs/workloads.md's table of collectives run from traces is bench/results/workload-et-ns3.json's, row by row."""

from __future__ import annotations

import json

from gradswitch.protocol.paths import REPO_ROOT


def test_the_table_is_the_measured_one():
    rows = json.loads((REPO_ROOT / "bench" / "results" / "workload-et-ns3.json").read_text())["rows"]
    want = [f"| {r['collective']} | {r['time_s'] * 1e3:.3f} | {r['bound_s'] * 1e3:.3f} | {r['ratio']:.2f} | "
            f"{'yes' if r['checked'] else 'NO'} |" for r in rows]
    text = (REPO_ROOT / "docs" / "workloads.md").read_text()
    start = text.index("| collective | time (ms) | bound (ms) | time / bound | exact |")
    table = text[start:].split("\n\n")[0].splitlines()[2:]
    assert table == want
