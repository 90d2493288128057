"""Switch-to-switch links through a patch, so that a link fault can cut them without touching BMv2's ports.

A link between two switches is normally one veth pair, both ends BMv2 ports. Taking either end down stops that
switch's receive loop on every port (BMv2 1.15.5: its pcap read blocks on an interface taken down under it), and
giving the port up first (Thrift port_remove) deadlocks now and then under traffic (gradswitch/experiment/testbed.py). A
patched link is two veth pairs joined by a Linux bridge in the root namespace:

    leaf1-eth3 <-> gpXXXXXXXXa  [bridge gpbrXXXXXXXX]  gpXXXXXXXXb <-> spine1-eth1

Cutting it takes the two patch ends down: both switch ports lose their carrier (the controller's LinkWatch sees
it) while staying up, so BMv2 keeps receiving on every port and needs no port_remove. The bridge adds a kernel
hop per packet, so a network patches its links only when asked (NetworkOptions.patch_links: a run with a link
fault between switches, `gradswitch net --patch-links`).
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from typing import Any


class PatchError(RuntimeError):
    """A patch's interfaces could not be created or set; names them and says why."""


@dataclass(frozen=True)
class Patch:
    """The names of one link's patch (each at most 15 characters, as Linux requires)."""

    a_end: str  # the veth peer of the link's first switch port
    b_end: str  # that of its second
    bridge: str

    @classmethod
    def between(cls, intf1: str, intf2: str) -> Patch:
        tag = hashlib.sha1(f"{intf1}|{intf2}".encode()).hexdigest()[:8]
        return cls(f"gp{tag}a", f"gp{tag}b", f"gpbr{tag}")


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode:
        raise PatchError(f"ip {' '.join(args)}: {result.stderr.strip()}")


def make_patch(intf1: str, intf2: str, mtu: int) -> Patch:
    """The two veth pairs (intf1 and intf2 being the switch ports) and the bridge joining their patch ends, up."""
    patch = Patch.between(intf1, intf2)
    subprocess.run(["ip", "link", "del", patch.bridge], capture_output=True)  # left by a run killed outright
    _ip("link", "add", intf1, "mtu", str(mtu), "type", "veth", "peer", "name", patch.a_end, "mtu", str(mtu))
    _ip("link", "add", intf2, "mtu", str(mtu), "type", "veth", "peer", "name", patch.b_end, "mtu", str(mtu))
    # No STP, no forwarding delay, no learning: two ports, everything goes across; and none of the host's
    # netfilter (br_netfilter would pass every bridged packet through the IP hooks, conntrack included).
    _ip("link", "add", patch.bridge, "mtu", str(mtu), "type", "bridge", "stp_state", "0", "forward_delay", "0",
        "nf_call_iptables", "0", "nf_call_ip6tables", "0", "nf_call_arptables", "0")
    for end in (patch.a_end, patch.b_end):
        _ip("link", "set", end, "master", patch.bridge)
        _ip("link", "set", end, "type", "bridge_slave", "learning", "off")
        _ip("link", "set", end, "up")
    _ip("link", "set", patch.bridge, "up")
    return patch


def set_patch(patch: Patch, up: bool) -> None:
    """Cut the link (both patch ends down: both switch ports lose their carrier) or join it again."""
    for end in (patch.a_end, patch.b_end):
        _ip("link", "set", end, "up" if up else "down")


def remove_patch(patch: Patch) -> None:
    """The bridge (the veth pairs go with their switch ports, which Mininet deletes)."""
    subprocess.run(["ip", "link", "del", patch.bridge], capture_output=True)


def patched_link_class(mtu: int) -> Any:
    """A mininet.link.Link whose pair is patched (both nodes switches, in the root namespace)."""
    from mininet.link import Link

    class PatchedLink(Link):  # type: ignore[misc]  # (Mininet is untyped)
        @classmethod
        def makeIntfPair(cls, intfname1: str, intfname2: str, addr1: str | None = None,
                         addr2: str | None = None, node1: Any = None, node2: Any = None,
                         deleteIntfs: bool = True) -> None:
            make_patch(intfname1, intfname2, mtu)

        def delete(self) -> None:
            patch = Patch.between(self.intf1.name, self.intf2.name)
            super().delete()
            remove_patch(patch)

    return PatchedLink
