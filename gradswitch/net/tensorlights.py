"""TensorLights: priorities among parameter servers colocated on one host, at the host's NIC.

An HTB tree on the host's interface: the link-rate parent, the host's RoCE ACKs first (as in
the plain host shaper: a server's ACKs of the pushes it receives must not wait behind the
pulls it sends, or the workers' timers fire), then one class per parameter server (matched
with u32 on the UDP source port its QPs use, see
gradswitch/protocol/qpn.py), then a default class for everything else. Classes differ only
in HTB priority: each is guaranteed 1% of the rate and may borrow the rest, lowest prio
number first. Without rotation the order is fixed (TensorLights-One: one job's pulls at a
time, in turn); with `rotate`, the favoured server changes every interval
(TensorLights-RR). This kernel has HTB and u32 (no prio qdisc, no netem).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from gradswitch.net.shaping import ROCE_ACK_MATCH, ShapingError, htb_tree, leaf_class, run, shape, u32_filter, unshape
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import qpn, udp_source_port


@dataclass(frozen=True)
class ServerClass:
    node_id: int  # the PS's node id in its job
    job: int


def source_port_match(job: int, node_id: int) -> tuple[int, int]:
    """(value, mask) of the UDP source port of a node's QPs (every QP of a node has the same)."""
    return udp_source_port(qpn(node_id, 0, job)), 0xFFFF


class TensorLights:
    """The HTB tree of one host; `install`, `favour`, `start_rotation`, `remove`."""

    DEFAULT = 99  # everything that is not a server's traffic (the workers' own...)
    ACKS = 9  # the host's RoCE acknowledgements, ahead of every server

    def __init__(self, host: Any, intf: str, rate_mbps: float, servers: list[ServerClass]) -> None:
        if len(servers) > 6:
            raise ShapingError("TensorLights here handles at most 6 colocated servers (HTB prio 1..6; 0 is the "
                               "ACKs, 7 the rest)")
        self.host = host
        self.intf = intf
        self.rate = rate_mbps
        self.servers = servers
        self.order = list(range(len(servers)))  # order[0] is the favoured server
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rotations = 0

    def _prios(self) -> dict[int, int]:
        return {10 + i: 1 + self.order.index(i) for i in range(len(self.servers))}

    def install(self) -> None:
        cmds = htb_tree(self.intf, self.rate, {self.ACKS: 0, **self._prios(), self.DEFAULT: 7}, default=self.DEFAULT)
        cmds.append(u32_filter(self.intf, 1, ROCE_ACK_MATCH, self.ACKS))  # handle 1: matched before the servers
        for i, s in enumerate(self.servers):
            value, mask = source_port_match(s.job, s.node_id)
            match = f"match ip protocol {CONFIG.IP_PROTO_UDP} 0xff match ip sport {value:#x} {mask:#x}"
            cmds.append(u32_filter(self.intf, i + 2, match, 10 + i))
        run(self.host, cmds)

    def favour(self, first: int) -> None:
        """Make server `first` the highest priority, the others after it in turn."""
        n = len(self.servers)
        self.order = [(first + k) % n for k in range(n)]
        run(self.host, ["true", *(leaf_class("change", self.intf, self.rate, minor, prio)
                                  for minor, prio in self._prios().items())])

    def start_rotation(self, interval_s: float) -> None:
        def rotate() -> None:
            while not self._stop.wait(interval_s):
                self.favour((self.order[0] + 1) % len(self.servers))
                self.rotations += 1

        self._thread = threading.Thread(target=rotate, name="tensorlights", daemon=True)
        self._thread.start()

    def classes(self) -> str:
        return str(self.host.cmd(f"tc -s class show dev {self.intf}"))

    def remove(self, restore_rate: float | None = None) -> None:
        """Stop rotating and remove the tree; with restore_rate, put the host's plain shaper back."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        unshape(self.host, self.intf)
        if restore_rate:
            shape(self.host, self.intf, restore_rate)
