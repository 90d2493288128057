"""bench.background_paths: the bulk TCP flows' paths by the switches' hash, what each carried (iperf3's log), the
links each shares with the job's ring, and the simulator's fixed client ports (one definition with gs-tcp.cc)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.background_paths import RunPaths, iperf_streams, main, streams_of
from gradswitch.control.routing import compute_routes, ecmp_member, route_for
from gradswitch.protocol.background_tcp import BACKGROUND_PORT, CLIENT_PORT_BASE
from gradswitch.sim.build import SOURCES
from gradswitch.topology.generators import leafspine

LOG = """Connecting to host 10.0.2.3, port 5299
[  7] local 10.0.1.3 port 43700 connected to 10.0.2.3 port 5299
[  9] local 10.0.1.3 port 43712 connected to 10.0.2.3 port 5299
[ ID] Interval           Transfer     Bitrate         Retr  Cwnd
[  7]   0.00-1.00   sec   543 KBytes  4.44 Mbits/sec    0   18.8 KBytes
[  9]   0.00-1.00   sec  1.50 MBytes  3.07 Mbits/sec    0   65.2 KBytes
[SUM]   0.00-1.00   sec  2.03 MBytes  7.51 Mbits/sec    0
- - - - - - - - - - - - - - - - - - - - - - - - -
[  7]   1.00-2.00   sec  0.00 Bytes  0.00 bits/sec    1   1012 Bytes
[  9]   1.00-2.00   sec   100 KBytes  0.82 Mbits/sec    0   9.88 KBytes
"""


def test_the_simulators_client_ports_are_gs_tcps() -> None:
    source = (SOURCES / "model" / "gs-tcp.cc").read_text()
    m = re.search(r"kClientPortBase\s*=\s*(\d+)", source)
    assert m is not None and int(m.group(1)) == CLIENT_PORT_BASE
    m = re.search(r"kServerPort\s*=\s*(\d+)", source)
    assert m is not None and int(m.group(1)) == BACKGROUND_PORT


def test_iperf3s_streams_and_what_was_written_to_each() -> None:
    local, server, written = iperf_streams(LOG)
    assert (local, server) == ("10.0.1.3", "10.0.2.3")
    assert written == {43700: 543 * 1024, 43712: 1.5 * 1024 ** 2 + 100 * 1024}
    with pytest.raises(ValueError, match="no iperf3 stream"):
        iperf_streams("iperf3: error - unable to connect to server\n")


def test_each_flow_takes_the_switches_member_both_ways_and_names_the_rings_links() -> None:
    topo = leafspine(2, 2, 3)
    routes = compute_routes(topo)
    sender, receiver = topo.hosts[2].name, topo.hosts[5].name  # different leaves
    (leaf1, _), (leaf2, _) = topo.attachment(sender), topo.attachment(receiver)
    ports = {CLIENT_PORT_BASE + f: None for f in range(8)}
    data_spines = set()
    for seed in (0, 3):
        ring = {f"{leaf1}->spine1", f"{leaf2}->spine2"}
        streams = streams_of(topo, routes, sender, receiver, dict(ports), ring, seed)
        for s in streams:
            route = route_for(routes[leaf1], topo.host(receiver).ip)
            assert route is not None
            member = ecmp_member(topo.host(sender).ip, topo.host(receiver).ip, 6, s.sport, BACKGROUND_PORT, 2, seed)
            port = route.next_hops[member].port
            spine = next(lk.other(leaf1)[0] for lk in topo.links_of(leaf1) if lk.port_of(leaf1) == port)
            assert s.data_path == (f"{sender}->{leaf1}", f"{leaf1}->{spine}", f"{spine}->{leaf2}",
                                   f"{leaf2}->{receiver}")
            assert s.ack_path[0] == f"{receiver}->{leaf2}" and s.ack_path[-1] == f"{leaf1}->{sender}"
            assert s.data_shared == ((f"{leaf1}->spine1",) if spine == "spine1" else ())
            assert s.ack_shared == ((f"{leaf2}->spine2",) if s.ack_path[1] == f"{leaf2}->spine2" else ())
            data_spines.add(spine)
        clear = RunPaths("r", None, None, {}, streams).clear_streams
        assert clear == sum(1 for s in streams
                            if s.data_path[1].endswith("spine2") and s.ack_path[1].endswith("spine1"))
    assert data_spines == {"spine1", "spine2"}  # 8 ports under two seeds use both


def test_a_directory_without_runs_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, says in (([str(tmp_path / "none")], "not a directory"),
                       ([str(tmp_path)], "no repetition with background flows")):
        with pytest.raises(SystemExit):
            main(argv)
        assert says in capsys.readouterr().err
