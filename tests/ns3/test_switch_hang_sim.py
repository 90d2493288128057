"""A switch that hangs on the simulator (docs/faults.md, "A switch that hangs"): from at_s until
its release (if any) it forwards and answers nothing; the control plane names it hung the heartbeat's bound after
it stopped (SWITCH_HANG_DETECT_S = HUNG_DETECT_BOUND_S, the BMv2 controller's) and routes around it; what the job
does follows from its transport, as for a crash; its record names the switch hung."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradswitch.experiment import results_file
from gradswitch.experiment.fault_schedule import give_up_s
from gradswitch.protocol.heartbeat import HUNG_DETECT_BOUND_S
from gradswitch.sim.faults import SWITCH_HANG_DETECT_S
from gradswitch.topology.faults import parse_fault
from gradswitch.workload.fault_record import FaultOutcome
from tests.ns3.helpers import spec_jobs
from tests.ns3.test_faults_sim import all_exact, ring, simulate
from tests.results import run_experiment

pytestmark = pytest.mark.ns3

AT_S = 2.0


def test_the_simulator_names_a_hung_switch_after_the_heartbeat_s_bound() -> None:
    assert SWITCH_HANG_DETECT_S == HUNG_DETECT_BOUND_S == 5.0


def test_a_spine_hung_for_good_is_routed_around_once_named_hung_and_the_ring_rides_through(tmp_path: Path) -> None:
    """Noticed HUNG_DETECT_BOUND_S after it stopped (not the crash's few ms): the ring's flow through spine1 stalls
    that long, its retransmissions lost, then the first resend after the reroute gets through (within the largest
    timeout and a round trip); every sum exact. The same spine crashed is noticed at once and loses less."""
    spec = ring()
    hang = parse_fault(f"switch-hang:spine1@{AT_S}")
    cfgs, result, [r] = simulate(spec, tmp_path / "hang", (hang,))
    cfg = cfgs[0]
    assert all_exact(result, cfg)
    assert r.outcome == FaultOutcome.RECOVERED and r.injected and r.injected_s == AT_S
    assert r.time_to_detect_s == pytest.approx(HUNG_DETECT_BOUND_S, abs=1e-9)
    assert r.recovered_s is not None and r.detected_s is not None
    assert spec.network.bw_mbps is not None
    round_trip_s = 2 * cfg.window * cfg.mtu * 8 / (spec.network.bw_mbps * 1e6)
    assert r.detected_s < r.recovered_s <= r.detected_s + 1.0 + round_trip_s  # 1.0: QpConfig.rto_max
    assert r.detail.startswith(f"spine1 hung (forwarded and answered nothing) at {AT_S:.3f} s, named hung by the "
                               f"control plane {HUNG_DETECT_BOUND_S:.3f} s after it stopped; rerouted")
    [m] = result.faults
    assert m.out_at_end and m.lost_packets > 0 and m.stalled_qps == m.resumed_qps >= 1

    crash = parse_fault(f"switch-crash:spine1@{AT_S}")
    _, crashed, [c] = simulate(spec, tmp_path / "crash", (crash,))
    assert c.time_to_detect_s is not None and c.time_to_detect_s < 0.1 and "hung" not in c.detail
    assert crashed.faults[0].lost_packets < m.lost_packets  # out longer before the reroute


def test_a_spine_let_go_on_before_it_was_named_hung_is_ridden_through_unnoticed(tmp_path: Path) -> None:
    spec = ring()
    hang = parse_fault(f"switch-hang:spine1@{AT_S},release=1")
    cfgs, result, [r] = simulate(spec, tmp_path / "short", (hang,))
    assert all_exact(result, cfgs[0])
    assert r.outcome == FaultOutcome.RECOVERED and r.detected_s is None
    assert "spine1 hung (forwarded and answered nothing) at 2.000 s, never named hung by the control plane" in r.detail
    assert r.recovered_s is not None and r.recovered_s > AT_S + 1.0


def test_a_hung_leaf_cuts_its_workers_off_and_the_job_stops_with_its_iterations_kept(tmp_path: Path) -> None:
    """No route goes around a worker's own leaf: the queue pairs to its workers give up (give_up_s from their last
    progress, at most one RTO before the hang) and the job stops, interrupted, the iterations completed kept."""
    spec = ring()
    host = spec_jobs(spec)[1][0].workers[-1].host
    leaf = next(lk.b if lk.a == host else lk.a for lk in spec_jobs(spec)[0].links if host in (lk.a, lk.b))
    hang = parse_fault(f"switch-hang:{leaf}@{AT_S}")
    cfgs, result, [r] = simulate(spec, tmp_path / "leaf", (hang,))
    cfg = cfgs[0]
    assert r.outcome == FaultOutcome.INTERRUPTED and r.iterations_lost == 1 and r.job_stopped_s is not None
    assert f"{leaf} hung (forwarded and answered nothing)" in r.detail
    assert "transport retry counter exceeded" in r.detail
    give_up = give_up_s(cfg.rto, cfg.retry_limit)
    assert AT_S + give_up - cfg.rto <= r.job_stopped_s <= AT_S + give_up
    kept = [n["iterations"] for n in result.nodes[cfg.job_id].values()]
    assert min(map(len, kept)) > 0 and all(it["correct"] for its in kept for it in its)


def test_a_spine_hang_through_the_orchestration_names_it_hung_in_results_json(tmp_path: Path) -> None:
    spec = ring(faults=(parse_fault(f"switch-hang:spine1@{AT_S}"),))
    report = run_experiment(spec, tmp_path / "run", progress=False)
    saved = results_file.read(tmp_path / "run" / "results.json")
    assert saved["fault_outcome"] == "recovered" and report["summary"]["correct"]
    assert len(saved["iterations"]) == spec.measurement.iterations
    [f] = saved["faults"]
    assert (f["label"], f["outcome"], f["injected"], f["not_injected"]) == ("switch-hang:spine1@2", "recovered", True,
                                                                            None)
    assert f["time_to_detect_s"] == pytest.approx(HUNG_DETECT_BOUND_S, abs=1e-9)
    assert "spine1 hung (forwarded and answered nothing)" in f["detail"]


@pytest.mark.ns3_mpi
def test_a_spine_hang_over_two_mpi_ranks_measures_what_one_rank_does(tmp_path: Path) -> None:
    """The hung spine's links cross ranks: every rank carries out the hang and the reroute once it is named hung;
    the record merged from the ranks is one rank's."""
    spec = ring()
    hang = (parse_fault(f"switch-hang:spine1@{AT_S},release=6"),)
    cfgs, one, [r1] = simulate(spec, tmp_path / "one", hang)
    _, two, [r2] = simulate(spec, tmp_path / "two", hang, ranks=2)
    assert all_exact(two, cfgs[0])
    assert (r2.outcome, r2.injected_s, r2.detected_s, r2.detail) == (r1.outcome, r1.injected_s, r1.detected_s,
                                                                     r1.detail)
    assert r2.detected_s == pytest.approx(AT_S + HUNG_DETECT_BOUND_S, abs=1e-9)
    assert (two.faults[0].lost_packets, two.faults[0].stalled_qps) == (one.faults[0].lost_packets,
                                                                       one.faults[0].stalled_qps)
