"""The switches' management ports answer this machine only, while the network runs, and nothing is left after.

"Another machine" is a network namespace joined to the root namespace (where the switches and
their Thrift servers live) by a veth: from it, a TCP connect to a switch's Thrift port at the
root namespace's address on that veth must fail, while a listener of our own on every address,
reached the same way, answers (so the path works and the fence is what stops it), and
127.0.0.1 still reaches the switch.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from gradswitch.control.bmv2_thrift import Bmv2Thrift
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.bmv2 import port_open
from gradswitch.net.fence import fence_tables, table_name
from gradswitch.net.network import NetworkOptions
from gradswitch.topology.generators import rack

pytestmark = pytest.mark.mininet

ROOT_IP, OUTSIDE_IP = "198.51.100.1", "198.51.100.2"  # TEST-NET-2: nothing else uses it


@dataclass(frozen=True)
class Outside:
    netns: str

    def connects(self, ip: str, port: int) -> bool:
        """Whether a TCP connect from the namespace to ip:port succeeds (within 3 s)."""
        probe = ("import socket,sys\ns=socket.socket()\ns.settimeout(3)\n"
                 f"sys.exit(s.connect_ex(({ip!r}, {port})) != 0)")
        proc = subprocess.run(["ip", "netns", "exec", self.netns, sys.executable, "-c", probe],
                              capture_output=True, timeout=20)
        return proc.returncode == 0


@contextlib.contextmanager
def another_machine() -> Iterator[Outside]:
    tag = f"gsf{os.getpid() % 100000}"
    ns, root_end, ns_end = f"{tag}ns", f"{tag}r", f"{tag}o"
    try:
        for cmd in (["netns", "add", ns], ["link", "add", root_end, "type", "veth", "peer", "name", ns_end],
                    ["link", "set", ns_end, "netns", ns], ["addr", "add", f"{ROOT_IP}/30", "dev", root_end],
                    ["link", "set", root_end, "up"], ["-n", ns, "addr", "add", f"{OUTSIDE_IP}/30", "dev", ns_end],
                    ["-n", ns, "link", "set", ns_end, "up"], ["-n", ns, "link", "set", "lo", "up"]):
            subprocess.run(["ip", *cmd], check=True, capture_output=True)
        yield Outside(ns)
    finally:
        subprocess.run(["ip", "link", "del", root_end], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_thrift_answers_loopback_only_and_the_fence_goes_with_the_network(tmp_path):
    run_dir = tmp_path / "net"
    with another_machine() as outside, socket.socket() as control:
        control.bind(("0.0.0.0", 0))  # a listener on every address, like BMv2's Thrift server
        control.listen()
        with Testbed(rack(hosts=2), NetworkOptions(run_dir=run_dir)) as net:
            thrift = net.ports["s1"].thrift
            assert port_open(thrift, "127.0.0.1")
            with Bmv2Thrift(thrift, "127.0.0.1") as client:  # the controller's way in still works
                assert client.elapsed_us() > 0
            assert outside.connects(ROOT_IP, control.getsockname()[1]), "the veth path itself does not work"
            assert not outside.connects(ROOT_IP, thrift), f"switch s1's Thrift port {thrift} answers {ROOT_IP}"
            assert not outside.connects(ROOT_IP, net.ports["s1"].grpc)
            assert table_name(run_dir) in fence_tables()
        assert table_name(run_dir) not in fence_tables()

