"""The paths gradswitch/experiment/placed_load.py gives a graph's flows are the simulator's: a pairwise all-to-all
of 8 ranks on the 2x2 leaf-spine (4 a leaf, 100 Mb/s, queues deep enough that nothing drops) puts on every
link direction between switches the bytes the model says (payload, plus headers and acknowledgements: within
5 % above), the uplinks unevenly (10 chunks on one of a leaf's two, 6 on the other): a link-paced run of it
keeps its busiest link 10/13 loaded at the least."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.graph_run import graph_job
from gradswitch.experiment.placed_load import placed_traffic
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.spec import Backend, ExperimentSpec, SimOptions, Topo
from gradswitch.workload.graph import CollectiveKind
from tests.graphs import one_collective

pytestmark = pytest.mark.ns3

MIB = 1 << 20


def test_simulated_links_carry_what_the_paths_say(tmp_path: Path) -> None:
    graph = one_collective(CollectiveKind.ALL_TO_ALL, 8, MIB)
    spec = ExperimentSpec.of(workers=8, topo=Topo.LEAFSPINE, bw_mbps=100.0, iterations=1, backend=Backend.NS3,
                             sim=SimOptions(queue_bytes=4 * MIB))
    report = run_graph_spec(spec, graph, tmp_path)
    assert report.checked and report.resent_packets == 0
    topo = topology_for(spec)
    traffic = placed_traffic(graph_job(topo, spec, graph)[0], topo)
    assert traffic is not None
    result = json.loads((tmp_path / "sim" / "sim-results.json").read_text())
    fabric = {f"{sw}->{peer}": result["switches"][sw]["ports"][str(port)]["tx_bytes"]
              for sw in ("leaf1", "leaf2", "spine1", "spine2") for port, peer, _ in topo.switch_neighbors(sw)}
    chunk = MIB / 8
    assert sorted(traffic.bytes_by_link[link] / chunk for link in fabric) == [6.0] * 4 + [10.0] * 4
    for link, sent in fabric.items():
        assert 1.0 <= sent / traffic.bytes_by_link[link] <= 1.05, (link, sent, traffic.bytes_by_link[link])
    assert traffic.busiest_load == pytest.approx(10 / 13)
    assert report.ideal_link_load is None  # the machine-bound rule's, for BMv2 runs: a simulated run has none
