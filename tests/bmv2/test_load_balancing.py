"""Load balancing over ECMP groups on real BMv2: the seeded ECMP hash, LetFlow-style flowlet switching, and
DLCP spraying overriding flowlets.

leaf1 of a leaf-spine fabric routes h1's traffic to leaf2's hosts over its uplinks to the spines; the
routes' action carries the setting (gradswitch/control/controls/l3_forwarding.py), installed as the controller
installs it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from gradswitch.control.bmv2_thrift import Bmv2Thrift
from gradswitch.control.controls import all_base_entries, dlcp, l3_forwarding
from gradswitch.control.p4rt import Entity, TableEntry
from gradswitch.control.pcap import read_pcap
from gradswitch.control.routing import ecmp_member
from gradswitch.control.trace_replay import TraceSwitch
from gradswitch.protocol.ecmp import Balancing, LoadBalance
from gradswitch.protocol.polling import wait_until
from gradswitch.protocol.qpn import qpn
from gradswitch.roce.headers import Bth, Opcode, Transport
from gradswitch.roce.wire import build_frame
from gradswitch.topology.generators import leafspine
from gradswitch.topology.model import Topology

pytestmark = pytest.mark.bmv2
JOB = 5


def leaf_entries(topo: Topology, balancing: Balancing, extra: Sequence[Entity] = ()) -> list[Entity]:
    """leaf1's base entries with its routes as `balancing` makes them."""
    base = [e for e in all_base_entries(topo, "leaf1")
            if not (isinstance(e, TableEntry) and e.table.endswith(l3_forwarding.ROUTES))]
    return [*base, *l3_forwarding.route_entries(topo, "leaf1", balancing), *extra]


def udp(topo: Topology, sport: int, ident: int, dst: str = "h3") -> bytes:
    h1, d = topo.host("h1"), topo.host(dst)
    return bytes(Ether(src=h1.mac, dst=d.mac) / IP(src=h1.ip, dst=d.ip, id=ident) / UDP(sport=sport, dport=9)
                 / Raw(bytes(64)))


def wait_out(sw: TraceSwitch, ports: Sequence[int], n: int, timeout: float = 60.0) -> None:
    """Until the switch took the whole trace in and `n` packets came out of `ports` together."""
    sw.wait({}, timeout)
    wait_until(lambda: sum(len(read_pcap(sw.out_path(p))) for p in ports) >= n, timeout,
               what=f"{n} packets out of ports {list(ports)}")


def uplink_of(result_outputs: dict[int, list[bytes]], uplinks: Sequence[int]) -> dict[int, int]:
    """IPv4 identification -> the uplink the packet left by."""
    return {Ether(p)[IP].id: port for port in uplinks for p in result_outputs.get(port, [])}


def test_each_ecmp_seed_splits_the_flows_its_own_way(tmp_path):
    """48 flows over 4 uplinks: with every seed each flow takes exactly the member the model of the hash says
    (gradswitch.control.routing.ecmp_member), and the seeds group the flows differently, not just renamed members."""
    topo = leafspine(leaves=2, spines=4, hosts_per_leaf=2)
    uplinks = [3, 4, 5, 6]
    h1, h3 = topo.host("h1"), topo.host("h3")
    flows = list(range(1000, 1048))  # UDP source ports, one flow each
    partitions = {}
    for seed in (0, 1, 2):
        sw = TraceSwitch([1, *uplinks], run_dir=tmp_path / f"seed{seed}")
        sw.start(leaf_entries(topo, Balancing(seed=seed)))
        try:
            sw.replay([(1, udp(topo, sport, i)) for i, sport in enumerate(flows)])
            wait_out(sw, uplinks, len(flows))
        finally:
            result = sw.stop()
        got = uplink_of(result.outputs, uplinks)
        assert len(got) == len(flows)
        expected = {i: uplinks[ecmp_member(h1.ip, h3.ip, 17, sport, 9, len(uplinks), seed)]
                    for i, sport in enumerate(flows)}
        assert got == expected, f"seed {seed}"
        partitions[seed] = {frozenset(i for i, port in got.items() if port == u) for u in uplinks}
    assert partitions[0] != partitions[1] != partitions[2] != partitions[0]


def bursts_of_one_flow(topo: Topology, n: int, size: int) -> list[list[bytes]]:
    return [[udp(topo, 7000, 100 * b + i) for i in range(size)] for b in range(n)]


@pytest.mark.parametrize(("balancing", "spread"), [
    (Balancing(LoadBalance.FLOWLET, flowlet_gap_us=150_000), True),
    (Balancing(LoadBalance.FLOWLET, flowlet_gap_us=60_000_000), False),
    (Balancing(LoadBalance.ECMP), False),
], ids=["flowlet-gap-150ms", "flowlet-gap-60s", "ecmp"])
def test_a_flow_moves_only_after_an_idle_gap_longer_than_the_flowlet_gap(tmp_path, balancing, spread):
    """One flow, 16 bursts of 5 packets 0.4 s apart. Packets closer together than the gap (a burst's) stay on
    one member; after an idle gap longer than it (150 ms) the member is drawn again, so over 16 flowlets more
    than one is used (all 16 draws alike: probability 2^-15). A gap longer than the idle times (60 s) keeps
    one member, as ECMP does."""
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
    uplinks = [3, 4]
    bursts = bursts_of_one_flow(topo, 16, 5)
    sw = TraceSwitch([1, *uplinks], run_dir=tmp_path / "switch")
    sw.start(leaf_entries(topo, balancing))
    try:
        sw.replay_bursts(1, bursts, uplinks, idle_s=0.4)
        wait_out(sw, uplinks, 16 * 5, timeout=120)
    finally:
        result = sw.stop()
    got = uplink_of(result.outputs, uplinks)
    assert len(got) == 16 * 5
    per_burst = [{got[100 * b + i] for i in range(5)} for b in range(16)]
    assert all(len(ports) == 1 for ports in per_burst), per_burst  # a burst is one flowlet: one member
    used = set().union(*per_burst)
    assert (len(used) > 1) == spread, per_burst


def test_a_spraying_dlcp_job_is_sprayed_per_packet_under_flowlet_switching(tmp_path):
    """Flowlets with a gap no idle time reaches: a plain flow stays on one member, while the RoCE packets of a
    DLCP job that sprays are spread per packet (the PSN in the hash) over both uplinks."""
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
    h1, h3 = topo.host("h1"), topo.host("h3")
    uplinks = [3, 4]
    entries = leaf_entries(topo, Balancing(LoadBalance.FLOWLET, flowlet_gap_us=60_000_000),
                           [dlcp.features_entry(JOB, dlcp.Features(spray=True))])
    n = 200
    sprayed = [build_frame(Transport(Bth(Opcode.WRITE_MIDDLE, qpn(1, 0, JOB), psn), bytes(64)), h1.ip, h3.ip,
                           h1.mac, h3.mac, ident=psn) for psn in range(n)]
    plain = [udp(topo, 7000, 1000 + i) for i in range(n)]
    sw = TraceSwitch([1, *uplinks], run_dir=tmp_path / "switch")
    sw.start(entries)
    try:
        # The trace arrives faster than one egress queue (64 packets) drains: the queues hold all of it.
        with Bmv2Thrift(sw.address.thrift_port) as thrift:
            thrift.set_all_queue_depths(2 * n)
        sw.replay([(1, f) for pair in zip(sprayed, plain, strict=True) for f in pair])
        wait_out(sw, uplinks, 2 * n)
    finally:
        result = sw.stop()
    got = uplink_of(result.outputs, uplinks)
    assert len(got) == 2 * n
    spray = Counter(got[i] for i in range(n))
    assert all(abs(spray[u] / n - 0.5) <= 0.12 for u in uplinks), spray  # binomial sd 3.5 points at n=200
    assert len({got[1000 + i] for i in range(n)}) == 1  # the plain flow: one flowlet, one member
