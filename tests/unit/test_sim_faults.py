"""Faults on the simulator, the Python side (gradswitch/sim/faults.py): a spec's faults resolved into the simulator's
configuration, what it measured turned into FaultRecords, the throughput around a fault, the refusals; the
simulated runs themselves are tests/ns3/test_faults_sim.py's."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.spec import Backend, ExperimentSpec, Topo
from gradswitch.sim.faults import (
    LINK_DETECT_S,
    SWITCH_DETECT_S,
    SimFault,
    SimFaultError,
    fault_json,
    fault_records,
    phase_throughput,
)
from gradswitch.sim.sim_config import SimConfigError, run_config
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.faults import parse_fault
from gradswitch.workload.fault_record import FaultOutcome, FaultRecord
from gradswitch.workload.job import Algorithm
from gradswitch.workload.worker_result import WorkerResult
from tests.ns3.helpers import spec_jobs

SWITCH_FAULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "switch-faults.json"


def leafspine(**kw: Any) -> ExperimentSpec:
    fields: dict[str, Any] = {"algo": Algorithm.RING, "workers": 4, "topo": Topo.LEAFSPINE, "size_bytes": 1 << 20,
                              "bw_mbps": 20, "iterations": 10, "backend": Backend.NS3}
    return ExperimentSpec.of(**{**fields, **kw})


def test_detection_delays_are_the_bmv2_controllers_measured_medians() -> None:
    summary = json.loads(SWITCH_FAULTS.read_text())["summary"]
    assert pytest.approx(summary["switch_reroute_s"]["median"], abs=0.005) == SWITCH_DETECT_S
    assert pytest.approx(summary["link_reroute_s"]["median"], abs=0.005) == LINK_DETECT_S
    assert (SimSettings().switch_detect_s, SimSettings().link_detect_s) == (SWITCH_DETECT_S, LINK_DETECT_S)


def test_faults_are_resolved_into_the_configuration() -> None:
    topo, cfgs = spec_jobs(leafspine())
    flap = parse_fault("link-flap:spine1-leaf1@1,down=0.5,up=0.25,flaps=2")
    assert fault_json(flap, topo, cfgs) == {
        "label": flap.label, "at_s": 1.0, "kind": "link-down", "a": "spine1", "b": "leaf1",
        "windows": [{"from_s": 1.0, "to_s": 1.5}, {"from_s": 1.75, "to_s": 2.25}]}
    crash = fault_json(parse_fault("switch-crash:spine2@2"), topo, cfgs)
    assert crash["windows"] == [{"from_s": 2.0, "to_s": None}] and crash["switch"] == "spine2"
    by_rank = fault_json(parse_fault("worker-crash:2@1"), topo, cfgs)
    host = cfgs[0].workers[2].host
    assert (by_rank["job"], by_rank["node"], by_rank["host"]) == (1, cfgs[0].workers[2].node_id, host)
    assert fault_json(parse_fault(f"worker-crash:{host}@1"), topo, cfgs)["node"] == by_rank["node"]
    slow = fault_json(parse_fault("slow-worker:0@0,factor=3,rate=5"), topo, cfgs)
    assert (slow["factor"], slow["rate_bps"]) == (3.0, 5e6)
    config = run_config(topo, cfgs, SimSettings(faults=(flap,), switch_detect_s=0.02))
    assert config["fault_schedule"]["switch_detect_s"] == 0.02
    assert config["fault_schedule"]["link_detect_s"] == LINK_DETECT_S


def test_a_worker_the_job_does_not_have_is_refused_in_one_line() -> None:
    topo, cfgs = spec_jobs(leafspine())
    with pytest.raises(SimFaultError, match=r"fault worker-crash:7@1: '7' is not a worker of job 1 \(its ranks 0..3"):
        fault_json(parse_fault("worker-crash:7@1"), topo, cfgs)
    with pytest.raises(SimConfigError, match="is not a link of"):
        run_config(topo, cfgs, SimSettings(faults=(parse_fault("link-down:leaf1-leaf2@1"),)))


def node(node_id: int, iterations: int, ok: bool = True, error: str | None = None) -> WorkerResult:
    its = [{"index": i, "start": i * 1.0, "end": i + 1.0} for i in range(iterations)]
    out: dict[str, Any] = {"node_id": node_id, "host": f"h{node_id + 1}", "role": "worker", "ok": ok,
                           "iterations": its}
    if error is not None:
        out["error"] = error
    return out  # type: ignore[return-value]


def measured(label: str, injected: float | None = 2.0, detected: float | None = 2.05,
             recovered: float | None = 2.2, stalled: int = 1, lost: int = 10) -> SimFault:
    return SimFault(label, injected, detected, recovered, None if recovered is None else injected, stalled, stalled,
                    lost, False)


def test_what_the_simulator_measured_becomes_fault_records() -> None:
    _, cfgs = spec_jobs(leafspine())
    crash = parse_fault("switch-crash:spine1@2,restart=3")
    nodes = {1: {i: node(i, 10) for i in range(4)}}
    [r] = fault_records((crash,), [measured(crash.label)], nodes, cfgs, 12.0)
    assert (r.outcome, r.detected_s, r.recovered_s, r.iterations_lost) == (FaultOutcome.RECOVERED, 2.05, 2.2, 0)
    assert r.time_to_detect_s == pytest.approx(0.05) and "10 packets lost" in r.detail
    [r] = fault_records((crash,), [measured(crash.label, stalled=0, lost=0, recovered=None)], nodes, cfgs, 12.0)
    assert r.outcome == FaultOutcome.NO_EFFECT
    # a NetReduce job that fell back to ring was met by it, though nothing was lost (its crash between two
    # reductions: a training job's workers computing)
    fell_back = replace(measured(crash.label, stalled=0, lost=0, recovered=None), fallback="ring", fallback_s=2.06,
                        ring_recovered_s=2.3)
    [r] = fault_records((crash,), [fell_back], nodes, cfgs, 12.0)
    assert (r.outcome, r.fallback, r.recovered_s) == (FaultOutcome.RECOVERED, "ring", 2.3)
    unrun = measured(crash.label, injected=None, detected=None, recovered=None)
    [r] = fault_records((crash,), [unrun], nodes, cfgs, 12.0)
    assert r.outcome == FaultOutcome.NO_EFFECT and r.detail == "not injected: the jobs had ended before its time"
    assert not r.injected and r.not_injected == "the jobs had ended before its time"
    # a switch that stays down on the only path: the QPs give up, the job stops mid-iteration
    broken = {1: {0: node(0, 3, False, "transport retry counter exceeded: no acknowledgement from h2"),
                  **{i: node(i, 3, False, "stopped: node 0 of job 1 failed") for i in range(1, 4)}}}
    [r] = fault_records((crash,), [measured(crash.label, recovered=None)], broken, cfgs, 8.0)
    assert (r.outcome, r.iterations_lost) == (FaultOutcome.INTERRUPTED, 1)
    assert r.detail.startswith("job 1 stopped: node 0 on h1: transport retry counter exceeded")
    assert r.job_stopped_s == 8.0


def test_a_worker_crash_is_interrupted_with_the_iterations_kept() -> None:
    _, cfgs = spec_jobs(leafspine())
    kill = parse_fault("worker-crash:1@3.5")
    nodes = {1: {0: node(0, 3, False, "stopped: node 1 of job 1 failed: crashed at 3.5 s (fault worker-crash:1@3.5)"),
                 1: node(1, 3, False, "crashed at 3.5 s (fault worker-crash:1@3.5)"),
                 2: node(2, 3, False, "stopped: ..."), 3: node(3, 3, False, "stopped: ...")}}
    [r] = fault_records((kill,), [measured(kill.label, injected=3.5, detected=3.5, recovered=None, stalled=0)],
                        nodes, cfgs, 3.5)
    assert (r.outcome, r.iterations_lost, r.time_to_detect_s, r.job_stopped_s) == (FaultOutcome.INTERRUPTED, 1, 0.0,
                                                                                   3.5)
    assert r.detail == "worker 1 on h2 crashed: job 1 stopped after 3 of 10 iterations, kept"


def test_throughput_before_during_and_after_a_fault() -> None:
    crash = parse_fault("switch-crash:spine1@2")
    record = FaultRecord(crash, 2.0, FaultOutcome.RECOVERED, 2.05, 2.5)
    spans = [(0.0, 1.0), (1.0, 1.9), (1.9, 3.0), (3.0, 3.5), (3.5, 4.0)]
    t = phase_throughput(spans, record)
    assert t.before == pytest.approx(2 / 1.9)  # two iterations ended before 2.0 s, in 1.9 s
    assert t.during == pytest.approx(1 / 1.1)  # the one running from the crash until the recovery
    assert t.after == pytest.approx(2 / 1.0)  # those started after 2.5 s
    assert phase_throughput([], record).to_dict() == {"before": None, "during": None, "after": None}


def test_the_simulator_refuses_what_it_does_not_run_before_anything_starts() -> None:
    crash = (parse_fault("switch-crash:spine1@1"),)
    assert not [p for p in leafspine(algo=Algorithm.NETREDUCE, faults=crash).problems() if "fault" in p]
    spec = leafspine(algo=Algorithm.NETREDUCE, faults=crash, ranks=2)  # the fallback's agreement needs one rank
    [line] = [p for p in spec.problems() if "fault" in p]
    assert line.startswith("fault switch-crash:spine1@1: a NetReduce job's fallback to ring on the simulator needs")
    assert not leafspine(faults=(parse_fault("switch-crash:spine1@1"), parse_fault("link-flap:leaf1-spine1@1"),
                                 parse_fault("worker-crash:1@1"), parse_fault("slow-worker:2@0,factor=2"))).problems()


@pytest.mark.parametrize("backend", [Backend.NS3, Backend.BMV2])
def test_a_trace_takes_switch_and_link_faults_and_refuses_a_workers_in_one_line(backend: Backend) -> None:
    trace = {"workload_et": "traces/ar", "backend": backend}
    ok = leafspine(**trace, faults=(parse_fault("switch-crash:spine1@1,restart=1"),
                                    parse_fault("link-flap:leaf1-spine1@1,down=0.2")))
    assert not [p for p in ok.problems() if "fault" in p]
    [line] = [p for p in leafspine(**trace, faults=(parse_fault("slow-worker:2@0,factor=2"),)).problems()
              if "fault" in p]
    assert "fault slow-worker:2@0,factor=2: " in line and "runs switch and link faults, not a worker's" in line
    # an in-network trace: its switch jobs are not torn down around a crash on BMv2, and the simulator's graph
    # engine has no fallback to ring for its in-network collectives yet (a link's fault too)
    for fault in ("switch-crash:spine1@1", "link-flap:leaf1-spine1@1,down=0.2"):
        [line] = [p for p in leafspine(**trace, algo=Algorithm.NETREDUCE, faults=(parse_fault(fault),)).problems()
                  if "fault" in p]
        assert line.startswith(f"fault {fault}: " + ("an execution-graph run's in-network collectives"
                                                     if backend == Backend.BMV2 else
                                                     "the simulator's graph engine runs a trace's in-network "
                                                     "collectives (algo = netreduce) without faults")), line
