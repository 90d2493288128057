"""Stragglers on BMv2 (docs/faults.md, "Stragglers: k of N"): four workers train the digits model through one switch
with worker 3 slowed by the slow-worker fault (its computation 3000x as long); NetReduce aggregating 3 of 4 takes
about the fast workers' iteration time, N of 4 the slow one's, N of 4 with a deadline the fast workers' plus a
retransmission timeout (the waiting workers' retransmissions close the sums); every sum is exact against the workers
it names.
And a slow link: Testbed.set_link_rate changes both ends of a host's link while the network runs."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from bench.stragglers import DEADLINE_MS, DEADLINE_RTO_MS, spec_for
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from tests.results import run_on

pytestmark = pytest.mark.mininet
ITERATIONS = 12
FACTOR = 3000.0  # the slow worker's minibatch (0.1-0.3 ms warm) takes 0.3-1 s: under the QPs' give-up time


def switch_events(report: dict[str, Any]) -> dict[str, int]:
    """s1's events of the run's one NetReduce job (the loop's job 1; the graph engine's all-reduces: job 2)."""
    (job,) = report["switches"]["netreduce"].values()
    return dict(job["switches"]["s1"]["events"])


def median_iteration_s(report: dict[str, Any]) -> float:
    """The median iteration time, the first two (warming up) left out."""
    return float(statistics.median(it["end"] - it["start"] for it in report["iterations"][2:]))


def test_k_of_n_iterates_at_the_fast_workers_pace_with_every_sum_exact_against_its_contributors(tmp_path):
    # the deadline with the smallest retransmission timeout just above it: with the job's default (0.13 s at 20 Mb/s)
    # the deadline's pace is the fast workers' plus about 0.1 s, and the slow worker's lead over them (its minibatch is
    # timed warm on the machine at hand) is not always twice that: CI saw 0.103 s against a lead of 0.178 s
    deadline = f"netreduce N of N, {DEADLINE_MS:g} ms deadline, RTO {DEADLINE_RTO_MS:g} ms"
    configs = ["netreduce N of N, no slow worker", "netreduce 3 of N", "netreduce N of N", deadline]
    specs = {c: spec_for(c, 1, ITERATIONS, FACTOR) for c in configs}
    reports = {}
    with Testbed(topology_for(specs[configs[0]]), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for c, spec in specs.items():
            reports[c] = run_on(net, spec, tmp_path / spec.label, progress=False)
    for c, r in reports.items():
        assert r["ok"], f"{c}: {r['errors']}"  # every worker checked every sum (k of N: against its contributors)
        assert len(r["iterations"]) == ITERATIONS
    fast, k_of_n, n_of_n, closed = (median_iteration_s(reports[c]) for c in configs)
    # the k-th arrival sets k of N's pace: near the fast workers' own, far from the slow one's
    assert k_of_n - fast < 0.3 * (n_of_n - fast), (fast, k_of_n, n_of_n)
    its = reports["netreduce 3 of N"]["iterations"]
    held = [it["contributors"] for it in its]
    assert min(held) >= 3 and held.count(3) >= ITERATIONS // 2  # the slow worker left out of most sums
    assert all(it["gradient_error"] > 0.01 for it in its if it["contributors"] == 3)
    # N of N: the mean of all 4, off by the fixed point's rounding alone
    assert all(it["contributors"] == 4 and it["gradient_error"] < 1e-4
               for it in reports["netreduce N of N"]["iterations"])
    events = switch_events(reports["netreduce 3 of N"])
    assert events["completion"] > 0 and events["late"] + events["late-answered"] > 0
    n_events = switch_events(reports["netreduce N of N"])
    assert n_events["late"] == n_events["late-answered"] == 0
    # N of N with a deadline: the sums close without the slow worker on the others' retransmissions after it, so
    # its pace is the fast workers' plus about a retransmission timeout (40 ms), far from the slow worker's
    assert closed - fast < 0.5 * (n_of_n - fast), (fast, closed, n_of_n)
    # the slow worker left out of most sums; under load a fast worker's packet may miss the 20 ms deadline too (a
    # sum of 2, exact against the 2 it names: the report's ok), as CI saw
    its = reports[deadline]["iterations"]
    held = [it["contributors"] for it in its]
    assert min(held) >= 1 and sum(c < 4 for c in held) >= ITERATIONS // 2, held
    assert all(it["gradient_error"] > 0.01 for it in its if it["contributors"] < 4)
    d_events = switch_events(reports[deadline])
    assert d_events["deadline"] > 0 and d_events["late"] + d_events["late-answered"] > 0


def test_set_link_rate_changes_both_ends_of_a_hosts_link_while_the_network_runs(tmp_path):
    spec = spec_for("ring", 1, 1)
    with Testbed(topology_for(spec), NetworkOptions(run_dir=tmp_path / "net")) as net:
        lk = next(iter(net.topo.links_of("h2")))
        ends = [(net.net.get(n), net.net.get(n).intfs[p].name) for n, p in ((lk.a, lk.a_port), (lk.b, lk.b_port))]
        for node, intf in ends:
            assert "ceil 20Mbit" in node.cmd(f"tc class show dev {intf} classid 1:1")
        net.set_link_rate("h2", 2.5)
        for node, intf in ends:
            shown = node.cmd(f"tc class show dev {intf}")
            assert "ceil 2500Kbit" in shown and "ceil 20Mbit" not in shown, shown
        assert net.ping("h1", "h2", count=1)  # still forwarding
        with pytest.raises(ValueError, match="a rate above 0"):
            net.set_link_rate("h2", 0)
        with pytest.raises(ValueError, match="not a host with one link"):
            net.set_link_rate("s1", 5)
