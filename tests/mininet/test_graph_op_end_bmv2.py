"""On BMv2: a graph operation ends with its output, not its writes' acknowledgements
(gradswitch/hosts/collectives/executor.py), and a packet of its last write lost on the way is resent from the
transport's own copy of its bytes after the next operation has started, both outputs exact. Two ranks on the rack,
two ring all-reduces one after the other; nftables on the switch's port to rank 1 (netdev egress: the hosts send on a
raw IPv4 socket, to which a drop in their own output hook is an error, and receive on an AF_PACKET socket, which sees a
packet before their input hook) loses the first transmission of rank 0's first all-reduce's last write (its immediate
data names it) and lets the resend through. The in-memory twin, every kind:
tests/unit/test_graph_op_end.py."""

from __future__ import annotations

import re
import subprocess
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
TABLE = "gs_lose_once"  # netdev family, in the root namespace, where the switches' ports are
# a one-packet WRITE with immediate: UDP (8) + BTH (12) + RETH (16) bytes, then the immediate data
IMM_AT_BITS = (8 + 12 + 16) * 8
# the lost packet's frame: Ethernet (14) + IPv4 (20) + UDP (8) + BTH (12) + RETH (16) + immediate (4) + half the buffer
# + ICRC (4)
PACKET_BYTES = 14 + 20 + 8 + 12 + 16 + 4 + NBYTES // 2 + 4
QUOTA_BYTES = PACKET_BYTES * 3 // 2  # `quota until` it: the first transmission matches, the second (and on) does not


def lose_once(device: str, imm: int) -> str:
    """nft script: on `device`'s egress, the first RoCE packet with immediate data `imm` counted (`seen`) and dropped
    (`lost`); the ones after it counted in `seen` alone."""
    return (f"table netdev {TABLE} {{\n"
            f" counter seen {{ packets 0 bytes 0 }}\n counter lost {{ packets 0 bytes 0 }}\n"
            f" chain out {{\n  type filter hook egress device \"{device}\" priority 0; policy accept;\n"
            f"  udp dport {ROCE_V2_UDP_PORT} @th,{IMM_AT_BITS},32 {imm:#x} counter name \"seen\" "
            f"quota until {QUOTA_BYTES} bytes counter name \"lost\" drop\n }}\n}}\n")


def nft(*args: str, script: str | None = None) -> str:
    proc = subprocess.run(["nft", *args], input=script, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def counted(name: str) -> int:
    found = re.search(r"packets (\d+)", nft("list", "counter", "netdev", TABLE, name))
    assert found
    return int(found.group(1))


def test_a_write_lost_across_an_operations_end_is_resent_and_both_stay_exact(tmp_path: Path) -> None:
    graph = two_in_a_row(CollectiveKind.ALL_REDUCE)
    ops = ops_of(graph, 0)
    first = ops[1]
    last = max(i for i, s in enumerate(first.schedule().steps) if s.send_to is not None)
    with Testbed(rack(hosts=2, bw_mbps=BW_MBPS), NetworkOptions(run_dir=tmp_path / "net")) as net:
        [to_h2] = net.topo.links_of("h2")
        device = net.host(to_h2.b).intfs[to_h2.b_port].name  # the switch's port to h2 (rank 1)
        nft("-f", "-", script=lose_once(device, first.imm(last)))
        try:
            report = run_graph(net, graph, tmp_path / "run", bw_mbps=BW_MBPS)
            seen, lost = counted("seen"), counted("lost")
        finally:
            nft("delete", "table", "netdev", TABLE)
    assert report.hosts[0] == "h1"  # rank 0, whose write was lost
    assert report.checked, report.errors
    assert all(n.checked for n in report.run.nodes), report.run.nodes
    assert lost == 1 and seen >= 2, (seen, lost)  # lost once, then resent
    assert report.resent_packets > 0
    by = {(n.rank, n.node_id): n for n in report.run.nodes}
    # rank 0's next all-reduce started before rank 1 had the lost write (it had it only once resent): rank 0's first
    # ended without that write's acknowledgement
    assert by[(0, 2)].start_s < by[(1, 1)].end_s, (by[(0, 2)], by[(1, 1)])
