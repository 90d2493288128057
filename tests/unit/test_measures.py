"""What a run measures besides its iterations: what the links carried (the HTB shapers' counters),
the bulk flows' goodput (their receiver's sockets), whether the machine was the limit, and which
check the workers ran.

tests/unit/captured/ holds real output of this machine's tools (iproute2 6.1, Debian 12): a veth
in a network namespace shaped as a switch's egress is (gradswitch/net/shaping.py, 5 Mb/s), iperf3
sending UDP at 20 Mb/s through it, `tc -s -j qdisc show` read 2.115 s apart
(tc-qdisc-before.json, tc-qdisc-after.json; tc-qdisc-dev.json is `... show dev gsa` after 3.1 s
of it); then two iperf3 TCP streams through the same link and `ss -tinH state established
'( sport = :5399 )'` on the receiver 1 s apart (ss-iperf3-server-*.txt). The Mininet tests
(tests/mininet/test_links.py) read the same counters on a running network.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from gradswitch.experiment.background import parse_bytes_received, received_since
from gradswitch.experiment.bottleneck import judge
from gradswitch.experiment.links import Direction, usage
from gradswitch.experiment.report import _iteration, busiest_link_load, busiest_offered_load
from gradswitch.net.shaping import ShaperStats, parse_shaper_stats
from gradswitch.workload.worker_result import IterationEntry, WorkerResult, worker_result

CAPTURED = Path(__file__).parent / "captured"
SECONDS_BETWEEN = 2.11539784699994  # between the two tc readings (time.monotonic)


def captured(name: str) -> str:
    return (CAPTURED / name).read_text()


def test_the_root_htb_qdisc_counts_what_the_link_carried():
    stats = parse_shaper_stats(captured("tc-qdisc-dev.json"), dev="gsa")
    # 3.1 s of 20 Mb/s offered to a 5 Mb/s shaper: it sent 1.95 MB (5.0 Mb/s) and dropped the rest
    assert stats == {"gsa": ShaperStats(sent_bytes=1950200, sent_packets=1374, dropped_packets=4005)}
    everything = parse_shaper_stats(captured("tc-qdisc-after.json"))
    assert set(everything) == {"gsa"}  # lo and the unshaped veth (noqueue) have no HTB root
    with pytest.raises(ValueError, match="give dev"):
        parse_shaper_stats(captured("tc-qdisc-dev.json"))
    assert parse_shaper_stats("") == {}


def test_a_saturated_shaped_link_is_loaded_at_most_about_one():
    before, after = (parse_shaper_stats(captured(f"tc-qdisc-{w}.json"))["gsa"] for w in ("before", "after"))
    link = Direction("ns1", "ns2", 0, 5.0, "fabric")
    links = usage([link], {link.name: (100.0, before)}, {link.name: (100.0 + SECONDS_BETWEEN, after)})
    u = links["ns1->ns2"]
    assert u["sent_bytes"] == 3275588 - 1950270 and u["dropped_packets"] > 1000  # 4x the rate was offered
    assert 0.95 < u["load"] <= 1.01  # HTB's burst of about a millisecond on top of the rate, at most
    assert busiest_link_load(links) == u["load"]


def test_the_switch_port_counters_are_the_offered_load():
    """A port's tx bytes are what BMv2 handed to the shaper: above 1 when it dropped the excess."""
    switches = {"s1": {"seconds": 2.0, "ports": {"1": [0, 0, 2_500_000], "2": [0, 0, 100]}}}
    assert busiest_offered_load(switches, 5.0) == pytest.approx(2.0)


def test_bulk_goodput_is_what_the_receiving_sockets_took_in_between_two_readings():
    first, second = (parse_bytes_received(captured(f"ss-iperf3-server-{k}.txt")) for k in (1, 2))
    assert len(first) == len(second) == 3  # iperf3's control connection and its two streams
    assert sorted(first.values()) == [175, 4121, 972029]
    received = received_since(first, second)
    assert received == (526873 - 4121) + (1070045 - 972029)
    assert received * 8 / 1.0 / 1e6 == pytest.approx(4.97, abs=0.01)  # the 5 Mb/s link, 1 s apart
    # a socket opened after the first reading counts from zero; one gone is not counted
    assert received_since({}, {"a b": 10}) == 10 and received_since({"a b": 10}, {}) == 0


def test_machine_bound_when_the_cpu_or_the_links_say_so():
    assert judge(0.5, 0.95).machine_bound is False
    assert judge(0.05, 0.95).reason == "CPU 5% idle during the jobs (under 10%)"
    assert judge(0.5, 0.7).reason == "busiest link 70% loaded, under 0.8 of the 100% a link-bound run keeps"
    assert judge(0.5, 0.7, ideal_link_load=0.8).machine_bound is False  # a training run's links idle meanwhile
    assert judge(0.5, 0.6, ideal_link_load=0.8).machine_bound is True
    both = judge(0.02, 0.3)
    assert both.machine_bound and both.reason is not None and "CPU 2%" in both.reason and "30%" in both.reason
    assert judge(None, None).fields() == {"machine_bound": None, "machine_bound_reason": None}
    assert judge(None, 0.99).machine_bound is False and judge(0.3, None).machine_bound is False


def record(check: str | None = None, correct: bool = True, wrong: int = 0, err: float = 0.0,
           **extra: float) -> IterationEntry:
    """A worker's iteration as its result file holds it; without `check` as files written before it existed."""
    r: dict[str, object] = {"index": 0, "start": 1.0, "end": 2.0, "time_s": 1.0, "correct": correct,
                            "wrong_elements": wrong, "max_abs_error": err, "extra": extra}
    if check is not None:
        r["check"] = check
    return cast(IterationEntry, r)


def test_correctness_and_errors_appear_only_where_a_check_ran():
    exact = _iteration(0, [record(), record("exact", correct=False, wrong=3, err=0.5, relative_error=0.1)])
    assert exact["check"] == "exact" and exact["correct"] is False  # records without `check`: exact
    assert (exact["wrong_elements"], exact["max_abs_error"], exact["relative_error"]) == (3, 0.5, 0.1)
    digest = _iteration(0, [record("exact"), record("digest")])
    assert digest["check"] == "digest" and digest["correct"] is True  # the weakest check of the workers
    none = _iteration(0, [record("none", relative_error=0.2), record("exact")])
    assert none["check"] == "none"
    assert not {"correct", "wrong_elements", "max_abs_error", "relative_error"} & set(none)
    with pytest.raises(ValueError, match="check = 'maybe': one of none, digest, exact"):
        _iteration(0, [record("maybe")])


def test_results_json_says_which_check_ran_and_claims_nothing_unchecked():
    from gradswitch.experiment.placement import job_config, place, topology_for
    from gradswitch.experiment.report import summarize
    from gradswitch.experiment.spec import ExperimentSpec

    spec = ExperimentSpec.of(workers=2, iterations=2, bw_mbps=5.0)
    topo = topology_for(spec)
    cfg = job_config(spec, 1, place(spec, topo).jobs[0], topo)

    def results(check: str) -> dict[int, dict[int, WorkerResult]]:
        return {1: {n.node_id: worker_result(n.node_id, n.host, "worker", True,
                                             [{**record(check, relative_error=0.01), "index": i} for i in range(2)])
                    for n in cfg.workers}}

    checked = summarize(spec, [cfg], results("exact"), {}, 0.0)
    assert checked["check"] == "exact" and checked["summary"]["correct"] is True and checked["ok"]
    assert checked["headline_extra"]["check"] == "exact" and checked["headline_extra"]["max_relative_error"] == 0.01
    unchecked = summarize(spec, [cfg], results("none"), {}, 0.0)
    assert unchecked["check"] == "none" and unchecked["ok"]  # complete: ok, correct or not unknown
    assert "correct" not in unchecked["summary"] and "max_relative_error" not in unchecked["headline_extra"]
    assert all("correct" not in it and "max_abs_error" not in it for it in unchecked["iterations"])
    assert unchecked["jobs"]["1"]["check"] == "none" and "correct" not in unchecked["jobs"]["1"]


def test_results_json_says_why_packets_were_sent_again():
    """retransmissions: the requesters' resent packets; timeouts: their timers that fired; duplicates: resent
    packets the receivers already had (not needed). Summed over the nodes' queue-pair counters."""
    from gradswitch.experiment.placement import job_config, place, topology_for
    from gradswitch.experiment.report import format_table, summarize
    from gradswitch.experiment.spec import ExperimentSpec

    spec = ExperimentSpec.of(workers=2, iterations=1, bw_mbps=5.0)
    topo = topology_for(spec)
    cfg = job_config(spec, 1, place(spec, topo).jobs[0], topo)
    counted = {0: ({"retransmitted": 7, "timeouts": 2, "sent": 90}, {"duplicates": 3, "accepted": 80}),
               1: ({"retransmitted": 5, "sent": 80}, {"duplicates": 1, "accepted": 90})}
    results = {1: {n.node_id: worker_result(n.node_id, n.host, "worker", True, [{**record("exact"), "index": 0}],
                                            {"requester": counted[i][0], "responder": counted[i][1]})
                   for i, n in enumerate(cfg.workers)}}
    report = summarize(spec, [cfg], results, {}, 0.0)
    assert (report["retransmissions"], report["timeouts"], report["duplicates"]) == (12, 2, 4)
    assert "12 retransmitted after 2 timeouts; 4 already received" in format_table(report)
