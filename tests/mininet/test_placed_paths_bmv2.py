"""The paths gradswitch/experiment/placed_load.py gives a graph's flows are BMv2's: a pairwise all-to-all of 8
ranks on the 2x2 leaf-spine (4 a leaf) at 8 Mb/s, exact; its busiest link is one of the four uplink directions
the model loads most (10 chunks each, against 6 on the others), carrying those bytes (payload, plus headers,
acknowledgements and any packet sent again: at most 10 % above); and its time is that of steps paced one after
another by their most loaded link (13 chunks at the link rate, headers and a busy machine allowed for), not the
10 the busiest link needs alone. The report keeps the load that makes it link-bound, 10/13."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradswitch.experiment.graph_run import graph_job, graph_spec, run_graph
from gradswitch.experiment.placed_load import placed_traffic
from gradswitch.testbed import Testbed
from mininet_topos.network import NetworkOptions
from tests.graphs import one_collective
from topology.generators import leafspine
from workload.graph import CollectiveKind

pytestmark = pytest.mark.mininet

BW_MBPS = 8.0
MIB = 1 << 20


def test_busiest_link_is_the_one_the_paths_load_most(tmp_path: Path) -> None:
    graph = one_collective(CollectiveKind.ALL_TO_ALL, 8, MIB)
    topo = leafspine(2, 2, 4, BW_MBPS)
    traffic = placed_traffic(graph_job(topo, graph_spec(graph, bw_mbps=BW_MBPS), graph)[0], topo)
    assert traffic is not None
    with Testbed(topo, NetworkOptions(run_dir=tmp_path / "net")) as net:
        report = run_graph(net, graph, tmp_path / "run", bw_mbps=BW_MBPS)
    assert report.checked, report.errors
    chunk = MIB / 8
    assert report.busiest_link in traffic.busiest_links() and max(traffic.bytes_by_link.values()) == 10 * chunk
    assert report.busiest_link_bytes is not None and 1.0 <= report.busiest_link_bytes / (10 * chunk) <= 1.1
    chunk_s = chunk * 8 / (BW_MBPS * 1e6)
    assert 12 * chunk_s <= report.job_s <= 1.25 * 13 * chunk_s, report.job_s
    assert report.ideal_link_load == pytest.approx(10 / 13)
