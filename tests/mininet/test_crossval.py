"""One small cross-validation pair (bench.crossval runs them all): the same ring spec on BMv2 at 8 Mb/s
and on ns-3 with the testbed's measured costs (bench/results/testbed-costs.json), its median iteration within
bench.crossval's 10 %."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from bench.crossval import DEFAULT_BW_MBPS, allreduce_specs, simulated
from bench.testbed_costs import load_costs, measured_with
from gradswitch.experiment.crossval import TOLERANCE
from gradswitch.net.bmv2 import BMV2_ENV
from tests.results import run_experiment

BMV2_RUNS = 3

pytestmark = [pytest.mark.mininet, pytest.mark.ns3]


def test_a_ring_on_bmv2_and_on_ns3_agree(tmp_path, monkeypatch):
    # bench.crossval's own rate (8 Mb/s), where it judges every pair: at 20 Mb/s this ring on the 2-core machine
    # was machine-bound in every attempt of two suite runs (busiest link 75 % loaded).
    (ring,) = [s for s in allreduce_specs(["rack"], [4], DEFAULT_BW_MBPS, 256 << 10,
                                          3) if str(s.algorithm.algo) == "ring"]
    build = measured_with()
    if build is not None and Path(build).exists():
        monkeypatch.setenv(BMV2_ENV, build)  # the BMv2 build the costs were measured with
    twin = simulated(ring, load_costs())
    sim = twin.network.sim
    assert sim.switch_delay_us > 0 and sim.host_delay_us > 0 and sim.link_delay_us == 0
    # As bench.crossval: the BMv2 figure is the median of the runs the links limited (a machine-bound run, another
    # process having taken a core, says nothing about the model); the test fails if none of BMV2_RUNS was.
    usable, seen = [], []
    for attempt in range(BMV2_RUNS):
        testbed = run_experiment(ring, tmp_path / f"bmv2-{attempt}", progress=False)
        assert testbed["ok"] and testbed["summary"]["correct"], testbed["errors"]
        extra = testbed["headline_extra"]
        seen.append(f"{testbed['summary']['median_s']:.3f} s, CPU {extra.get('cpu_idle')} idle, busiest link "
                    f"{extra.get('busiest_link_load')} loaded, machine-bound {extra['machine_bound']}")
        if not extra["machine_bound"]:
            usable.append(testbed["summary"]["median_s"])
    if not usable:
        pytest.fail(f"every BMv2 run was machine-bound (is something else using the CPU?): {seen}")
    model = run_experiment(twin, tmp_path / "ns3", progress=False)
    assert model["ok"] and model["summary"]["correct"], model["errors"]
    assert testbed["backend"] == "bmv2" and model["backend"] == "ns3"
    measured, simulated_s = statistics.median(usable), model["summary"]["median_s"]
    assert abs(simulated_s / measured - 1) <= TOLERANCE, (measured, simulated_s, seen)
