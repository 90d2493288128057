"""DLCP priority on the hosts' graph engine through BMv2: a collective's layer class is the priority its packets
get at a switch with DLCP priority on (tests/graph_fan_in.py: two broadcasts into one port, layer classes 0 and
7), as on the simulator (tests/ns3/test_graph_dlcp_sim.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradswitch.experiment.graph_experiment import run_workload_on
from gradswitch.experiment.graph_run import graph_spec
from gradswitch.experiment.spec import DlcpOptions
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.topology.generators import rack
from tests.graph_fan_in import fan_in, received_s

pytestmark = pytest.mark.mininet

BW_MBPS = 8.0
NBYTES = 256 << 10


def test_the_top_layer_class_goes_first_through_a_shared_port(tmp_path: Path) -> None:
    graph = fan_in(NBYTES)
    alone = NBYTES / (BW_MBPS * 1e6 / 8)  # one broadcast at the link rate
    got = {}
    with Testbed(rack(hosts=3, bw_mbps=BW_MBPS), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for priority in (True, False):
            spec = graph_spec(graph, bw_mbps=BW_MBPS).but(dlcp=DlcpOptions(priority=priority))
            report = run_workload_on(net, spec, graph, tmp_path / f"priority-{priority}")
            assert report.checked, report.errors
            got[priority] = received_s(report.run)
    front, back = got[True]
    assert front < 1.3 * alone and back > 1.7 * alone, (front, back, alone)
    front, back = got[False]
    assert front > 1.5 * alone and abs(front - back) < 0.2 * back, (front, back, alone)
