"""Two network namespaces joined by one veth pair: the transport without any switch.

For the transport benchmark (bench/transport.py, the "direct" side of its ratio) and the
raw-socket tests. Namespaces and veths are removed on exit, also after an error.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Side:
    netns: str
    ifname: str
    ip: str

    def command(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def veth_pair(prefix: str = "gsv", mtu: int = 9000, rate_mbps: float | None = None) -> Iterator[tuple[Side, Side]]:
    tag = f"{prefix}{os.getpid() % 100000}"
    a = Side(f"{tag}a", "eth0", "10.99.0.1")
    b = Side(f"{tag}b", "eth0", "10.99.0.2")
    try:
        for side in (a, b):
            _ip("netns", "add", side.netns)
        _ip("link", "add", f"{tag}x", "type", "veth", "peer", "name", f"{tag}y")
        for side, dev in ((a, f"{tag}x"), (b, f"{tag}y")):
            _ip("link", "set", dev, "netns", side.netns)
            _ip("-n", side.netns, "link", "set", dev, "name", side.ifname)
            _ip("-n", side.netns, "link", "set", side.ifname, "mtu", str(mtu))
            _ip("-n", side.netns, "addr", "add", f"{side.ip}/24", "dev", side.ifname)
            _ip("-n", side.netns, "link", "set", side.ifname, "up")
            _ip("-n", side.netns, "link", "set", "lo", "up")
            for opt in ("rx", "tx", "sg", "tso", "gso", "gro"):
                subprocess.run(side.command(["ethtool", "-K", side.ifname, opt, "off"]), capture_output=True)
            if rate_mbps:
                from gradswitch.net.shaping import htb_commands

                for i, cmd in enumerate(htb_commands(side.ifname, rate_mbps)):
                    subprocess.run(side.command(cmd.split()), check=i > 0, capture_output=True)
        yield a, b
    finally:
        for side in (a, b):
            subprocess.run(["ip", "netns", "del", side.netns], capture_output=True)
