"""The fabric's session with a switch (gradswitch/control/written_entries.py TrackedSession) at an in-process P4Runtime
server: what it writes is recorded, the end of its stream is reported once, and a switch whose stream ended takes
deletes (the record only) and refuses the rest. (On BMv2, with a killed process:
tests/mininet/test_switch_faults.py.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gradswitch.control.p4rt import P4Info, SwitchAddress, SwitchUnavailable, TableEntry
from gradswitch.control.p4rt.session import CONTROLLER_ELECTION_ID
from gradswitch.control.written_entries import TrackedSession, WrittenEntries
from gradswitch.protocol.polling import wait_until
from tests.fake_p4runtime import FakeServer

P4 = P4Info.from_file()
ROUTE = TableEntry("ipv4_routes", {"hdr.ipv4.dst_addr": "10.0.2.0/24"}, "set_next_hop",
                   {"port": 3, "dst_mac": "02:00:00:02:00:01"})
MAC = TableEntry("port_macs", {"std_meta.egress_port": 1}, "set_source_mac", {"mac": "02:00:00:00:00:01"})


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def open_session(fake: FakeServer, ended: list[str]) -> TrackedSession:
    return TrackedSession(SwitchAddress("s1", 0, fake.port, 0), P4, CONTROLLER_ELECTION_ID, 5.0,
                          WrittenEntries(P4), ended.append)


def test_writes_are_recorded_and_a_closed_session_reports_nothing(fake: FakeServer) -> None:
    ended: list[str] = []
    session = open_session(fake, ended)
    session.insert([ROUTE, MAC])
    session.delete([MAC])
    assert len(fake.servicer.writes) == 2
    assert session.written.entities() == [ROUTE]
    session.close()
    assert ended == [] and not session.dead


def test_the_end_of_the_stream_is_reported_once_and_the_dead_switch_takes_only_deletes(fake: FakeServer) -> None:
    ended: list[str] = []
    session = open_session(fake, ended)
    session.insert([ROUTE, MAC])
    fake.server.stop(grace=0)  # the switch's process is gone: its stream ends
    wait_until(lambda: ended, 5, what="the end of the stream to be reported")
    assert ended == ["s1"] and session.dead
    writes = len(fake.servicer.writes)
    session.delete([MAC])  # no error: the entry went with the switch; the record forgets it
    assert session.written.entities() == [ROUTE] and len(fake.servicer.writes) == writes
    with pytest.raises(SwitchUnavailable, match=r"s1.*is down"):
        session.insert([MAC])
    assert session.written.entities() == [ROUTE]
    session.close()
    assert ended == ["s1"]
