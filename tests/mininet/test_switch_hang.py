"""A switch that hangs instead of crashing, on real BMv2 (docs/faults.md, "A switch that hangs").

spine1's BMv2 process is stopped (SIGSTOP): its P4Runtime stream stays open, so only the controller's heartbeat can
notice. It names spine1 hung within the heartbeat's bound, routes around it (a UDP flow through spine1 comes back
through spine2), and once the process is let go on (SIGCONT) takes it back as a restarted switch (its tables pushed
again, the flow through it again), but only once its old pipeline has gone through every packet it was sent while it
was stopped (none is left for the pipeline pushed again to take as new). In a NetReduce run whose aggregation spine
hangs mid-run, the run ends within the stated bound with results.json holding the iterations completed before, exact,
and the fault's record naming the switch hung; the network's teardown does not wait on the stopped process. Every
network leaves nothing behind.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench.switch_faults import port_towards, rx_through, start_flow, watch_health
from gradswitch.control.health import HealthKind
from gradswitch.control.p4rt import SwitchUnavailable
from gradswitch.experiment.fault_schedule import hang_end_bound_s
from gradswitch.experiment.spec import ExperimentSpec, spec_from_dict
from gradswitch.experiment.supervisor import stop_deadline_s
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.process_state import process_state
from gradswitch.protocol.heartbeat import HUNG_DETECT_BOUND_S
from gradswitch.protocol.polling import wait_until
from gradswitch.workload.job import JobConfig
from tests.results import read, run_on

pytestmark = pytest.mark.mininet
# The default engine's NetReduce switch job (the graph's in-network all-reduces, job 2) aggregates on spine1 of the
# 2x2 leaf-spine, the spine of its graph's job 1, as the loop's job 1 does.
AGGREGATION_SPINE = "spine1"

SLACK_S = 1.0  # the loaded machine's: a heartbeat round's own time, the event's thread


def test_a_hung_spine_is_named_hung_routed_around_and_taken_back_when_let_go_on(fabric_net: Testbed,
                                                                                 tmp_path: Path) -> None:
    net, topo = fabric_net, fabric_net.topo
    events = watch_health(net)
    flow = start_flow(net, "h1", "h3", "spine1", tmp_path / "flow.log")
    spine_in = port_towards(topo, "spine1", "leaf1")
    flow.wait_for(20)
    pid = net._switch_node("spine1").bmv2.pid

    hung_at = time.monotonic()
    net.hang_switch("spine1")
    assert process_state(pid) == "T"
    hung = events.first(HealthKind.SWITCH_HUNG, "spine1", hung_at, timeout=HUNG_DETECT_BOUND_S + 10)
    rerouted = events.first(HealthKind.REROUTED, "spine1", hung.at)
    detect = hung.at - hung_at
    print(f"spine1 stopped: named hung after {detect:.2f} s (bound {HUNG_DETECT_BOUND_S:g} s), rerouted "
          f"{(rerouted.at - hung_at):.2f} s after")
    assert detect <= HUNG_DETECT_BOUND_S + SLACK_S and "heartbeats" in hung.detail
    assert not net.fabric.is_up("spine1") and "spine1" not in net.fabric.switch_names()
    assert not [e for e in events.seen if e.kind == HealthKind.SWITCH_DOWN], "a hung switch is not a dead one"
    # Every call to it is refused at once, not after its deadline.
    asked = time.monotonic()
    with pytest.raises(SwitchUnavailable, match="hung"):
        net.fabric.port_stats("spine1")
    assert time.monotonic() - asked < 1.0
    sent = flow.count()
    flow.wait_for(20)
    assert flow.count() >= sent + 20  # around spine1, through spine2
    flow.stop()  # nothing more is sent to spine1: what it holds is what it was sent while stopped
    to_spine1 = sum({p.port: p.tx_packets for p in net.fabric.port_stats(leaf)}[port_towards(topo, leaf, "spine1")]
                    for leaf in ("leaf1", "leaf2"))

    released_at = time.monotonic()
    net.release_switch("spine1")
    up = events.first(HealthKind.SWITCH_UP, "spine1", released_at)
    # Its old pipeline went through every packet it held (what the kernel's packet rings kept of the flow's while it
    # was stopped) before the pipeline was pushed again: the new one took in none (gradswitch/control/drain.py).
    drained = net.fabric.drained["spine1"]
    taken_in = sum(p.rx_packets for p in net.fabric.port_stats("spine1"))
    print(f"spine1 let go on: taken back after {up.at - released_at:.2f} s; {drained}; the leaves sent it "
          f"{to_spine1} packets in all; its pipeline pushed again took in {taken_in}")
    assert net.fabric.is_up("spine1") and process_state(pid) != "T"
    assert drained is not None and drained.quiet and drained.counted <= to_spine1, (drained, to_spine1)
    assert taken_in == 0 and drained.describe() in up.detail, (taken_in, up.detail)
    flow = start_flow(net, "h1", "h3", "spine1", tmp_path / "flow-again.log")
    wait_until(lambda: rx_through(net, "spine1", spine_in) >= 20, 10, what="the flow through spine1 again")
    flow.stop()


def hang_run(net: Testbed, spec: ExperimentSpec, out: Path) -> tuple[dict[str, Any], float, float]:
    """Run the spec (its one fault hangs a switch); its results.json, how long after the SIGSTOP the run ended, and
    the bound it had (hang_end_bound_s)."""
    (hang,) = spec.faults.faults
    switch = hang.target
    pid = net._switch_node(switch).bmv2.pid
    stopped: list[float] = []
    done = threading.Event()

    def watch_stop() -> None:  # when the fault's SIGSTOP took (polled: the run's own thread sends it)
        while not done.is_set():
            if process_state(pid) == "T":
                stopped.append(time.monotonic())
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=watch_stop, daemon=True)
    watcher.start()
    run_on(net, spec, out, progress=False)
    ended = time.monotonic()
    done.set()
    watcher.join(timeout=5)
    assert stopped, f"{switch} was never stopped"
    cfg = JobConfig.load(out / "job1.json")
    bound = hang_end_bound_s(cfg.rto, cfg.retry_limit, stop_deadline_s([cfg]))
    saved = read(out / "results.json")
    (fault,) = saved["faults"]
    print(f"{spec.algorithm.algo}: {switch} hung mid-run: {fault['outcome']} after {len(saved['iterations'])} "
          f"iterations, run ended {ended - stopped[0]:.2f} s after the SIGSTOP (bound {bound:.2f} s): "
          f"{fault['detail']}")
    assert fault["injected"] is True and fault["fault"]["kind"] == "switch-hang"
    assert f"{switch} named hung by the control plane" in fault["detail"], fault
    assert fault["time_to_detect_s"] is not None and fault["time_to_detect_s"] <= HUNG_DETECT_BOUND_S + SLACK_S
    its = saved["iterations"]
    assert its and all(it["correct"] and it["wrong_elements"] == 0 for it in its)
    assert switch not in saved["switches"]  # a hung switch is not read
    assert process_state(pid) == "T"  # still hung: the network's stop lets it go on and ends it (the fixture)
    return saved, ended - stopped[0], bound


def interrupted_within(saved: dict[str, Any], took: float, bound: float, iterations: int) -> None:
    (fault,) = saved["faults"]
    its = saved["iterations"]
    assert fault["outcome"] == "interrupted", fault
    assert took <= bound, (took, bound)
    assert 0 < len(its) < iterations and [it["index"] for it in its] == list(range(len(its)))
    assert fault["iterations_lost"] == iterations - len(its)
    assert next(iter(saved["errors"])) == f"fault {fault['label']}"


def test_a_ring_run_whose_spine_hangs_ends_exact_with_the_spine_named_hung(fabric_net: Testbed,
                                                                            tmp_path: Path) -> None:
    """spine1 stopped mid-run by the run's own fault, never let go on: named hung and routed around; the ring goes
    on (what of it crossed spine1 resent by its queue pairs, as for a crash) and every iteration is exact."""
    iterations = 60
    spec = spec_from_dict({"algo": "ring", "workers": 4, "topo": "leafspine", "size_bytes": 256 << 10,
                           "bw_mbps": 20.0, "iterations": iterations, "faults": ["switch-hang:spine1@3"]})
    saved, _, _ = hang_run(fabric_net, spec, tmp_path / "run")
    (fault,) = saved["faults"]
    assert fault["outcome"] == "recovered" and len(saved["iterations"]) == iterations and saved["ok"], fault


def test_a_ring_run_whose_leaf_hangs_ends_within_its_bound_with_its_iterations_kept(fabric_net: Testbed,
                                                                                    tmp_path: Path) -> None:
    """The issue's run, short: a switch that cuts workers off (leaf2: h3 and h4) stopped mid-run, never let go on.
    No route goes around it: the queue pairs to h3 and h4 give up, and the job stops, interrupted, within
    hang_end_bound_s of the SIGSTOP (the teardown waits on no call to the hung switch), its results.json holding
    every iteration completed before, exact."""
    iterations = 300
    spec = spec_from_dict({"algo": "ring", "workers": 4, "topo": "leafspine", "size_bytes": 256 << 10,
                           "bw_mbps": 20.0, "iterations": iterations, "faults": ["switch-hang:leaf2@3"]})
    saved, took, bound = hang_run(fabric_net, spec, tmp_path / "run")
    interrupted_within(saved, took, bound, iterations)


def test_a_netreduce_run_whose_aggregation_spine_hangs_falls_back_or_ends_within_its_bound(fabric_net: Testbed,
                                                                                           tmp_path: Path) -> None:
    """The aggregation spine (AGGREGATION_SPINE) named hung, the job falls back to ring
    (gradswitch/hosts/fallback.py) if its workers' queue pairs to the switch have not given up yet, and goes on
    exact; else it stops, interrupted, within the bound, its iterations kept."""
    iterations = 120
    spec = spec_from_dict({"algo": "netreduce", "workers": 4, "topo": "leafspine", "size_bytes": 256 << 10,
                           "bw_mbps": 20.0, "iterations": iterations, "faults": [f"switch-hang:{AGGREGATION_SPINE}@3"]})
    saved, took, bound = hang_run(fabric_net, spec, tmp_path / "run")
    (fault,) = saved["faults"]
    if fault["outcome"] == "interrupted":
        interrupted_within(saved, took, bound, iterations)
    else:
        assert fault["outcome"] == "recovered" and fault["fallback"] == "ring", fault
        assert len(saved["iterations"]) == iterations and saved["ok"]


def test_a_netreduce_run_whose_aggregation_spine_hangs_and_is_let_go_on_falls_back_and_returns(
        fabric_net: Testbed, tmp_path: Path) -> None:
    """The aggregation spine hung at 3 s and let go on at 9 s (after it was named hung): the job falls back to ring
    once it is named hung, the controller takes it back when its process goes on (once it has gone through the partials
    it was sent while stopped, its pipeline and entries pushed again), and the job returns to it; every iteration
    exact. (Without that drain a partial of before the fallback could take a cell cleared for the return, and the
    job's queue pairs gave up on the message it held up: seen on a loaded 2-core machine.)"""
    iterations = 120
    spec = spec_from_dict({"algo": "netreduce", "workers": 4, "topo": "leafspine", "size_bytes": 256 << 10,
                           "bw_mbps": 20.0, "iterations": iterations,
                           "faults": [f"switch-hang:{AGGREGATION_SPINE}@3,release=6"]})
    out = tmp_path / "run"
    events = watch_health(fabric_net)
    report = run_on(fabric_net, spec, out, progress=False)
    saved = read(out / "results.json")
    (fault,) = saved["faults"]
    print(f"netreduce: {AGGREGATION_SPINE} hung 6 s: {fault['outcome']}: {fault['detail']}")
    assert saved["ok"] and len(saved["iterations"]) == iterations, report["errors"]
    assert all(it["correct"] and it["wrong_elements"] == 0 for it in saved["iterations"])
    assert fault["outcome"] == "recovered" and fault["fallback"] == "ring", fault
    assert f"{AGGREGATION_SPINE} named hung by the control plane" in fault["detail"]
    assert "let go on (SIGCONT)" in fault["detail"]
    assert "returned to the switch at" in fault["detail"], fault
    hung = events.first(HealthKind.SWITCH_HUNG, AGGREGATION_SPINE)
    up = events.first(HealthKind.SWITCH_UP, AGGREGATION_SPINE, hung.at)
    assert fabric_net.fabric.is_up(AGGREGATION_SPINE)
    # taken back once it had gone through the partials it held (none of them left to take a cell cleared for the
    # return: gradswitch/control/drain.py)
    drained = fabric_net.fabric.drained[AGGREGATION_SPINE]
    print(f"{AGGREGATION_SPINE} taken back: {up.detail}")
    assert drained is not None and drained.quiet and drained.describe() in up.detail


def test_a_training_graph_whose_leaf_hangs_ends_within_its_bound_with_its_iterations_kept(fabric_net: Testbed,
                                                                                         tmp_path: Path) -> None:
    """The same on the graph engine (engine = graph: the ranks run the job's training graph): the ranks that stop
    mid-graph keep the nodes they ended (gradswitch/hosts/graph_main.py keep_partial), so the run's results.json
    holds every iteration completed before the hang, exact, as the loop's does."""
    iterations = 30
    spec = spec_from_dict({"algo": "ring", "workers": 4, "topo": "leafspine", "workload": "resnet50", "scale": 0.008,
                           "emulate": {"link_gbps": 10.0, "batch": 32}, "engine": "graph", "bw_mbps": 20.0,
                           "iterations": iterations, "warmup": 1, "faults": ["switch-hang:leaf2@3"]})
    saved, took, bound = hang_run(fabric_net, spec, tmp_path / "run")
    interrupted_within(saved, took, bound, iterations)
    assert saved["spec"]["engine"] == "graph" and (tmp_path / "run" / "graph" / "job1.json").exists()
