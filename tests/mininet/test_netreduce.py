"""NetReduce end to end: workers in Mininet hosts, sums made by the BMv2 switches.

Flat on a rack and hierarchical on a leaf-spine fabric, two jobs at once, 2% loss on every
worker link for 50 iterations in both recovery modes, bit errors on one link (contributions
and results corrupted on the wire), a crashed worker ending the job in bounded time (and the
next job on the same network running correct), and thousands of mutated RoCE packets thrown at
the switch while a job runs.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.protocol.netreduce import MESSAGE_BYTES, PACKETS
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.protocol.polling import wait_until
from gradswitch.topology.generators import rack
from tests.results import run_experiment, run_on

pytestmark = pytest.mark.mininet

BASE: dict[str, Any] = {"algo": "netreduce", "workers": 4, "size_bytes": 32 << 10, "iterations": 3, "bw_mbps": 4.0}


def nr_switches(report: dict) -> dict[str, Any]:
    """The switches' parts of the run's one NetReduce job (the loop's job 1; the graph engine's all-reduces: a job of
    their own, numbered after the spec's jobs)."""
    (job,) = report["switches"]["netreduce"].values()
    return dict(job["switches"])


def exact(report: dict) -> bool:
    return bool(report["ok"]) and all(it["correct"] and it["wrong_elements"] == 0 for it in report["iterations"])


@pytest.mark.parametrize("topo", ["rack", "leafspine"])
def test_exact_sums_flat_and_hierarchical(tmp_path, topo):
    report = run_experiment(spec_from_dict({**BASE, "topo": topo}), tmp_path, progress=False)
    assert exact(report), report["errors"]
    roles = {sw: s["part"]["role"] for sw, s in nr_switches(report).items()}
    if topo == "rack":
        assert roles == {"s1": "flat"}
    else:
        assert sorted(roles.values()) == ["leaf", "leaf", "spine"]
        spine = next(s for s, r in roles.items() if r == "spine")
        events = nr_switches(report)[spine]["events"]
        assert events["completion"] > 0 and events["contribution"] == 2 * events["completion"]  # two leaves


FRESH_NETWORKS = 3  # without address resolution, 1 fresh network in 4 went back N: 58 % odds that 3 show it


def test_eight_credits_on_fresh_leaf_spine_fabrics_resend_nothing(tmp_path):
    """The go-back-N burst: with 8 credits, 8 workers on a 2x2 leaf-spine fabric resent 400-1,200 packets in the
    first iteration of about one fresh network in four (measured: 5 of 20, 2 of 12), never once the hosts
    had carried a run. The cause: a fresh host knows no neighbour, and the kernel sent the first window,
    held while it resolved the peer, out of order with what the worker sent meanwhile; a message's middle
    packet reached the leaf before its first (dropped: no context), every receiver saw a hole, and every
    sender went back a window. Workers now resolve their peers before they say ready (gradswitch/roce/resolve.py:
    25 of 25 fresh networks then resent nothing). Each network here is fresh; nothing may be resent, and
    no packet may reach a switch out of its message's order."""
    spec = spec_from_dict({**BASE, "workers": 8, "topo": "leafspine", "credits": 8, "size_bytes": 256 << 10,
                           "iterations": 2, "bw_mbps": 5.0})
    for n in range(FRESH_NETWORKS):
        report = run_experiment(spec, tmp_path / f"fresh{n}", progress=False)
        assert exact(report), report["errors"]
        events = {sw: part["events"] for sw, part in nr_switches(report).items()}
        assert report["retransmissions"] == 0, (n, events)
        for sw, e in events.items():
            assert e["no-context"] == e["retransmitted-result"] == e["duplicate"] == 0, (n, sw, e)


def test_a_job_number_used_again_starts_with_no_events(tmp_path):
    """Runs on one network reuse job 1: the second run's events are its own (a lossy run's
    duplicates and retransmitted results used to show up in the next run's report and in
    `job status`)."""
    lossy = spec_from_dict({**BASE, "loss_pct": 5.0})
    clean = spec_from_dict(BASE)
    with Testbed(topology_for(clean), NetworkOptions(run_dir=tmp_path / "net")) as net:
        first = run_on(net, lossy, tmp_path / "lossy", progress=False)
        second = run_on(net, clean, tmp_path / "clean", progress=False)
    assert exact(first) and exact(second), (first["errors"], second["errors"])
    before = nr_switches(first)["s1"]["events"]
    after = nr_switches(second)["s1"]["events"]
    assert before["duplicate"] + before["retransmitted-result"] > 0
    messages = -(-BASE["size_bytes"] // MESSAGE_BYTES)  # per iteration
    assert after["contribution"] == BASE["iterations"] * messages * PACKETS * BASE["workers"], after
    assert after["duplicate"] == after["retransmitted-result"] == 0, after


def test_a_smaller_job_after_a_larger_one_on_one_network(tmp_path):
    """Job 1 of 4 workers, then job 1 of 2 on the same network: the second stalled (every result resent, then
    retry counters exceeded) while teardown left the region's last cell and each member's last context slot
    as the first job left them (BMv2's Thrift end index is exclusive); bench.crossval ran into it."""
    big = spec_from_dict({**BASE, "workers": 4})
    small = spec_from_dict({**BASE, "workers": 2})
    with Testbed(topology_for(big), NetworkOptions(run_dir=tmp_path / "net")) as net:
        first = run_on(net, big, tmp_path / "big", progress=False)
        second = run_on(net, small, tmp_path / "small", progress=False)
    assert exact(first) and exact(second), (first["errors"], second["errors"])
    assert second["retransmissions"] == 0


def test_float32_fixed_scale_and_shared_exponent(tmp_path):
    """The same float32 gradients summed by the switch in both float modes, on both engines: exact on the wire, the
    per-packet exponent far closer to the float64 sum. The graph engine (the default) carries the loop's float32
    gradients (payload `gradients`, gradswitch/hosts/graph_gradients.py): each iteration's error the loop's, to the
    bit (the same gradients from the job's seed, the same integer sums)."""
    errors: dict[tuple[str, str], list[float]] = {}
    with Testbed(rack(hosts=4, bw_mbps=4.0), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for engine in ("graph", "loop"):
            for mode in ("fixed", "exponent"):
                spec = spec_from_dict({**BASE, "dtype": "float32", "float_mode": mode, "engine": engine})
                report = run_on(net, spec, tmp_path / f"{engine}-{mode}")
                assert exact(report), (engine, report["errors"])
                assert report["spec"]["engine"] == engine
                its = [it["max_abs_error"] for it in report["iterations"]]
                assert report["headline_extra"]["max_abs_error"] == max(its), engine
                errors[(engine, mode)] = its
    for engine in ("graph", "loop"):
        assert all(0 < e <= 4 * 2.0**-21 for e in errors[(engine, "fixed")])  # N * 2**-(bits+1), bits = 20
        assert max(errors[(engine, "exponent")]) < max(errors[(engine, "fixed")]) / 100
    assert errors[("graph", "fixed")] == errors[("loop", "fixed")], errors
    assert errors[("graph", "exponent")] == errors[("loop", "exponent")], errors


def test_two_jobs_at_once(tmp_path):
    report = run_experiment(spec_from_dict({**BASE, "workers": 3, "jobs": 2}), tmp_path, progress=False)
    assert report["ok"], report["errors"]
    assert set(report["jobs"]) == {"1", "2"} and all(j["correct"] for j in report["jobs"].values())
    regions = sorted(s["switches"]["s1"]["part"]["cells"] for s in report["switches"]["netreduce"].values())
    assert len(regions) == 2 and regions[0][1] < regions[1][0]  # disjoint regions of aggregator memory


@pytest.mark.parametrize("transport", ["gbn", "sr"])
def test_fifty_iterations_with_two_percent_loss(tmp_path, transport):
    spec = spec_from_dict({**BASE, "size_bytes": 8 << 10, "iterations": 50, "loss_pct": 2.0,
                             "transport": transport})
    started = time.monotonic()
    report = run_experiment(spec, tmp_path, progress=False)
    assert exact(report), report["errors"]
    assert report["summary"]["iterations_done"] == 50
    drops = sum(s["drops"].get("fault-injected", 0) for n, s in report["switches"].items() if n != "netreduce")
    assert drops > 0 and report["retransmissions"] > 0
    events = nr_switches(report)["s1"]["events"]
    assert events["retransmitted-result"] + events["duplicate"] > 0  # the switch's side of the recovery
    assert time.monotonic() - started < 600


@pytest.mark.parametrize("topo", ["rack", "leafspine"])
def test_bit_errors_on_a_link_never_reach_a_result(tmp_path, topo):
    """5% of the RoCE packets crossing one worker's link get a bit flipped (fault injection's
    corrupt rule, both directions): its corrupted contributions are dropped and counted by the
    switch's ICRC check, its corrupted results by its own receiver, and the retransmissions keep
    every iteration exact."""
    # 32 packets of 4 KiB per iteration each way: no corrupted packet in 192 at 5 % has odds 5e-5.
    spec = spec_from_dict({**BASE, "topo": topo, "iterations": 6, "size_bytes": 128 << 10})
    with Testbed(topology_for(spec), NetworkOptions(run_dir=tmp_path / "net")) as net:
        switch, port = net.topo.attachment("h1")
        net.fabric.set_port_loss(switch, port, 0.05, "both", CONFIG.IP_PROTO_UDP, CONFIG.ROCE_V2_UDP_PORT,
                                 corrupt=True)
        report = run_on(net, spec, tmp_path / "run")
    assert exact(report), report["errors"]
    assert report["switches"][switch]["drops"].get("bad-icrc", 0) > 0  # corrupted on the way in: the switch
    assert report["host_drops"].get("bad-icrc", 0) > 0  # corrupted on the way out: the receiver
    events = nr_switches(report)[switch]["events"]
    assert events["bad-icrc"] == report["switches"][switch]["drops"]["bad-icrc"]
    assert report["retransmissions"] > 0


def test_crashed_worker_ends_the_job_and_the_next_job_is_correct(tmp_path):
    with Testbed(rack(hosts=4, bw_mbps=4.0), NetworkOptions(run_dir=tmp_path / "net")) as net:
        started = time.monotonic()
        crashed = run_on(net, spec_from_dict({**BASE, "iterations": 5, "crash": {"node": 1, "after": 0}}),
                         tmp_path / "crash")
        assert time.monotonic() - started < 60
        assert not crashed["ok"]
        errors = crashed["errors"]
        assert any("h2" in who and "exit status 3" in e for who, e in errors.items()), errors
        assert all("h2" in e for who, e in errors.items() if "h2" not in who), errors
        again = run_on(net, spec_from_dict(BASE), tmp_path / "again")  # same job id, same switch
        assert exact(again), again["errors"]


def test_mutated_packets_do_not_disturb_a_running_job(tmp_path):
    """The fuzzer forges packets for the job of RUN/job1.json (job 1): the loop's NetReduce job (engine = loop; the
    graph engine's all-reduces are a switch job of their own, numbered after it)."""
    with Testbed(rack(hosts=5, bw_mbps=4.0), NetworkOptions(run_dir=tmp_path / "net")) as net:
        sent: dict[str, int] = {}
        config = tmp_path / "run" / "job1.json"  # written by run_on before the workers start

        def fuzzer() -> None:  # h5 is not a member of the job
            wait_until(config.exists, 60, what="the job config")
            proc = net.host("h5").popen([sys.executable, "-m", "tests.mininet.fuzz", str(config), "4000", "7"],
                                        cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
                                        env={"PYTHONPATH": str(REPO_ROOT)})
            out, _ = proc.communicate(timeout=300)
            sent["packets"] = int(out.strip() or 0)

        thread = threading.Thread(target=fuzzer, daemon=True)
        thread.start()
        report = run_on(net, spec_from_dict({**BASE, "iterations": 8, "engine": "loop"}), tmp_path / "run")
        thread.join(timeout=300)
        assert sent.get("packets", 0) >= 3000
        assert exact(report), report["errors"]
        events = nr_switches(report)["s1"]["events"]
        assert events["not-member"] > 0  # the mutants were seen and refused
        assert net.fabric.port_stats("s1")  # the switch still answers
        assert net.pingall(["h1", "h5"]).full  # and forwards
