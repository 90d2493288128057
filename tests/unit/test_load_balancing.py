"""Load balancing as the controller installs it: seeds and their multipliers, the route entries of each
mode, the spec fields and options that choose them, and the model of the switch's hash. (The switch's
behaviour: tests/bmv2/test_load_balancing.py; on a running network: tests/mininet/test_dlcp.py.)"""

from __future__ import annotations

import ipaddress
import json

import pytest

from gradswitch.cli.main import build_parser
from gradswitch.control.controls import l3_forwarding
from gradswitch.control.p4rt import P4Info
from gradswitch.control.routing import ecmp_member
from gradswitch.experiment.spec import ExperimentSpec, spec_from_dict
from gradswitch.protocol.ecmp import (
    DEFAULT_FLOWLET_GAP_US,
    MAX_ECMP_SEED,
    Balancing,
    LoadBalance,
    hash_multiplier,
    seed_of,
)
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.paths import BMV2_JSON, P4INFO
from gradswitch.topology.generators import leafspine, rack
from tests.traces.generate import crc16_arc


@pytest.mark.parametrize("seed", [0, 1, 2, 7, 12345, MAX_ECMP_SEED])
def test_a_seed_comes_back_from_its_multiplier(seed):
    m = hash_multiplier(seed)
    assert 0 < m < 1 << 32 and seed_of(m) == seed
    assert (m == CONFIG.ECMP_PLAIN_MULTIPLIER) == (seed == 0)
    assert seed == 0 or m % 2 == 1  # odd: multiply-shift hashing


def test_different_seeds_have_different_multipliers_and_bad_ones_are_refused():
    assert len({hash_multiplier(s) for s in range(1000)}) == 1000
    for bad in (-1, MAX_ECMP_SEED + 1):
        with pytest.raises(ValueError, match="ECMP seed"):
            hash_multiplier(bad)
    with pytest.raises(ValueError, match="not one hash_multiplier makes"):
        seed_of(2)


def test_seed_zero_is_the_plain_crc_of_the_five_tuple():
    """The model of the switch's hash agrees with the trace generator's (tests/traces/generate.py) for seed 0:
    member = CRC-16/ARC of the 5-tuple and spray key, mod the group's size."""
    for sport in range(1000, 1100):
        key = ipaddress.IPv4Address("10.0.1.1").packed + ipaddress.IPv4Address("10.0.2.1").packed + bytes([17]) + \
            sport.to_bytes(2, "big") + (9).to_bytes(2, "big") + bytes(4)
        for size in (2, 3, 4):
            assert ecmp_member("10.0.1.1", "10.0.2.1", 17, sport, 9, size) == crc16_arc(key) % size


def test_seeds_regroup_flows_where_a_seed_inside_the_crc_would_only_rename_members():
    flows = range(2000, 2064)
    groups = {seed: {frozenset(f for f in flows if ecmp_member("10.0.1.1", "10.0.2.1", 17, f, 9, 2, seed) == m)
                     for m in (0, 1)} for seed in range(4)}
    assert len({frozenset(g) for g in groups.values()}) == 4  # four different splits of the same flows
    # Every member gets flows under every seed (no degenerate multiplier).
    assert all(len(g) == 2 for g in groups.values())


def test_route_entries_carry_the_mode_gap_and_seed():
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
    plain = l3_forwarding.route_entries(topo, "leaf1")
    ecmp = [e for e in plain if e.action == l3_forwarding.ECMP_ACTION]
    assert len(ecmp) == 1 and ecmp[0].params == {"group": 1, "size": 2, "multiplier": CONFIG.ECMP_PLAIN_MULTIPLIER}
    flowlet = Balancing(LoadBalance.FLOWLET, flowlet_gap_us=1234, seed=5)
    entries = l3_forwarding.route_entries(topo, "leaf1", flowlet)
    (group,) = [e for e in entries if e.action == l3_forwarding.FLOWLET_ACTION]
    assert group.params == {"group": 1, "size": 2, "multiplier": hash_multiplier(5), "gap_us": 1234}
    assert l3_forwarding.balancing_of(group) == flowlet
    assert l3_forwarding.balancing_of(ecmp[0]) == Balancing()
    # Routes to local hosts are the same in every mode; a rack has no ECMP group at all.
    assert [e for e in entries if e.action == "set_next_hop"] == [e for e in plain if e.action == "set_next_hop"]
    assert all(l3_forwarding.balancing_of(e) is None for e in l3_forwarding.route_entries(rack(hosts=3), "s1"))


def test_spec_fields_options_and_their_problems():
    spec = spec_from_dict({"roce_class": True, "load_balance": "flowlet", "flowlet_gap_us": 20_000, "ecmp_seed": 3})
    assert spec.network.balancing == Balancing(LoadBalance.FLOWLET, 20_000, 3) and spec.transport.roce_class
    default = ExperimentSpec().network
    assert default.balancing == Balancing() and default.flowlet_gap_us == DEFAULT_FLOWLET_GAP_US
    problems = spec_from_dict({"ecmp_seed": -2, "flowlet_gap_us": 0}).problems()
    assert any(p.startswith("ecmp_seed = -2: a seed is 0..") for p in problems), problems
    assert any(p.startswith("flowlet_gap_us = 0: an idle gap of 1..") for p in problems), problems
    with pytest.raises(ValueError, match="load_balance = 'letflow': one of ecmp, flowlet"):
        spec_from_dict({"load_balance": "letflow"})
    args = build_parser().parse_args(["experiment", "--roce-class", "--load-balance", "flowlet",
                                      "--flowlet-gap-us", "900", "--ecmp-seed", "4"])
    assert (args.roce_class, args.load_balance, args.flowlet_gap_us, args.ecmp_seed) == (True, "flowlet", 900, 4)
    unset = build_parser().parse_args(["experiment"])
    assert (unset.roce_class, unset.load_balance, unset.flowlet_gap_us, unset.ecmp_seed) == (None,) * 4


def test_the_compiled_program_has_the_actions_and_registers_the_controller_writes():
    program = json.loads(BMV2_JSON.read_text())
    sizes = {r["name"].split(".")[-1]: r["size"] for r in program["register_arrays"]}
    assert sizes["flowlet_time"] == sizes["flowlet_member"] == CONFIG.FLOWLET_SLOTS
    p4info = P4Info.from_file(P4INFO)
    for action, params in ((l3_forwarding.ECMP_ACTION, ["group", "size", "multiplier"]),
                           (l3_forwarding.FLOWLET_ACTION, ["group", "size", "multiplier", "gap_us"])):
        assert [p.name for p in p4info.params(action)] == params
        assert any(a.endswith(action) for a in p4info.table_actions("ipv4_routes"))
