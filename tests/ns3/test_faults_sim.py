"""Faults on the simulator (docs/faults.md "On the simulator"): a spine crashed under a leaf-spine ring is routed
around once the control plane notices it and the ring rides through on RC retransmission, exact, at the time the
detection delay and the queue pair's retransmission timer give; a worker crash stops the job `interrupted` with the
iterations completed before it kept; a link flap; a slow worker stretches a compute-bound iteration by its factor;
the same spine crash over two MPI ranks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment import results_file
from gradswitch.experiment.fault_schedule import give_up_s
from gradswitch.experiment.spec import Backend, ExperimentSpec, Topo, spec_from_dict
from gradswitch.sim.faults import SimFault, fault_records
from gradswitch.sim.results import SimResult
from gradswitch.sim.run import run
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.faults import Fault, parse_fault
from gradswitch.workload.fault_record import FaultOutcome, FaultRecord
from gradswitch.workload.job import Algorithm, Device, Emulation, JobConfig
from gradswitch.workload.plan import plan
from tests.ns3.helpers import spec_jobs
from tests.results import run_experiment

pytestmark = pytest.mark.ns3

CRASH_AT_S = 2.0


def ring(**kw: Any) -> ExperimentSpec:
    fields: dict[str, Any] = {"algo": Algorithm.RING, "workers": 4, "topo": Topo.LEAFSPINE, "size_bytes": 1 << 20,
                              "bw_mbps": 20, "iterations": 12, "backend": Backend.NS3}
    return ExperimentSpec.of(**{**fields, **kw})


def simulate(spec: ExperimentSpec, out: Path, faults: tuple[Fault, ...], ranks: int = 1,
             **settings: Any) -> tuple[list[JobConfig], SimResult, list[FaultRecord]]:
    topo, cfgs = spec_jobs(spec)
    result = run(topo, cfgs, SimSettings(faults=faults, **settings), out, ranks=ranks)
    return cfgs, result, fault_records(faults, list(result.faults), result.nodes, cfgs, result.speed.sim_s)


def all_exact(result: SimResult, cfg: JobConfig) -> bool:
    nodes = result.nodes[cfg.job_id].values()
    return all(n["ok"] and len(n["iterations"]) == cfg.iterations and all(it["correct"] for it in n["iterations"])
               for n in nodes)


def final_rtos(result: SimResult, cfg: JobConfig) -> set[float]:
    return {round(r["rto_ms"] / 1e3, 9) for n in result.nodes[cfg.job_id].values()
            for r in n["stats"]["rtt"].values()}


def test_a_spine_crash_is_routed_around_after_the_detection_delay_and_the_ring_stays_exact(tmp_path: Path) -> None:
    """The ring's flow through spine1 loses what it sends until the routes go around it; the first resend after
    that gets through. Noticed early (10 ms), the flow's next packets take the new route and the receiver's NAK or
    the first timeout brings the resend: recovered within one RTO R of the first loss learnt, plus a round trip.
    Noticed between the flow's first and second timeout (1.5 R after the crash: the first timeout falls within R of
    it, the second no sooner than 2 R after the first), nothing gets through before the reroute and the first
    resend is lost too: the timer doubles, and the stall ends 2 R after the first timeout, plus a round trip."""
    spec = ring()
    crash = parse_fault(f"switch-crash:spine1@{CRASH_AT_S},restart=3")
    cfgs, fast, [early] = simulate(spec, tmp_path / "fast", (crash,), switch_detect_s=0.01)
    cfg = cfgs[0]
    rto = cfg.rto
    assert spec.network.bw_mbps is not None
    round_trip_s = 2 * cfg.window * cfg.mtu * 8 / (spec.network.bw_mbps * 1e6)  # at most a window queued each way
    assert final_rtos(fast, cfg) == {round(rto, 9)}  # every QP's RTO at its floor: the stalled one's too
    assert all_exact(fast, cfg)
    assert early.outcome == FaultOutcome.RECOVERED and early.fault == crash
    assert early.injected_s == CRASH_AT_S and early.time_to_detect_s == pytest.approx(0.01, abs=1e-9)
    [m] = fast.faults
    assert m.lost_packets > 0 and m.stalled_qps == m.resumed_qps >= 1 and m.first_stall_s is not None
    assert early.recovered_s is not None and early.detected_s is not None
    assert CRASH_AT_S < m.first_stall_s <= CRASH_AT_S + rto
    assert early.detected_s < early.recovered_s <= m.first_stall_s + rto + round_trip_s

    _, slow, [late] = simulate(spec, tmp_path / "slow", (crash,), switch_detect_s=1.5 * rto)
    assert all_exact(slow, cfg) and late.outcome == FaultOutcome.RECOVERED
    assert late.time_to_detect_s == pytest.approx(1.5 * rto, abs=1e-9)
    [m] = slow.faults
    assert m.first_stall_s is not None and late.recovered_s is not None and late.detected_s is not None
    assert CRASH_AT_S < m.first_stall_s <= CRASH_AT_S + rto  # the first timeout, before the reroute
    assert m.first_stall_s + 2 * rto < late.recovered_s <= m.first_stall_s + 2 * rto + round_trip_s
    # spine1 is back after 3 s: the last iterations take as long as those before the crash
    times = [it["end"] - it["start"] for it in fast.nodes[cfg.job_id][0]["iterations"]]
    assert times[-1] == pytest.approx(times[1], rel=0.02)


def test_a_spine_crash_through_the_orchestration_names_it_in_results_json(tmp_path: Path) -> None:
    spec = ring(faults=(parse_fault(f"switch-crash:spine1@{CRASH_AT_S}"),))  # never restarted
    report = run_experiment(spec, tmp_path / "run", progress=False)
    saved = results_file.read(tmp_path / "run" / "results.json")
    assert saved["fault_outcome"] == "recovered" and report["summary"]["correct"]
    assert len(saved["iterations"]) == spec.measurement.iterations
    [f] = saved["faults"]
    assert (f["label"], f["outcome"], f["injected_s"]) == ("switch-crash:spine1@2", "recovered", CRASH_AT_S)
    assert f["time_to_detect_s"] == pytest.approx(SimSettings().switch_detect_s, abs=1e-9)
    through = f["throughput_it_s"]
    assert through["before"] > through["during"] > 0 and through["after"] == pytest.approx(through["before"], rel=0.05)
    marked = [it["index"] for it in saved["iterations"] if it.get("faults")]
    hit = [it["index"] for it in saved["iterations"] if it["end"] > CRASH_AT_S]
    assert marked == hit  # spine1 stays out: every iteration from the crash on ran while it was out


def test_a_worker_crash_stops_the_job_interrupted_with_the_completed_iterations_kept(tmp_path: Path) -> None:
    spec = ring()
    at = 3.1
    clean = run_experiment(spec, tmp_path / "clean", progress=False)
    before = [it for it in clean["iterations"] if it["end"] <= at]
    crashed = spec.but(faults=(parse_fault(f"worker-crash:1@{at}"),))
    run_experiment(crashed, tmp_path / "crash", progress=False)
    saved = results_file.read(tmp_path / "crash" / "results.json")
    assert saved["fault_outcome"] == "interrupted" and not saved["ok"]
    assert 0 < len(saved["iterations"]) == len(before) < spec.measurement.iterations
    assert all(it["correct"] for it in saved["iterations"])
    assert [it["end"] for it in saved["iterations"]] == pytest.approx([it["end"] for it in before])
    [f] = saved["faults"]
    host = spec_jobs(spec)[1][0].workers[1].host
    assert (f["outcome"], f["injected_s"], f["time_to_detect_s"], f["iterations_lost"]) == ("interrupted", at, 0.0, 1)
    assert f["detail"] == (f"worker 1 on {host} crashed: job 1 stopped after {len(before)} of "
                           f"{spec.measurement.iterations} iterations, kept")
    assert next(iter(saved["errors"])) == f"fault worker-crash:1@{at:g}"  # the fault first, then what followed


def test_a_worker_crash_in_a_training_job_keeps_the_iterations_completed_before(tmp_path: Path) -> None:
    """A training job (emulated computation, reductions overlapping backward) keeps what it completed too: each
    iteration that ended with every reduction checked, at the times a clean run of the same job gives."""
    spec = spec_from_dict({"backend": "ns3", "algo": "ring", "workers": 4, "topo": "leafspine", "bw_mbps": 10_000,
                           "workload": "resnet50", "scale": 0.05, "iterations": 40,
                           "emulate": {"device": "v100", "batch": 32}})
    clean = run_experiment(spec, tmp_path / "clean", progress=False)
    at = clean["iterations"][len(clean["iterations"]) // 2]["end"] + 1e-4  # just after an iteration ended
    before = [it for it in clean["iterations"] if it["end"] <= at]
    run_experiment(spec.but(faults=(parse_fault(f"worker-crash:2@{at}"),)), tmp_path / "crash", progress=False)
    saved = results_file.read(tmp_path / "crash" / "results.json")
    assert saved["fault_outcome"] == "interrupted"
    kept = saved["iterations"]
    assert len(before) - 1 <= len(kept) <= len(before) and len(kept) > 0  # the last may still have had checks due
    assert all(it["correct"] for it in kept)
    assert [it["end"] for it in kept] == pytest.approx([it["end"] for it in before[:len(kept)]])


def test_a_hosts_link_down_for_good_stops_the_job_within_the_transports_deadline(tmp_path: Path) -> None:
    """No route around a worker's own link: its queue pairs give up after their retries (give_up_s: the RTO doubled
    up to rto_max, retry_limit + 1 times, from their last progress, at most one RTO before the fault) and the job
    stops, interrupted, with what it completed kept."""
    spec = ring()
    host = spec_jobs(spec)[1][0].workers[1].host
    cut = parse_fault(f"link-down:{host}-leaf1@{CRASH_AT_S}")
    cfgs, result, [r] = simulate(spec, tmp_path / "cut", (cut,))
    cfg = cfgs[0]
    assert r.outcome == FaultOutcome.INTERRUPTED and r.iterations_lost == 1 and r.job_stopped_s is not None
    assert "transport retry counter exceeded" in r.detail
    give_up = give_up_s(cfg.rto, cfg.retry_limit)
    assert CRASH_AT_S + give_up - cfg.rto <= r.job_stopped_s <= CRASH_AT_S + give_up
    kept = [len(n["iterations"]) for n in result.nodes[cfg.job_id].values()]
    assert min(kept) > 0 and all(it["correct"] for n in result.nodes[cfg.job_id].values() for it in n["iterations"])


def test_a_link_flap_rides_through_on_retransmission(tmp_path: Path) -> None:
    """Each of spine1's two links flaps twice: out for 0.5 s (noticed and routed around) and back for 0.5 s. The
    ring's flows through spine1 lose what is in flight and resend it: every sum exact."""
    spec = ring()
    flaps = (parse_fault("link-flap:leaf1-spine1@1.5,down=0.5,up=0.5,flaps=2"),
             parse_fault("link-flap:leaf2-spine1@1.5,down=0.5,up=0.5,flaps=2"))
    cfgs, result, records = simulate(spec, tmp_path / "flap", flaps)
    assert all_exact(result, cfgs[0])
    assert {r.outcome for r in records} <= {FaultOutcome.RECOVERED, FaultOutcome.NO_EFFECT}
    hit = [r for r, m in zip(records, result.faults, strict=True) if m.lost_packets > 0]
    assert hit and all(r.outcome == FaultOutcome.RECOVERED for r in hit)
    assert all(r.time_to_detect_s == pytest.approx(SimSettings().link_detect_s, abs=1e-9) for r in records)
    # a flap shorter than the detection delay is never noticed: retransmission alone rides through it
    short = (replace(flaps[0], down_s=0.5 * SimSettings().link_detect_s), replace(flaps[1], down_s=0.5 *
                                                                                 SimSettings().link_detect_s))
    _, quick, quick_records = simulate(spec, tmp_path / "short", short)
    assert all_exact(quick, cfgs[0])
    assert all(r.detected_s is None for r in quick_records)
    assert any(m.lost_packets > 0 and m.resumed_qps == m.stalled_qps > 0 for m in quick.faults)


def training(**kw: Any) -> ExperimentSpec:
    """A compute-bound training job: links so fast that communication is a small part of an iteration."""
    fields: dict[str, Any] = {"algo": Algorithm.RING, "workers": 4, "topo": Topo.RACK, "workload": "resnet50",
                              "scale": 0.002, "bw_mbps": 100_000, "iterations": 4, "backend": Backend.NS3,
                              "emulate": Emulation(link_gbps=100, device=Device.V100, batch=32)}
    return ExperimentSpec.of(**{**fields, **kw})


def test_a_slow_worker_stretches_a_compute_bound_iteration_by_its_factor(tmp_path: Path) -> None:
    """By hand: an iteration is the computation (the plan's forward and backward seconds times the dilation) plus
    the communication it does not overlap. With one worker slowed 3x from the start, everyone waits for its
    gradients: the computation counts 3 times, the rest as before."""
    spec = training()
    topo, cfgs = spec_jobs(spec)
    cfg = cfgs[0]
    assert cfg.training is not None
    p = plan(cfg)
    compute = sum(layer.forward_s + layer.backward_s for layer in p.layers) * cfg.training.dilation
    clean = run(topo, cfgs, SimSettings(), tmp_path / "clean")
    factor = 3.0
    slow_fault = parse_fault(f"slow-worker:2@0,factor={factor:g}")
    slowed = run(topo, cfgs, SimSettings(faults=(slow_fault,)), tmp_path / "slow")

    def iteration_s(result: SimResult) -> float:
        its = [n["iterations"] for n in result.nodes[cfg.job_id].values()]
        return max(w[-1]["end"] - w[-1]["start"] for w in its)  # the last iteration, the slowest worker's

    base = iteration_s(clean)
    assert compute / base > 0.9  # compute-bound: the communication is at most a tenth
    assert iteration_s(slowed) == pytest.approx(base + (factor - 1) * compute, rel=0.01)
    [r] = fault_records((slow_fault,), list(slowed.faults), slowed.nodes, cfgs, slowed.speed.sim_s)
    assert (r.outcome, r.injected_s) == (FaultOutcome.RECOVERED, 0.0)


def test_a_slow_workers_link_cut_to_half_its_rate_halves_a_ring_s_pace(tmp_path: Path) -> None:
    """A ring is paced by its slowest link: with one worker's link cut from 20 to 10 Mb/s (both directions) from the
    start, every step waits for it, and an iteration takes twice as long."""
    spec = ring(iterations=4)
    topo, cfgs = spec_jobs(spec)
    cfg = cfgs[0]
    clean = run(topo, cfgs, SimSettings(), tmp_path / "clean")
    cut = parse_fault("slow-worker:1@0,rate=10")
    slowed = run(topo, cfgs, SimSettings(faults=(cut,)), tmp_path / "cut")

    def iteration_s(result: SimResult) -> float:
        return max(n["iterations"][-1]["end"] - n["iterations"][-1]["start"]
                   for n in result.nodes[cfg.job_id].values())

    assert all_exact(slowed, cfg)
    assert iteration_s(slowed) == pytest.approx(2 * iteration_s(clean), rel=0.03)


@pytest.mark.ns3_mpi
def test_a_spine_crash_over_two_mpi_ranks_measures_what_one_rank_does(tmp_path: Path) -> None:
    """The leaf-spine is cut between its leaves and spines: the crashed spine's links cross ranks. Every rank
    carries out the crash and the reroute; the record merged from the ranks is one rank's."""
    spec = ring()
    crash = (parse_fault(f"switch-crash:spine1@{CRASH_AT_S},restart=3"),)
    cfgs, one, [r1] = simulate(spec, tmp_path / "one", crash)
    _, two, [r2] = simulate(spec, tmp_path / "two", crash, ranks=2)
    assert all_exact(two, cfgs[0])
    assert (r2.outcome, r2.injected_s, r2.detected_s) == (r1.outcome, r1.injected_s, r1.detected_s)
    assert r2.recovered_s == pytest.approx(r1.recovered_s, abs=1e-6)
    m1: SimFault = one.faults[0]
    m2: SimFault = two.faults[0]
    assert (m2.lost_packets, m2.stalled_qps, m2.resumed_qps) == (m1.lost_packets, m1.stalled_qps, m1.resumed_qps)
