"""The simulator's ECMP and flowlet choices are the P4 program's: a flow's
member is gradswitch/control/routing.py ecmp_member (CRC-16 of the flow key times hash_multiplier(seed), bits 16..31,
mod the group's size) over the group's next hops in ascending port order, for every seed; flowlets keep their
state per slot (the low bits of the CRC-16) like set_flowlet_group's registers; the gap's default is the
P4 controller's. The switches are asked through `gradswitch-sim --tables` with `ecmp_probes` (the real
GsSwitch::Route of a built network)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gradswitch.control.routing import Route, compute_routes, crc16_arc, ecmp_member, route_for
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.protocol.ecmp import DEFAULT_FLOWLET_GAP_US, MAX_ECMP_SEED, Balancing
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.sim.build import status
from gradswitch.sim.sim_config import run_config
from gradswitch.sim.sim_settings import LoadBalance, SimSettings
from gradswitch.topology.generators import fattree, leafspine
from gradswitch.topology.model import Topology
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role

pytestmark = pytest.mark.ns3

SEEDS = [0, 1, 2, 3, 7, 1000, 123_456, MAX_ECMP_SEED]


def _probe(topo: Topology, settings: SimSettings, probes: list[dict[str, Any]], tmp_path: Path) -> list[int]:
    hosts = topo.hosts[:2]
    nodes = tuple(Node(i, Role.WORKER, h.name, h.ip) for i, h in enumerate(hosts))
    config = run_config(topo, [JobConfig(algo=Algorithm.RING, nodes=nodes, iterations=1, size_bytes=4096)], settings)
    config["ecmp_probes"] = probes
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(config))
    proc = subprocess.run([str(status().binary), "--config", str(path), "--tables"], capture_output=True, text=True,
                          check=True)
    ports: list[int] = json.loads(proc.stdout)["ecmp_probes"]
    return ports


def _flows(topo: Topology, count: int, seed: int) -> list[dict[str, Any]]:
    """Random flows between hosts on different edge switches: RoCE (UDP to 4791 from a QP's source port) and TCP."""
    draw = random.Random(seed)
    out: list[dict[str, Any]] = []
    while len(out) < count:
        src, dst = draw.sample(topo.hosts, 2)
        if topo.attachment(src.name)[0] == topo.attachment(dst.name)[0]:
            continue
        tcp = draw.random() < 0.25
        out.append({"switch": topo.attachment(src.name)[0], "src": src.name, "dst": dst.name,
                    "protocol": CONFIG.IP_PROTO_TCP if tcp else CONFIG.IP_PROTO_UDP,
                    "sport": draw.randrange(1024, 65536) if tcp else 0xC000 | draw.randrange(1 << 14),
                    "dport": 5299 if tcp else CONFIG.ROCE_V2_UDP_PORT})
    return out


def _expected(routes: dict[str, list[Route]], topo: Topology, flow: dict[str, Any], seed: int) -> int:
    """The port the P4 program sends the flow out of: the controller's route, its member by ecmp_member."""
    route = route_for(routes[flow["switch"]], topo.host(flow["dst"]).ip)
    assert route is not None and route.is_ecmp
    member = ecmp_member(topo.host(flow["src"]).ip, topo.host(flow["dst"]).ip, flow["protocol"], flow["sport"],
                         flow["dport"], len(route.next_hops), seed)
    return route.next_hops[member].port


@pytest.mark.parametrize("topo", [leafspine(2, 4, 4), leafspine(3, 3, 2), fattree(64, k=8)],
                         ids=["leafspine-4-spines", "leafspine-3-spines", "fattree-k8"])
def test_every_flow_takes_the_p4_programs_member_under_every_seed(topo, tmp_path):
    flows = _flows(topo, 150, seed=len(topo.switches))
    routes = compute_routes(topo)
    for seed in SEEDS:
        got = _probe(topo, SimSettings(ecmp_seed=seed), flows, tmp_path)
        expected = [_expected(routes, topo, f, seed) for f in flows]
        assert got == expected, f"seed {seed}"


def test_seeds_split_the_flows_differently(tmp_path):
    """Not one split under every seed (a seed mixed into the CRC's input would only XOR every hash with a
    constant): the check above would pass for a simulator that ignored the seed only if all splits agreed."""
    topo = leafspine(2, 4, 4)
    flows = _flows(topo, 100, seed=5)
    splits = {tuple(_probe(topo, SimSettings(ecmp_seed=seed), flows, tmp_path)) for seed in SEEDS[:4]}
    assert len(splits) == 4


def test_flowlets_share_a_slot_as_the_p4_registers_do(tmp_path):
    """Flows whose CRC-16s share their low bits share a flowlet slot: at one instant (no gap) every such flow
    follows the first one's draw; flows of other slots draw their own."""
    topo = leafspine(2, 4, 4)
    src, dst = topo.hosts[0], topo.hosts[-1]

    def key_crc(sport: int) -> int:
        key = (bytes(map(int, src.ip.split("."))) + bytes(map(int, dst.ip.split("."))) + bytes([CONFIG.IP_PROTO_UDP])
               + sport.to_bytes(2, "big") + CONFIG.ROCE_V2_UDP_PORT.to_bytes(2, "big") + bytes(4))
        return crc16_arc(key)

    by_slot: dict[int, list[int]] = {}
    for sport in range(0xC000, 0x10000):
        by_slot.setdefault(key_crc(sport) & (CONFIG.FLOWLET_SLOTS - 1), []).append(sport)
    shared = [ports for ports in by_slot.values() if len(ports) >= 4][:40]
    probes = [{"switch": "leaf1", "src": src.name, "dst": dst.name, "protocol": CONFIG.IP_PROTO_UDP, "sport": p,
               "dport": CONFIG.ROCE_V2_UDP_PORT} for ports in shared for p in ports[:4]]
    got = _probe(topo, SimSettings(load_balance=LoadBalance.FLOWLET), probes, tmp_path)
    groups = [got[i:i + 4] for i in range(0, len(got), 4)]
    assert all(len(set(g)) == 1 for g in groups), "flows of one slot took different members"
    assert len({g[0] for g in groups}) > 1, "every slot drew the same member"


def test_the_flowlet_gap_default_is_the_p4_controllers():
    assert SimSettings().flowlet_gap_us == DEFAULT_FLOWLET_GAP_US == Balancing().flowlet_gap_us
    assert ExperimentSpec().network.flowlet_gap_us == DEFAULT_FLOWLET_GAP_US
    topo = leafspine(2, 2, 2)
    nodes = tuple(Node(i, Role.WORKER, h.name, h.ip) for i, h in enumerate(topo.hosts[:2]))
    config = run_config(topo, [JobConfig(algo=Algorithm.RING, nodes=nodes, iterations=1, size_bytes=4096)],
                        SimSettings())
    assert config["switch"]["flowlet_gap_s"] == pytest.approx(DEFAULT_FLOWLET_GAP_US * 1e-6)
