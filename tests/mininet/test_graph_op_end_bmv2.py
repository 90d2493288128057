"""On BMv2: a graph operation ends with its output, not its writes' acknowledgements
(gradswitch/hosts/collectives/executor.py), and a packet of its last write lost on the way is resent from the
transport's own copy of its bytes after the next operation has started, both outputs exact. Two ranks on the rack,
two ring all-reduces one after the other; nftables in rank 0's host loses the first transmission of its first
all-reduce's last write (its immediate data names it) and lets the resend through. The in-memory twin, every kind:
tests/unit/test_graph_op_end.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradswitch.experiment.graph_experiment import run_graph
from gradswitch.experiment.testbed import Testbed
from gradswitch.hosts.collectives.ops import ops_of
from gradswitch.net.network import NetworkOptions
from gradswitch.roce.wire import ROCE_V2_UDP_PORT
from gradswitch.topology.generators import rack
from gradswitch.workload.graph import CollectiveKind
from tests.unit.test_graph_op_end import NBYTES, two_in_a_row

pytestmark = pytest.mark.mininet

BW_MBPS = 8.0
TABLE = "gs_lose_once"
# a one-packet WRITE with immediate: UDP (8) + BTH (12) + RETH (16) bytes, then the immediate data
IMM_AT_BITS = (8 + 12 + 16) * 8
# the lost packet's IPv4 datagram: IPv4 (20) + UDP (8) + BTH (12) + RETH (16) + immediate (4) + half the buffer + ICRC
PACKET_BYTES = 20 + 8 + 12 + 16 + 4 + NBYTES // 2 + 4
QUOTA_BYTES = PACKET_BYTES * 3 // 2  # `quota until` it: the first transmission matches, the second (and on) does not


def lose_once(imm: int) -> str:
    """nft script: in the output hook, the first RoCE packet with immediate data `imm` counted (`seen`) and dropped
    (`lost`); the ones after it counted in `seen` alone."""
    return (f"table inet {TABLE} {{\n"
            f" chain out {{\n  type filter hook output priority 0; policy accept;\n"
            f"  udp dport {ROCE_V2_UDP_PORT} @th,{IMM_AT_BITS},32 {imm:#x} counter name seen "
            f"quota until {QUOTA_BYTES} bytes counter name lost drop\n }}\n"
            f" counter seen {{ }}\n counter lost {{ }}\n}}\n")


def counted(host: object, name: str) -> int:
    out = host.cmd(f"nft list counter inet {TABLE} {name}")  # type: ignore[attr-defined]
    found = re.search(r"packets (\d+)", out)
    assert found, out
    return int(found.group(1))


def test_a_write_lost_across_an_operations_end_is_resent_and_both_stay_exact(tmp_path: Path) -> None:
    graph = two_in_a_row(CollectiveKind.ALL_REDUCE)
    ops = ops_of(graph, 0)
    first = ops[1]
    last = max(i for i, s in enumerate(first.schedule().steps) if s.send_to is not None)
    with Testbed(rack(hosts=2, bw_mbps=BW_MBPS), NetworkOptions(run_dir=tmp_path / "net")) as net:
        h1 = net.host("h1")
        h1.cmd(f"nft delete table inet {TABLE} 2>/dev/null; nft -f - <<'NFT'\n{lose_once(first.imm(last))}NFT")
        assert counted(h1, "lost") == 0
        report = run_graph(net, graph, tmp_path / "run", bw_mbps=BW_MBPS)
        seen, lost = counted(h1, "seen"), counted(h1, "lost")
    assert report.hosts[0] == "h1"  # rank 0, whose write was lost
    assert report.checked, report.errors
    assert all(n.checked for n in report.run.nodes), report.run.nodes
    assert lost == 1 and seen >= 2, (seen, lost)  # lost once, then resent
    assert report.resent_packets > 0
    by = {(n.rank, n.node_id): n for n in report.run.nodes}
    # rank 0's next all-reduce started before rank 1 had the lost write (it had it only once resent): rank 0's first
    # ended without that write's acknowledgement
    assert by[(0, 2)].start_s < by[(1, 1)].end_s, (by[(0, 2)], by[(1, 1)])
