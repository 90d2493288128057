"""The controller's P4Runtime requests, checked as exact protobufs at an in-process gRPC server.

Ids are looked up in the raw P4Info message by name here (independently of gradswitch.control.p4rt),
so a wrong id, a non-canonical value or a missing field fails these tests.
"""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from gradswitch.control.controls.fault_injection import loss_entries
from gradswitch.control.p4rt import (
    CloneSession,
    EntryError,
    MulticastGroup,
    NotPrimary,
    P4Info,
    Replica,
    SwitchAddress,
    SwitchSession,
    TableEntry,
    UnknownName,
    WriteError,
)
from gradswitch.control.p4rt.entities import Lpm, Ternary, normalize
from gradswitch.control.p4rt.proto import code_pb2, p4info_pb2, p4runtime_pb2
from gradswitch.control.p4rt.session import pipeline_cookie
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.paths import BMV2_JSON, P4INFO
from tests.fake_p4runtime import FakeServer

RAW = p4info_pb2.P4Info()
text_format.Merge(P4INFO.read_text(), RAW)


def raw_id(kind: str, name: str) -> int:
    matches = [o.preamble.id for o in getattr(RAW, kind) if o.preamble.name.split(".")[-1] == name
               or o.preamble.name == name or o.preamble.name.endswith("." + name)]
    assert len(matches) == 1, (kind, name, matches)
    return int(matches[0])


def raw_field_id(table: str, field: str) -> int:
    tid = raw_id("tables", table)
    t = next(t for t in RAW.tables if t.preamble.id == tid)
    return int(next(m.id for m in t.match_fields if m.name == field))


def raw_param_id(action: str, param: str) -> int:
    aid = raw_id("actions", action)
    a = next(a for a in RAW.actions if a.preamble.id == aid)
    return int(next(p.id for p in a.params if p.name == param))


def write_request(updates: str) -> p4runtime_pb2.WriteRequest:
    return text_format.Parse(f"device_id: 0 election_id {{ low: 100 }} {updates}", p4runtime_pb2.WriteRequest())


@pytest.fixture
def fake():
    with FakeServer() as server:
        yield server


@pytest.fixture
def session(fake):
    s = SwitchSession(SwitchAddress("s1", 0, fake.port, 0), P4Info.from_file())
    yield s
    s.close()


def test_arbitration_names_device_and_election_id(fake, session):
    arb = fake.servicer.stream_requests[0].arbitration
    assert (arb.device_id, arb.election_id.high, arb.election_id.low) == (0, 0, 100)
    assert session.is_primary


def test_lpm_route_insert_is_exact(fake, session):
    session.insert([TableEntry("ipv4_routes", {"hdr.ipv4.dst_addr": "10.0.2.77/24"}, "set_next_hop",
                               {"port": 3, "dst_mac": "02:00:00:02:00:01"})])
    expected = write_request(f"""
      updates {{ type: INSERT entity {{ table_entry {{
        table_id: {raw_id("tables", "ipv4_routes")}
        match {{ field_id: {raw_field_id("ipv4_routes", "hdr.ipv4.dst_addr")}
                lpm {{ value: "\\n\\000\\002\\000" prefix_len: 24 }} }}
        action {{ action {{ action_id: {raw_id("actions", "set_next_hop")}
          params {{ param_id: {raw_param_id("set_next_hop", "port")} value: "\\003" }}
          params {{ param_id: {raw_param_id("set_next_hop", "dst_mac")} value: "\\002\\000\\000\\002\\000\\001" }}
        }} }} }} }} }}""")
    assert fake.servicer.writes == [expected]


def test_ternary_rule_has_priority_and_omits_wildcards(fake, session):
    rules = loss_entries(port=2, fraction=0.02, direction="in", ip_protocol=17)
    session.insert(rules)
    table = "GradswitchIngress.ingress_faults.faults"
    tid = raw_id("tables", table)
    t = next(t for t in RAW.tables if t.preamble.id == tid)
    fid = {m.name: m.id for m in t.match_fields}
    expected = write_request(f"""
      updates {{ type: INSERT entity {{ table_entry {{
        table_id: {tid}
        match {{ field_id: {fid["port"]} exact {{ value: "\\002" }} }}
        match {{ field_id: {fid["hdr.ipv4.protocol"]} ternary {{ value: "\\021" mask: "\\377" }} }}
        action {{ action {{ action_id: {raw_id("actions", "GradswitchIngress.ingress_faults.drop_fraction")}
          params {{ param_id: 1 value: "N " }} }} }}
        priority: 10 }} }} }}""")
    assert fake.servicer.writes == [expected]  # 20000 ppm = 0x4e20 = "N "


def test_default_action_modify(fake, session):
    session.modify([TableEntry("mac_forwarding", action="flood", is_default=True)])
    expected = write_request(f"""
      updates {{ type: MODIFY entity {{ table_entry {{
        table_id: {raw_id("tables", "mac_forwarding")}
        action {{ action {{ action_id: {raw_id("actions", "flood")} }} }}
        is_default_action: true }} }} }}""")
    assert fake.servicer.writes == [expected]


def test_multicast_group_and_clone_session(fake, session):
    session.insert([MulticastGroup(1, (Replica(1), Replica(2, 1))), CloneSession(100, (Replica(255),))])
    expected = write_request("""
      updates { type: INSERT entity { packet_replication_engine_entry { multicast_group_entry {
        multicast_group_id: 1 replicas { egress_port: 1 instance: 0 } replicas { egress_port: 2 instance: 1 } } } } }
      updates { type: INSERT entity { packet_replication_engine_entry { clone_session_entry {
        session_id: 100 replicas { egress_port: 255 } } } } }""")
    assert fake.servicer.writes == [expected]


def test_pipeline_push_carries_p4info_json_and_cookie_and_is_skipped_when_installed(fake, session):
    assert session.push_pipeline() is True
    (req,) = fake.servicer.pipelines
    assert req.action == p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    assert (req.device_id, req.election_id.low) == (0, 100)
    assert req.config.p4info == RAW
    assert req.config.p4_device_config == BMV2_JSON.read_bytes()
    assert req.config.cookie.cookie == pipeline_cookie(BMV2_JSON.read_bytes())
    assert session.push_pipeline() is False
    assert len(fake.servicer.pipelines) == 1


def test_packet_out_metadata_is_canonical(fake, session):
    session.send_packet_out(b"\xaa" * 20, egress_port=3)
    pkt = _wait_for(lambda: fake.servicer.packet_outs())[0]
    md = {m.metadata_id: m.value for m in pkt.metadata}
    ids = {m.name: m.id for m in next(c for c in RAW.controller_packet_metadata
                                      if c.preamble.name == "packet_out").metadata}
    assert pkt.payload == b"\xaa" * 20
    assert md == {ids["egress_port"]: b"\x03", ids["_pad"]: b"\x00"}


def test_packet_in_is_decoded_and_dispatched(fake, session):
    got: list = []
    session.on_packet_in(got.append)
    ids = {m.name: m.id for m in next(c for c in RAW.controller_packet_metadata
                                      if c.preamble.name == "packet_in").metadata}
    fake.servicer.send_packet_in(b"hello", {ids["ingress_port"]: b"\x02", ids["reason"]: b"\x01"})
    pin = session.next_packet_in(timeout=5)
    assert pin is not None
    assert (pin.payload, pin.metadata["ingress_port"], pin.metadata["reason"]) == (b"hello", 2, 1)
    assert got == [pin]


def test_counter_read_request_and_decoding(fake, session):
    cid = raw_id("counters", "port_rx")
    rep = p4runtime_pb2.ReadResponse()
    for idx, (pkts, nbytes) in {1: (10, 1000), 2: (3, 180)}.items():
        e = rep.entities.add().counter_entry
        e.counter_id = cid
        e.index.index = idx
        e.data.packet_count = pkts
        e.data.byte_count = nbytes
    fake.servicer.read_responses = [rep]
    cells = session.read_counter("port_rx")
    assert {i: (c.packets, c.bytes) for i, c in cells.items()} == {1: (10, 1000), 2: (3, 180)}
    expected = text_format.Parse(f"device_id: 0 entities {{ counter_entry {{ counter_id: {cid} }} }}",
                                 p4runtime_pb2.ReadRequest())
    assert fake.servicer.reads == [expected]


def test_table_read_decodes_back_to_the_written_entry(fake, session):
    entry = TableEntry("arp_replies", {"target_ip": "10.0.1.2"}, "answer", {"target_mac": "00:00:0a:00:01:02"})
    session.insert([entry])
    rep = p4runtime_pb2.ReadResponse()
    rep.entities.add().table_entry.CopyFrom(fake.servicer.writes[0].updates[0].entity.table_entry)
    fake.servicer.read_responses = [rep]
    assert session.read_table("arp_replies") == [normalize(session.p4info, entry)]


def test_write_error_names_switch_entry_and_server_message(fake, session):
    fake.servicer.write_errors = {1: (code_pb2.ALREADY_EXISTS, "Match entry exists, use MODIFY if you wish")}
    good = TableEntry("mac_forwarding", {"dst_addr": "00:00:0a:00:01:01"}, "forward", {"port": 1})
    dup = TableEntry("mac_forwarding", {"dst_addr": "00:00:0a:00:01:02"}, "forward", {"port": 2})
    with pytest.raises(WriteError) as err:
        session.insert([good, dup])
    text = str(err.value)
    assert "switch s1" in text and "insert" in text
    assert "mac_forwarding[dst_addr=00:00:0a:00:01:02] -> forward(port=2)" in text
    assert "ALREADY_EXISTS: Match entry exists" in text
    assert [f.index for f in err.value.failures] == [1]


def test_backup_client_refuses_to_write_with_a_clear_error(fake):
    primary = SwitchSession(SwitchAddress("s1", 0, fake.port, 0), P4Info.from_file(), election_id=(0, 100))
    backup = SwitchSession(SwitchAddress("s1", 0, fake.port, 0), P4Info.from_file(), election_id=(0, 50))
    try:
        assert primary.is_primary and not backup.is_primary
        with pytest.raises(NotPrimary, match="another client is primary"):
            backup.insert([TableEntry("mac_forwarding", {"dst_addr": 1}, "forward", {"port": 1})])
        assert len(fake.servicer.writes) == 0
    finally:
        primary.close()
        backup.close()


# ---- entries refused before anything is sent ----


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (TableEntry("ipv4_route", {"dst_addr": "10.0.0.0/8"}, "set_next_hop"), "no table 'ipv4_route'.*ipv4_routes"),
        (TableEntry("ipv4_routes", {"dst": "10.0.0.0/8"}, "set_next_hop", {"port": 1, "dst_mac": 0}),
         "no match field 'dst'"),
        (TableEntry("ipv4_routes", {"dst_addr": "10.0.0.0/8"}, "set_next_hop", {"port": 1}),
         "needs parameter 'dst_mac'"),
        (TableEntry("ipv4_routes", {"dst_addr": "10.0.0.0/8"}, "set_next_hop", {"port": 512, "dst_mac": 0}),
         "set_next_hop.port: 512 does not fit in 9 bits"),
        (TableEntry("ipv4_routes", {"dst_addr": "10.0.0.0/8"}, "flood"), "no action 'flood' of table"),
        (TableEntry("acl_rules", {"ingress_port": 1}, "drop"), "need a priority"),
        (TableEntry("ipv4_routes", {"dst_addr": "10.0.0.300/8"}, "drop_no_route"), "cannot read"),
    ],
)
def test_bad_entries_name_what_is_wrong(entry, message):
    from gradswitch.control.p4rt.entities import encode_table_entry

    with pytest.raises((EntryError, UnknownName), match=message):
        encode_table_entry(P4Info.from_file(), entry)


def test_lpm_host_bits_are_cleared_and_values_normalised():
    p4info = P4Info.from_file()
    entry = normalize(p4info, TableEntry("ipv4_routes", {"dst_addr": "10.0.2.77/24"}, "drop_no_route"))
    assert entry.match == {"hdr.ipv4.dst_addr": Lpm(0x0A000200, 24)}
    acl = normalize(p4info, TableEntry("acl_rules", {"ether_type": "0x0800&&&0xffff", "ingress_port": 0}, "drop",
                                       priority=1))
    assert acl.match == {"hdr.ethernet.ether_type": Ternary(0x800, 0xFFFF),
                         "std_meta.ingress_port": Ternary(0, 0x1FF)}


def test_cpu_port_constant_matches_packet_io_width():
    widths = {m.name: m.bitwidth for c in RAW.controller_packet_metadata for m in c.metadata}
    assert 1 << widths["egress_port"] > CONFIG.CPU_PORT


def _wait_for(fn, timeout=5.0):
    from gradswitch.protocol.polling import wait_until

    return wait_until(fn, timeout, what="the fake server to see the request")
