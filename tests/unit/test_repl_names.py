"""The REPL's names and deletes against the program's P4Info.

A short name two objects share (`faults`: the ingress and the egress fault-injection tables;
`drops`: two counters) is refused with both full names and the shortest names that tell them
apart; every table is shown and completed by a name that works. A delete is written with the
entry's key and priority alone, as docs/repl.md's example types it (exact protobuf at an
in-process gRPC server).
"""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from gradswitch.control.p4rt import AmbiguousName, P4Info, SwitchAddress, SwitchSession, TableEntry
from gradswitch.control.p4rt.entities import EntryError, encode_table_entry
from gradswitch.control.p4rt.proto import p4runtime_pb2
from gradswitch.control.repl import ReplError, parse_entry
from tests.fake_p4runtime import FakeServer
from tests.unit.test_p4runtime_messages import raw_field_id, raw_id

P4INFO = P4Info.from_file()
INGRESS_FAULTS = "GradswitchIngress.ingress_faults.faults"
EGRESS_FAULTS = "GradswitchEgress.egress_faults.faults"


def test_a_shared_short_name_is_refused_listing_what_it_could_mean():
    with pytest.raises(AmbiguousName) as err:
        P4INFO.table("faults")
    text = str(err.value)
    assert f"it names {EGRESS_FAULTS} and {INGRESS_FAULTS}" in text
    assert "give one of ingress_faults.faults, egress_faults.faults" in text
    assert "did you mean" not in text
    with pytest.raises(AmbiguousName, match=r"drop_counters\.drops"):
        P4INFO.counter("drops")


def test_the_names_it_suggests_work_and_unique_short_names_stay_short():
    assert P4INFO.table("ingress_faults.faults").preamble.name == INGRESS_FAULTS
    assert P4INFO.table("egress_faults.faults").preamble.name == EGRESS_FAULTS
    assert P4INFO.table_label(INGRESS_FAULTS) == "ingress_faults.faults"
    assert P4INFO.table_label("acl_rules") == "acl_rules"
    labels = P4INFO.table_labels()
    assert len(labels) == len(set(labels)) == len(P4INFO.table_names())
    for label in labels:  # every label names exactly one table
        P4INFO.table(label)
    for label in P4INFO.counter_labels():
        P4INFO.counter(label)


def test_an_unknown_name_still_suggests_close_ones():
    with pytest.raises(KeyError, match="no table 'ipv4_route'; did you mean ipv4_routes"):
        P4INFO.table("ipv4_route")


def test_the_error_survives_the_control_socket():
    import pickle

    err = pickle.loads(pickle.dumps(AmbiguousName("table", "faults", [INGRESS_FAULTS, EGRESS_FAULTS], ["a", "b"])))
    assert isinstance(err, AmbiguousName) and "give one of a, b" in str(err)


def test_parse_entry_refuses_an_ambiguous_table():
    with pytest.raises(AmbiguousName):
        parse_entry(P4INFO, "faults", ["port=1", "priority=10"], with_action=False)


def test_delete_by_match_needs_no_action():
    entry = parse_entry(P4INFO, "acl_rules", ["protocol=17", "l4_dst_port=4791", "priority=10"], with_action=False)
    assert entry.action == "" and entry.priority == 10
    msg = encode_table_entry(P4INFO, entry, key_only=True)
    assert not msg.HasField("action") and msg.priority == 10 and len(msg.match) == 2
    with pytest.raises(EntryError, match="needs an action"):
        encode_table_entry(P4INFO, entry)  # an insert still needs one
    with pytest.raises(ReplError, match="give the action after '->'"):
        parse_entry(P4INFO, "acl_rules", ["protocol=17", "priority=10"], with_action=True)
    assert entry.describe(P4INFO.table_label(entry.table)) == "acl_rules[protocol=17 l4_dst_port=4791 priority=10]"


def test_delete_request_is_the_key_and_priority_alone():
    entry = parse_entry(P4INFO, "acl_rules", ["protocol=17", "l4_dst_port=4791", "priority=10"], with_action=False)
    table = "GradswitchIngress.acl.acl_rules"
    with FakeServer() as fake:
        session = SwitchSession(SwitchAddress("s1", 0, fake.port, 0), P4INFO)
        try:
            session.delete([entry])
        finally:
            session.close()
        expected = text_format.Parse(f"""device_id: 0 election_id {{ low: 100 }}
          updates {{ type: DELETE entity {{ table_entry {{
            table_id: {raw_id("tables", table)}
            match {{ field_id: {raw_field_id(table, "hdr.ipv4.protocol")} ternary {{ value: "\\021" mask: "\\377" }} }}
            match {{ field_id: {raw_field_id(table, "meta.l4_dst_port")}
                     ternary {{ value: "\\022\\267" mask: "\\377\\377" }} }}
            priority: 10 }} }} }}""", p4runtime_pb2.WriteRequest())
        assert fake.servicer.writes == [expected]


def test_entries_are_shown_with_a_name_that_tells_the_tables_apart():
    from gradswitch.control.p4rt.entities import format_entry

    entry = TableEntry(EGRESS_FAULTS, {"port": 2, "hdr.ipv4.protocol": "0&&&0", "meta.l4_dst_port": "0&&&0"},
                       "drop_fraction", {"ppm": 5}, priority=10)
    assert format_entry(P4INFO, entry) == "egress_faults.faults[port=2 priority=10] -> drop_fraction(ppm=5)"
