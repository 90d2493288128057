"""DLCP priority on the simulator's graph engine: a collective's layer class is the priority its packets get at a
switch with DLCP priority on (tests/graph_fan_in.py: two broadcasts into one port, layer classes 0 and 7)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gradswitch.sim.graph_run import GraphTransport, job_config, run_graph
from gradswitch.sim.sim_settings import DlcpSwitch, SimSettings
from gradswitch.topology.generators import rack
from gradswitch.workload.dlcp import DlcpPolicy
from tests.graph_fan_in import fan_in, received_s

pytestmark = pytest.mark.ns3

MBPS = 1000
NBYTES = 2 << 20


def run(tmp_path: Path, priority: bool) -> tuple[float, float]:
    graph, topo = fan_in(NBYTES), rack(3, MBPS)
    job = replace(job_config(graph, [h.name for h in topo.hosts], topo, GraphTransport()), dlcp=DlcpPolicy())
    result = run_graph(graph, topo, SimSettings(dlcp=DlcpSwitch(priority=priority)), tmp_path, job=job)
    assert result.ok() and all(n.checked is True for n in result.run.collectives())
    return received_s(result.run)


def test_the_top_layer_class_goes_first_through_a_shared_port(tmp_path: Path) -> None:
    alone = NBYTES / (MBPS * 1e6 / 8)  # one broadcast at the link rate
    front, back = run(tmp_path / "priority", True)
    # strict priority: the front broadcast at about the link rate, the back one after it
    assert front < 1.3 * alone and back > 1.8 * alone, (front, back, alone)
    # without DLCP priority both share the port and end together, after about twice one alone
    front, back = run(tmp_path / "shared", False)
    assert front > 1.6 * alone and abs(front - back) < 0.15 * back, (front, back, alone)
