"""The paths gradswitch/experiment/placed_load.py gives a graph's flows are BMv2's: a pairwise all-to-all of 8
ranks on the 2x2 leaf-spine (4 a leaf) at 4 Mb/s, exact; its busiest link is one of the four uplink directions
the model loads most (10 chunks each, against 6 on the others), carrying those bytes (payload, plus headers,
acknowledgements and any packet sent again: at most 10 % above); and, in a run the links limited, its time is
that of steps paced one after another by their most loaded link (13 chunks at the link rate, headers and a busy
machine allowed for), not the 10 the busiest link needs alone. The report keeps the load that makes it
link-bound, 10/13. 4 Mb/s: where bench.crossval's runs of it left the CPU 37-42 % idle and resent nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradswitch.experiment.graph_experiment import run_graph
from gradswitch.experiment.graph_run import GraphRunReport, graph_job, graph_spec
from gradswitch.experiment.placed_load import placed_traffic
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.topology.generators import leafspine
from gradswitch.workload.graph import CollectiveKind
from tests.graphs import one_collective

pytestmark = pytest.mark.mininet

BW_MBPS = 4.0
MIB = 1 << 20
ATTEMPTS = 3  # runs until one the links limited (each checked for its paths)


def test_busiest_link_is_the_one_the_paths_load_most(tmp_path: Path) -> None:
    graph = one_collective(CollectiveKind.ALL_TO_ALL, 8, MIB)
    topo = leafspine(2, 2, 4, BW_MBPS)
    traffic = placed_traffic(graph_job(topo, graph_spec(graph, bw_mbps=BW_MBPS), graph)[0], topo)
    assert traffic is not None
    chunk = MIB / 8
    assert max(traffic.bytes_by_link.values()) == 10 * chunk
    reports: list[GraphRunReport] = []
    with Testbed(topo, NetworkOptions(run_dir=tmp_path / "net")) as net:
        for attempt in range(ATTEMPTS):
            report = run_graph(net, graph, tmp_path / f"run-{attempt}", bw_mbps=BW_MBPS)
            assert report.checked, report.errors
            assert report.busiest_link in traffic.busiest_links(), report.busiest_link
            assert report.busiest_link_bytes is not None and 1.0 <= report.busiest_link_bytes / (10 * chunk) <= 1.1
            assert report.ideal_link_load == pytest.approx(10 / 13)
            reports.append(report)
            if not report.machine_bound:
                break
    paced = [r for r in reports if not r.machine_bound]
    assert paced, f"every run was machine-bound: {[r.machine_bound_reason for r in reports]}"
    chunk_s = chunk * 8 / (BW_MBPS * 1e6)
    assert 12 * chunk_s <= paced[0].job_s <= 1.25 * 13 * chunk_s, paced[0].job_s
