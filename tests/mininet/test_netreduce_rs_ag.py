"""NetReduce reduce-scatter and all-gather end to end: workers in Mininet hosts
(gradswitch/hosts/netreduce_rs_ag_check.py),
sums and copies made by the BMv2 switches, 2 % loss on every worker link in both directions, flat on a rack and
hierarchical on a 2x2 leaf-spine fabric. Every rank checks every element of every output; the losses must have
made the hosts retransmit, and the switches answer retransmissions (never counting a contribution twice).
"""

from __future__ import annotations

import pytest

from bench.netreduce_rs_ag import run_collective

pytestmark = pytest.mark.mininet


@pytest.mark.parametrize("topo", ["rack", "leafspine"])
@pytest.mark.parametrize("kind", ["reduce-scatter", "all-gather"])
def test_exact_under_two_percent_loss(tmp_path, topo, kind):
    cfg, results, events, _ = run_collective(tmp_path, topo, kind, 2.0)
    for nid, r in results.items():
        assert r["ok"], (nid, r.get("error"), r.get("traceback"))
        assert len(r["iterations"]) == cfg.iterations
        assert all(it["correct"] and it["wrong_elements"] == 0 for it in r["iterations"]), nid
    resent = sum(r.get("stats", {}).get("requester", {}).get("retransmitted", 0) for r in results.values())
    assert resent > 0  # the losses were recovered from, not absent
    answered = sum(e.get("retransmitted-result", 0) + e.get("duplicate", 0) for e in events.values())
    assert answered > 0, events
    if topo == "leafspine":
        leaves = [sw for sw, e in events.items() if e.get("partial-up", 0) > 0]
        assert len(leaves) == 2 and len(events) == 3, events  # both leaves sent partials up to the spine
