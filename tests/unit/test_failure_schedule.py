"""Failures drawn from rates (gradswitch/workload/failure_schedule.py) and the goodput of a run that meets them with
checkpoint restart or recovery in place (gradswitch/workload/goodput.py)."""

from __future__ import annotations

import math
import statistics

import pytest

from gradswitch.topology.faults import Fault, FaultKind, fault_problems
from gradswitch.topology.generators import fattree, rack
from gradswitch.topology.model import TopologyError
from gradswitch.workload.failure_schedule import (
    HOUR_S,
    LLAMA3_GPU_HOURS,
    ElementKind,
    FailureRates,
    FailureSchedule,
    ScheduleError,
    draw_schedule,
    element_class,
    without,
    workers_cut_off,
)
from gradswitch.workload.goodput import (
    CheckpointRestart,
    FabricCosts,
    GoodputError,
    InPlace,
    goodput,
    young_daly_interval_s,
)


def hosts_of(topo, n):
    return [h.name for h in topo.hosts[:n]]


def test_counts_follow_the_rates_within_statistical_bounds():
    topo = fattree(16)  # k = 4: 20 switches, 48 links
    rates = FailureRates(per_gpu_hour=0.01, per_switch_hour=0.002, per_link_hour=0.001, source="test")
    schedule = draw_schedule(rates, topo, 16, hours=10_000, seed=7)
    expected = {ElementKind.GPU: 16 * 0.01 * 10_000, ElementKind.SWITCH: 20 * 0.002 * 10_000,
                ElementKind.LINK: 48 * 0.001 * 10_000}
    counts = schedule.counts()
    for kind, mean in expected.items():  # Poisson: within 4 standard deviations
        assert abs(counts[kind] - mean) < 4 * math.sqrt(mean), (kind, counts[kind], mean)
    times = [f.at_s for f in schedule.faults]
    assert times == sorted(times) and times[0] >= 0 and times[-1] < 10_000 * HOUR_S
    # every worker is hit, about equally (1600 failures over 16 workers: 100 each, none under 50)
    per_worker = [sum(1 for f in schedule.faults if f.kind == FaultKind.WORKER_CRASH and f.target == str(r))
                  for r in range(16)]
    assert min(per_worker) > 50
    # they are faults every backend reads, valid on the topology; a switch or link comes back after repair
    assert fault_problems(schedule.faults[:200], topo, 16) == []
    assert all(f.restart_s == 4 * HOUR_S for f in schedule.faults if f.kind == FaultKind.SWITCH_CRASH)
    # seeded
    assert draw_schedule(rates, topo, 16, 10_000, seed=7) == schedule
    assert draw_schedule(rates, topo, 16, 10_000, seed=8).faults != schedule.faults


def test_llama3_rates_are_the_papers_counts_over_its_gpu_hours():
    topo = fattree(1024)
    rates = FailureRates.llama3(topo, 1024)
    assert LLAMA3_GPU_HOURS == 16_384 * 54 * 24
    assert rates.per_gpu_hour == pytest.approx(384 / LLAMA3_GPU_HOURS)
    assert 1 / rates.per_gpu_hour == pytest.approx(55_296, rel=1e-3)  # hours per GPU failure
    # the network's 35 failures per Llama-3 GPU-hour, for 1,024 GPUs, spread over this fabric's elements
    network = len(topo.switches) * rates.per_switch_hour + len(topo.links) * rates.per_link_hour
    assert network == pytest.approx(35 / LLAMA3_GPU_HOURS * 1024)
    assert rates.job_per_hour(topo, 1024) == pytest.approx(419 / LLAMA3_GPU_HOURS * 1024)
    assert "Llama 3" in rates.source and "3.3.4" in rates.source


def test_bad_rates_and_runs_are_refused_in_one_line():
    topo = rack(4)
    with pytest.raises(ScheduleError, match=r"failure rate per_link_hour = -1.0: failures per element-hour, 0 or more"):
        draw_schedule(FailureRates(0.1, 0.0, -1.0, "x"), topo, 4, 10, seed=1)
    with pytest.raises(ScheduleError, match=r"hours = 0: a run of more than 0 hours"):
        draw_schedule(FailureRates(0.1, 0.0, 0.0, "x"), topo, 4, 0, seed=1)
    with pytest.raises(ScheduleError, match=r"workers = 5: rack has 4 hosts; give 1..4"):
        draw_schedule(FailureRates(0.1, 0.0, 0.0, "x"), topo, 5, 10, seed=1)


def test_the_fabric_without_an_element_and_who_it_cuts_off():
    topo = fattree(16)
    hosts = hosts_of(topo, 16)
    no_core = without(topo, ElementKind.SWITCH, "core0_0")
    assert not no_core.is_switch("core0_0") and not any("core0_0" in (lk.a, lk.b) for lk in no_core.links)
    assert len(no_core.links) == len(topo.links) - 4  # one link to each pod's agg<p>_0
    no_link = without(topo, ElementKind.LINK, "core0_0-agg1_0")  # either order
    assert len(no_link.links) == len(topo.links) - 1
    with pytest.raises(TopologyError, match="no link 'agg0_0-agg0_1'"):
        without(topo, ElementKind.LINK, "agg0_0-agg0_1")
    assert element_class(topo, Fault(FaultKind.LINK_DOWN, "agg0_0-core0_0", 1)) == "link:agg-core"
    assert element_class(topo, Fault(FaultKind.SWITCH_CRASH, "core0_0", 1)) == "switch:core"
    assert element_class(topo, Fault(FaultKind.LINK_DOWN, "h1-edge0_0", 1)) == "link:host-edge"
    edge = topo.attachment("h1")[0]
    assert workers_cut_off(topo, hosts, Fault(FaultKind.SWITCH_CRASH, edge, 1)) == [
        r for r, h in enumerate(hosts) if topo.attachment(h)[0] == edge]
    assert workers_cut_off(topo, hosts, Fault(FaultKind.LINK_DOWN, f"h1-{edge}", 1)) == [0]
    assert workers_cut_off(topo, hosts, Fault(FaultKind.SWITCH_CRASH, "core0_0", 1)) == []


def _tiny():
    """A worker lost at 250 s and an aggregation-core link down from 500 to 600 s, in a run of 1000 s; an
    iteration of 7 s, 8.75 s (1.25 x) without that link."""
    topo = fattree(16)
    faults = (Fault(FaultKind.WORKER_CRASH, "3", 250.0),
              Fault(FaultKind.LINK_DOWN, "agg0_0-core0_0", 500.0, down_s=100))
    schedule = FailureSchedule(1000 / HOUR_S, 0, 16, FailureRates(0, 0, 0, "by hand"), faults)
    return topo, schedule, FabricCosts(7.0, {"link:agg-core": 8.75})


def test_goodput_of_a_tiny_schedule_computed_by_hand():
    topo, schedule, costs = _tiny()
    hosts = hosts_of(topo, 16)
    # Checkpoints every 100 s of running, 10 s each, restarts of 50 s. Run 0-100, write, 110-210, write, 220-250:
    # fails (30 s lost), down 250-300; 300-400, write, 410-500: fails (90 s lost), down 500-550; 550-600 degraded
    # (50 s gives 40), 600-650, write (saved 390), then 100 s runs and writes to 990, 990-1000: progress 700.
    ck = goodput(schedule, topo, hosts, costs, CheckpointRestart(interval_s=100, write_s=10, restart_s=50))
    assert ck.progress_s == pytest.approx(700)
    assert (ck.lost_s, ck.down_s, ck.checkpoint_s, ck.degraded_s) == pytest.approx((120, 100, 70, 10))
    assert ck.goodput == pytest.approx(0.70) and ck.restarts == 2 and ck.failures == 2
    # In place: at 250 s the iteration in flight (250 mod 7 = 5 s) is redone after a 20 s rejoin; at 500 s a 5 s
    # reroute, then 505-600 degraded (95 s give 76), 600-1000 intact: 245 + 230 + 76 + 400.
    ip = goodput(schedule, topo, hosts, costs, InPlace(rejoin_s=20, reroute_s=5))
    assert ip.progress_s == pytest.approx(951)
    assert (ip.lost_s, ip.down_s, ip.checkpoint_s, ip.degraded_s) == pytest.approx((5, 25, 0, 19))
    for g in (ck, ip):
        assert g.accounted_s == pytest.approx(g.wall_s)


def test_costs_that_cannot_be_used_are_refused_in_one_line():
    topo, schedule, costs = _tiny()
    hosts = hosts_of(topo, 16)
    with pytest.raises(GoodputError, match=r"checkpoint-restart: interval_s = 0: seconds, above 0"):
        goodput(schedule, topo, hosts, costs, CheckpointRestart(0, 10, 50))
    with pytest.raises(GoodputError, match=r"no degraded iteration time for a lost link:agg-core: measured for none"):
        goodput(schedule, topo, hosts, FabricCosts(7.0), InPlace(20, 5))


def test_the_sweep_finds_young_dalys_optimum_within_a_step():
    """Failures of a 16-worker job every 20 h on average, checkpoints of 0.2 h: Young's interval
    sqrt(2 x 0.2 x 20) = 2.83 h. The goodput of a long run against the interval, in steps of 1.25x, peaks
    within one step of it."""
    topo = rack(16)
    rates = FailureRates(per_gpu_hour=1 / (20 * 16), per_switch_hour=0.0, per_link_hour=0.0, source="test")
    mtbf_s = HOUR_S / rates.job_per_hour(topo, 16)
    write_s = 0.2 * HOUR_S
    best = young_daly_interval_s(write_s, mtbf_s)
    assert best == pytest.approx(math.sqrt(2 * 0.2 * 20) * HOUR_S)
    steps = [best * 1.25**i for i in range(-6, 7)]
    schedules = [draw_schedule(rates, topo, 16, hours=20_000, seed=s) for s in range(3)]
    hosts = hosts_of(topo, 16)
    curve = [statistics.mean(goodput(s, topo, hosts, FabricCosts(1.0), CheckpointRestart(tau, write_s, 60)).goodput
                             for s in schedules) for tau in steps]
    assert abs(curve.index(max(curve)) - 6) <= 1, [round(g, 4) for g in curve]
    # and the model's goodput there is what first order predicts: 1 - write/tau - tau/(2 MTBF) - restart/MTBF
    predicted = 1 - write_s / best - best / (2 * mtbf_s) - 60 / mtbf_s
    assert curve[6] == pytest.approx(predicted, abs=0.01)
