"""The goodput study's ns-3 measurement (gradswitch/experiment/goodput_study.py), small: a 16-worker ResNet-50
ring on a k = 4 fat tree with its fabric intact and with an element of each class gone, each iteration exact, run
on the graph engine (simulated_graph.simulate_spec, the degraded fabric given as the network to simulate); the
fabric's costs the study derives from them feed the goodput model."""

from __future__ import annotations

import pytest

from gradswitch.experiment.goodput_study import degraded_cases, fabric_costs, job_spec, measure_all
from gradswitch.experiment.placement import place, topology_for
from gradswitch.experiment.simulated_graph import simulate_spec
from gradswitch.experiment.spec import Engine, ExperimentError, spec_from_dict
from gradswitch.workload.failure_schedule import FailureRates, draw_schedule
from gradswitch.workload.goodput import CheckpointRestart, InPlace, goodput

pytestmark = pytest.mark.ns3

WORKERS = 16


def test_iterations_with_an_element_gone_are_exact_and_no_faster(tmp_path):
    runs = measure_all(WORKERS, tmp_path)
    spec = job_spec(WORKERS)
    topo = topology_for(spec)
    assert [r.label for r in runs] == [label for label, _, _ in degraded_cases(topo)]
    for r in runs:
        assert r.ok and r.engine == Engine.GRAPH, r
        assert r.limits["machine_bound"] is False and r.busiest_link_load is not None
    intact = runs[0]
    assert intact.element == "intact" and 0.08 < intact.iteration_s < 0.1  # ResNet-50 on a V100: ~89 ms
    for r in runs[1:]:  # the same job on fewer paths cannot be faster (ECMP may place its flows differently)
        assert r.iteration_s >= intact.iteration_s * 0.999, (r.label, r.iteration_s, intact.iteration_s)
    # kept: a second call reads them back instead of simulating again
    assert measure_all(WORKERS, tmp_path) == runs

    costs, how = fabric_costs(topo, runs)
    assert set(costs.degraded_s) == {"link:edge-agg", "link:agg-core", "switch:agg", "switch:core"}
    assert all(text.startswith("measured on ns-3") for text in how.values())
    hosts = [n.host for n in place(spec, topo).jobs[0]]
    rates = FailureRates(per_gpu_hour=1e-3, per_switch_hour=1e-3, per_link_hour=1e-3, source="test")
    schedule = draw_schedule(rates, topo, WORKERS, hours=2000, seed=1)
    ck = goodput(schedule, topo, hosts, costs, CheckpointRestart(3600, 30, 600))
    ip = goodput(schedule, topo, hosts, costs, InPlace(40, 10))
    assert 0 < ck.goodput < ip.goodput < 1
    assert ip.accounted_s == pytest.approx(ip.wall_s) and ck.accounted_s == pytest.approx(ck.wall_s)


def test_a_network_to_simulate_with_other_hosts_and_a_loop_spec_are_refused(tmp_path):
    spec = job_spec(WORKERS)
    topo = topology_for(spec)
    fewer = topology_for(spec_from_dict({"workers": 4}))  # a rack of 4 hosts
    assert len(fewer.hosts) < len(topo.hosts)
    with pytest.raises(ExperimentError, match=r"has other hosts than the plan's .*: give one with the same hosts"):
        simulate_spec(spec, tmp_path / "fewer", network=fewer)
    with pytest.raises(ExperimentError, match=r"engine = loop: simulate_spec runs the graph engine"):
        simulate_spec(spec.but(engine=Engine.LOOP), tmp_path / "loop")
