"""The link watch's carrier reader on a real veth pair: it keeps each interface's sysfs file open and reads it again
in place, so it must see the carrier go and come back, an interface deleted (down), and one created again under
the same name (up: a fresh file, not the deleted interface's)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from gradswitch.control.health import CarrierReader, LinkWatch, WatchedLink
from gradswitch.protocol.polling import wait_until

pytestmark = [pytest.mark.root]

A, B = "gscarr7-eth1", "gscarr7-eth2"  # names no topology uses


def ip(*args: str) -> None:
    subprocess.run(["ip", "link", *args], check=True, capture_output=True)


def make_pair() -> None:
    ip("add", A, "type", "veth", "peer", "name", B)
    ip("set", A, "up")
    ip("set", B, "up")


@pytest.fixture
def pair() -> Iterator[None]:
    make_pair()
    yield
    subprocess.run(["ip", "link", "del", A], check=False, capture_output=True)


def test_the_reader_follows_the_carrier_of_a_veth_deleted_and_made_again(pair: None) -> None:
    read = CarrierReader()
    try:
        wait_until(lambda: read(A), 5, interval=0.01, what=f"{A} to carry")
        ip("set", B, "down")  # the peer's end down: A loses its carrier, its file (kept open) says so
        wait_until(lambda: not read(A), 5, interval=0.01, what=f"{A} to lose its carrier")
        assert read(B) is False
        ip("set", B, "up")
        wait_until(lambda: read(A), 5, interval=0.01, what=f"{A} to carry again")
        ip("del", A)
        assert read(A) is False and read(B) is False  # gone: down, and the stale files let go
        make_pair()
        wait_until(lambda: read(A), 5, interval=0.01, what=f"{A}, made again, to carry")
        assert read("gscarr7-none") is False
    finally:
        read.close()


def test_the_link_watch_reports_a_real_link_down_and_up(pair: None) -> None:
    changes: list[tuple[str, bool]] = []
    watch = LinkWatch([WatchedLink("sw1", "sw2", (A, B))], lambda lk, up: changes.append((lk.name, up)),
                      interval_s=0.01)
    read = CarrierReader()
    wait_until(lambda: all(read(i) for i in (A, B)), 5, interval=0.01, what="both ends to carry")
    read.close()
    watch.start()
    try:
        ip("set", B, "down")
        wait_until(lambda: changes == [("sw1-sw2", False)], 5, interval=0.01, what="the link reported down")
        ip("set", B, "up")
        wait_until(lambda: changes == [("sw1-sw2", False), ("sw1-sw2", True)], 5, interval=0.01,
                   what="the link reported up again")
    finally:
        watch.stop()
