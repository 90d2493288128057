"""Constants shared by the switch program and Python come from config.p4; these fail on drift."""

from __future__ import annotations

import json

import pytest
from google.protobuf import text_format
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.packet import Packet

from gradswitch.control.p4rt.proto import p4info_pb2
from gradswitch.net.bmv2 import Bmv2Config
from gradswitch.protocol import dlcp, qpn
from gradswitch.protocol.p4_constants import CONFIG, ConfigError, parse_config
from gradswitch.protocol.paths import BMV2_JSON, P4INFO
from gradswitch.roce import wire
from gradswitch.roce.headers import Opcode

P4INFO_MSG = p4info_pb2.P4Info()
text_format.Merge(P4INFO.read_text(), P4INFO_MSG)
BMV2 = json.loads(BMV2_JSON.read_text())


def table_size(short: str) -> int:
    (t,) = [t for t in P4INFO_MSG.tables if t.preamble.name.split(".")[-1] == short]
    return int(t.size)


def counter_sizes() -> dict[str, int]:
    return {c.preamble.name: int(c.size) for c in P4INFO_MSG.counters}


@pytest.mark.parametrize(
    ("table", "constant"),
    [("ipv4_routes", "IPV4_ROUTES_SIZE"), ("ecmp_members", "ECMP_MEMBERS_SIZE"), ("arp_replies", "ARP_TABLE_SIZE"),
     ("mac_forwarding", "MAC_TABLE_SIZE"), ("acl_rules", "ACL_TABLE_SIZE"), ("port_macs", "MAX_PORTS")],
)
def test_compiled_table_sizes_come_from_config(table, constant):
    assert table_size(table) == CONFIG.values[constant]


def test_compiled_counter_sizes_come_from_config():
    sizes = counter_sizes()
    assert sizes["GradswitchIngress.rx_counters.port_rx"] == CONFIG.MAX_PORTS
    assert sizes["GradswitchEgress.tx_counters.port_tx"] == CONFIG.MAX_PORTS
    assert sizes["GradswitchIngress.drop_counters.drops"] == CONFIG.DROP_REASONS
    drop_codes = [v for k, v in CONFIG.values.items() if k.startswith("DROP_") and k != "DROP_REASONS"]
    assert max(drop_codes) < CONFIG.DROP_REASONS


def test_parser_uses_the_roce_port_python_uses():
    transitions = [t for state in BMV2["parsers"][0]["parse_states"] for t in state["transitions"]]
    values = {t["value"] for t in transitions if t.get("value")}
    assert f"0x{CONFIG.ROCE_V2_UDP_PORT:04x}" in values
    assert wire.ROCE_V2_UDP_PORT == CONFIG.ROCE_V2_UDP_PORT
    # and scapy, independently, decodes that port as RoCE (IANA 4791)
    decoded: Packet = UDP(dport=CONFIG.ROCE_V2_UDP_PORT) / BTH()
    assert BTH in decoded


def test_switches_start_with_the_configured_queues_and_cpu_port(tmp_path):
    cmd = Bmv2Config("s", 0, 1, 2, {1: "veth1"}, tmp_path).command()
    assert cmd[cmd.index("--priority-queues") + 1] == str(CONFIG.PRIORITY_QUEUES)
    assert cmd[cmd.index("--cpu-port") + 1] == str(CONFIG.CPU_PORT)
    widths = {m.name: m.bitwidth for c in P4INFO_MSG.controller_packet_metadata for m in c.metadata}
    assert 1 << widths["ingress_port"] > CONFIG.CPU_PORT


def test_every_constant_is_documented():
    undocumented = [name for name in CONFIG.values if not CONFIG.doc(name)]
    assert undocumented == []


def test_parse_errors_name_the_line(tmp_path):
    bad = tmp_path / "config.p4"
    bad.write_text("// a\n#define A 1\n// b\n#define A 2\n")
    with pytest.raises(ConfigError, match=r"config.p4:4: A is defined twice"):
        parse_config(bad)
    bad.write_text("#define B (1 << 4)\n")
    with pytest.raises(ConfigError, match="cannot read constant"):
        parse_config(bad)
    with pytest.raises(ConfigError, match="defines no constant 'NOPE'"):
        _ = CONFIG.NOPE


def test_rc_opcodes_match_scapy():
    """config.p4's opcodes (gradswitch.roce.headers.Opcode reads them) against scapy's independent table."""
    from scapy.contrib import roce as scapy_roce

    scapy_names = {name.replace("RDMA_", "").replace("_WITH_IMMEDIATE", "_IMM"): value
                   for name, value in scapy_roce._ops.items()}
    for op in Opcode:
        assert scapy_names[op.name] == op.value == CONFIG.values[f"ROCE_{op.name}"], op.name


def test_dlcp_and_netreduce_sizes_come_from_config():
    sizes = counter_sizes()
    assert sizes["GradswitchEgress.dlcp_egress.dlcp_events"] == CONFIG.DLCP_MAX_JOBS * CONFIG.DLCP_EVENTS
    assert sizes["GradswitchIngress.netreduce.nr_job_events"] == CONFIG.AGG_MAX_JOBS * CONFIG.NR_EVENTS
    assert table_size("dlcp_drop_thresholds") == CONFIG.PRIORITY_QUEUES
    assert table_size("dlcp_jobs") == CONFIG.DLCP_MAX_JOBS
    # a job id the QP number can carry past DLCP_MAX_JOBS is refused by the controller (test_dlcp_hosts.py)
    assert qpn.MAX_JOBS >= CONFIG.DLCP_MAX_JOBS


def test_dlcp_class_layout_fits_the_reserved_bits():
    bits = {"droppable": 1 << CONFIG.DLCP_DROPPABLE_SHIFT, "layer": dlcp.LAYER_MASK, "magnitude": dlcp.MAGNITUDE_MASK}
    assert sum(bits.values()) == bits["droppable"] | bits["layer"] | bits["magnitude"]  # no overlap
    assert max(bits.values()) < 1 << 7  # BTH.resv7
    assert dlcp.marking(True, dlcp.LAYER_CLASSES - 1, dlcp.MAGNITUDE_CLASSES - 1) < 1 << 7


def test_netreduce_groups_stay_inside_the_job_block():
    from gradswitch.protocol import netreduce

    last_peer = netreduce.peer_group(1, CONFIG.AGG_MAX_MEMBERS - 1)
    assert netreduce.group_base(1) < netreduce.up_group(1) < netreduce.peer_group(1, 0)
    assert last_peer < netreduce.group_base(2)
    assert netreduce.group_base(1) > CONFIG.BROADCAST_GROUP_ID


def test_tensorlights_matches_the_source_port_the_engine_sends_from():
    from gradswitch.net.tensorlights import source_port_match

    for job, node, peer in ((1, 2, 0), (3, 0, 5), (63, 7, 1)):
        assert source_port_match(job, node)[0] == qpn.udp_source_port(qpn.qpn(node, peer, job))


def test_aggregation_payload_and_registers_come_from_config():
    """The payload's wide fields, the aggregator's registers and Python's packet layout agree with config.p4."""
    from gradswitch.control.controls import netreduce as nr
    from gradswitch.protocol import netreduce

    (agg,) = [h for h in BMV2["header_types"] if h["name"] == "agg_payload_h"]
    assert [f[1] for f in agg["fields"]] == [CONFIG.AGG_WORD_BITS] * CONFIG.AGG_WORDS_PER_PACKET
    registers = {r["name"].split(".")[-1]: r for r in BMV2["register_arrays"]}
    values = [r for name, r in registers.items() if name.startswith("nr_values")]
    assert sorted(r["name"].split(".")[-1] for r in values) == sorted(nr.VALUES)
    assert all(r["bitwidth"] == CONFIG.AGG_WORD_BITS and r["size"] == CONFIG.AGG_CELLS for r in values)
    assert all(registers[r]["bitwidth"] <= 64 for r in nr.REGISTERS_PER_CELL)  # the Thrift API reads 64 bits
    assert netreduce.WORDS * netreduce.LANES == netreduce.ELEMENTS == CONFIG.AGG_ELEMENTS_PER_PACKET
    assert netreduce.MTU == netreduce.PACKET_BYTES == 4 * CONFIG.AGG_ELEMENTS_PER_PACKET
    assert netreduce.MESSAGE_BYTES == netreduce.PACKETS * netreduce.PACKET_BYTES


def test_the_job_mtu_is_what_experiments_give_netreduce_workers():
    from gradswitch.experiment.placement import job_config, topology_for
    from gradswitch.experiment.spec import ExperimentSpec
    from gradswitch.protocol import netreduce
    from gradswitch.workload.job import Algorithm, Node, Role

    spec = ExperimentSpec.of(algo=Algorithm.NETREDUCE, workers=2)
    cfg = job_config(spec, 1, [Node(0, Role.WORKER, "h1", "10.0.1.1"), Node(1, Role.WORKER, "h2", "10.0.1.2")],
                     topology_for(spec))
    assert cfg.mtu == netreduce.MTU


def test_every_netreduce_refusal_is_an_event_of_the_program():
    from gradswitch.control.controls import netreduce

    assert set(netreduce.event_names().values()) >= netreduce.REFUSALS
