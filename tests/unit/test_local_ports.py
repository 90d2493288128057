"""A switch's port held by a connection (not a listener) is named or waited for; reservations add and give back.

CI once failed to bring up a leaf-spine: an outgoing connection had been given 127.0.0.1:50052 as its
local port, so leaf2's gRPC bind failed with "Address already in use" and the switch timed out after
30 s, though no one listened there (gradswitch/net/local_ports.py).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gradswitch.net.local_ports import (
    UNASSIGNED_FLOOR,
    EphemeralReservation,
    PortHeldError,
    ephemeral_range,
    format_ports,
    free_ports,
    ledger_of,
    parse_ports,
    port_free,
    release_ports,
    wait_port_free,
)
from gradswitch.protocol.polling import wait_until


def test_reserved_port_values_round_trip() -> None:
    assert parse_ports("") == set()
    assert parse_ports("9090,50051-50053\n") == {9090, 50051, 50052, 50053}
    assert format_ports({50053, 9090, 50051, 50052, 9092}) == "9090,9092,50051-50053"
    assert parse_ports(format_ports({1, 2, 3, 7, 9, 10})) == {1, 2, 3, 7, 9, 10}


def test_a_reservation_gives_back_only_the_ports_it_added(tmp_path: Path) -> None:
    path = tmp_path / "ip_local_reserved_ports"
    path.write_text("50052,60000-60001\n")  # as the kernel prints it; 50052 someone else's
    r = EphemeralReservation((9090, 9091, 50051, 50052), path)
    r.reserve()
    assert parse_ports(path.read_text()) == {9090, 9091, 50051, 50052, 60000, 60001}
    assert r.added == (9090, 9091, 50051)
    r.reserve()  # twice is once
    assert r.added == (9090, 9091, 50051)
    r.release()
    assert parse_ports(path.read_text()) == {50052, 60000, 60001}
    r.release()  # twice is once
    assert parse_ports(path.read_text()) == {50052, 60000, 60001}
    assert release_ports([60001, 7], path) == [60001]  # `gradswitch clean`, from a state file
    assert path.read_text() == "50052,60000\n"


def test_ports_a_killed_run_left_reserved_are_taken_over_by_the_next_network_and_given_back(tmp_path: Path) -> None:
    """A run killed outright in a folder no `gradswitch clean` visits left 9090 and 50051 reserved; the ledger names
    them (and not 50052, someone else's), so the next network gives them back when it stops."""
    path = tmp_path / "ip_local_reserved_ports"
    path.write_text("")
    killed = EphemeralReservation((9090, 50051), path)
    killed.reserve()  # ... and never released
    assert parse_ports(ledger_of(path).read_text()) == {9090, 50051}
    path.write_text(format_ports(parse_ports(path.read_text()) | {50052}) + "\n")  # someone else's
    nxt = EphemeralReservation((9090, 9091, 50051), path)
    nxt.reserve()
    assert nxt.added == (9090, 9091, 50051)
    assert parse_ports(ledger_of(path).read_text()) == {9090, 9091, 50051}
    nxt.release()
    assert path.read_text() == "50052\n"
    assert parse_ports(ledger_of(path).read_text()) == set()
    # `gradswitch clean` gives back what a state file names, and the ledger forgets it too
    again = EphemeralReservation((9090,), path)
    again.reserve()
    assert release_ports([9090], path) == [9090] and parse_ports(ledger_of(path).read_text()) == set()


def test_a_setting_that_cannot_be_written_is_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    r = EphemeralReservation((50051,), tmp_path / "absent" / "ip_local_reserved_ports")
    r.reserve()
    assert r.added == ()
    assert "could not keep the switches' ports out of the ephemeral range" in caplog.text
    r.release()  # nothing to give back


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    yield srv
    srv.close()


def _connect_from(port: int, listener: socket.socket) -> tuple[socket.socket, socket.socket]:
    """A connection whose local port is `port`, as a controller's or probe's may be given by the kernel."""
    client = socket.socket()
    client.bind(("127.0.0.1", port))
    client.connect(listener.getsockname())
    accepted, _ = listener.accept()
    return client, accepted


def test_a_port_an_open_connection_holds_is_refused_at_once_naming_it(listener: socket.socket) -> None:
    (port,) = free_ports(1)
    assert port_free(port, "127.0.0.1") and port_free(port, "0.0.0.0")
    client, accepted = _connect_from(port, listener)
    try:
        assert not port_free(port, "127.0.0.1")
        assert not port_free(port, "0.0.0.0")  # Thrift's every-address bind collides too
        with pytest.raises(PortHeldError, match=rf"^leaf2: port {port} is held by a connection \(ESTAB "
                                                rf"127\.0\.0\.1:{port} -> 127\.0\.0\.1:{listener.getsockname()[1]}"):
            wait_port_free(port, "127.0.0.1", "leaf2", timeout=30)  # at once: not after 30 s
    finally:
        client.close()
        accepted.close()


def test_a_port_in_time_wait_is_waited_for(listener: socket.socket, caplog: pytest.LogCaptureFixture) -> None:
    (port,) = free_ports(1)
    client, accepted = _connect_from(port, listener)
    client.close()  # the side that closes first keeps the port in TIME-WAIT for 60 s
    wait_until(lambda: accepted.recv(1) == b"", 5, what="the close to arrive")
    accepted.close()
    assert not port_free(port, "127.0.0.1")
    with pytest.raises(PortHeldError, match=rf"leaf2: port {port} is still held \(TIME-WAIT .*timed out after 0\.5 s"):
        wait_port_free(port, "127.0.0.1", "leaf2", timeout=0.5)
    assert f"port {port} is held by a closed connection in TIME-WAIT" in caplog.text


def test_a_free_port_returns_at_once() -> None:
    wait_port_free(free_ports(1)[0], "127.0.0.1", "s1", timeout=0)


def test_free_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    """CI failed once when two calls for the kernel's choice of a free port returned the same port, and
    a trace replay's switch was told to listen for gRPC and Thrift on one port."""
    low, high = ephemeral_range()
    assert 1024 <= low <= high <= 65535
    for _ in range(100):
        ports = free_ports(4)
        assert len(set(ports)) == 4
        assert all(UNASSIGNED_FLOOR <= p < low for p in ports), ports  # never a connection's local port
        assert all(port_free(p, "0.0.0.0") for p in ports)


def test_free_ports_skip_a_held_port_and_fall_back_to_the_kernel(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        path = tmp_path / "ip_local_port_range"
        path.write_text(f"{port + 1}\t60999\n")  # a band of one port below the range: the held one
        ports = free_ports(3, path, floor=port)
    assert port not in ports
    assert len(set(ports)) == 3
    low, high = ephemeral_range()
    assert all(low <= p <= high for p in ports), ports  # the kernel's choice, within the real range
