"""`background_fixed_ports`: the testbed's bulk TCP streams leave from the simulator's client ports, so ECMP puts
them on the paths the simulator's flows take (bench.background_paths reads both), where iperf3's ephemeral ports
draw new paths every run (docs/simulator.md, "The DLCP pair as execution graphs")."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.background_paths import analyse, iperf_streams
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.protocol.background_tcp import CLIENT_PORT_BASE
from tests.results import run_experiment

pytestmark = pytest.mark.mininet

FLOWS = 4


def test_fixed_ports_put_the_testbeds_streams_on_the_simulators_paths(tmp_path: Path) -> None:
    spec = spec_from_dict({"algo": "ring", "workers": 4, "topo": "leafspine", "bw_mbps": 5.0, "iterations": 3,
                           "size_bytes": 256 << 10, "background_flows": FLOWS, "background_fixed_ports": True,
                           "roce_class": True, "name": "fixed"})
    run = tmp_path / "compare" / "fixed" / "rep1"  # a compare's layout, as bench.background_paths reads it
    report = run_experiment(spec, run, progress=False)
    assert report["ok"], report["errors"]
    _, _, written = iperf_streams((run / "run" / "background.log").read_text())
    assert sorted(written) == [CLIENT_PORT_BASE + k for k in range(FLOWS)]
    assert sum(written.values()) > 0
    testbed, simulator = analyse(tmp_path / "compare")
    assert testbed.repetition == 1 and simulator.repetition is None
    assert [(s.sport, s.data_path, s.ack_path) for s in testbed.streams] == \
        [(s.sport, s.data_path, s.ack_path) for s in simulator.streams]
    assert testbed.goodput_mbps is not None and testbed.goodput_mbps > 0
