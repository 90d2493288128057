"""TensorLights: priorities among parameter servers colocated on one host, at the host's NIC.

An HTB tree on the host's interface: the link-rate parent, one class per parameter server
(matched with u32 on the UDP source port its QPs use, 0xC000 | job << 8 | node, see
roce.wire.udp_source_port) plus a default class for everything else. Classes differ only
in HTB priority: each is guaranteed 1% of the rate and may borrow the rest, lowest prio
number first. With `rotate`, the favoured server changes every
interval (TensorLights-RR). This kernel has HTB and u32 (no prio qdisc, no netem).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from mininet_topos.shaping import MTU, QUEUE_PACKETS, ShapingError


@dataclass(frozen=True)
class ServerClass:
    node_id: int  # the PS's node id in its job
    job: int


def source_port_match(job: int, node_id: int) -> tuple[int, int]:
    """(value, mask) of the UDP source port of a node's QPs (roce.wire.udp_source_port)."""
    return 0xC000 | (job & 0x3F) << 8 | (node_id & 0xFF), 0xFFFF


class TensorLights:
    """The HTB tree of one host; `install`, `favour`, `start_rotation`, `remove`."""

    def __init__(self, host: Any, intf: str, rate_mbps: float, servers: list[ServerClass]) -> None:
        if len(servers) > 7:
            raise ShapingError("TensorLights here handles at most 7 colocated servers (HTB prio 0..7)")
        self.host = host
        self.intf = intf
        self.rate = rate_mbps
        self.servers = servers
        self.order = list(range(len(servers)))  # order[0] is the favoured server
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rotations = 0

    def _run(self, cmd: str) -> None:
        out = self.host.cmd(f"{cmd} 2>&1; echo rc=$?")
        if not out.rstrip().endswith("rc=0"):
            raise ShapingError(f"{self.host.name}: `{cmd}` failed: {out.strip()}")

    def _class_cmd(self, verb: str, index: int, prio: int) -> str:
        rate = f"{self.rate:g}mbit"
        floor = f"{max(self.rate / 100, 0.01):g}mbit"
        burst = max(MTU + 14, int(self.rate * 1e6 / 8 / 1000))
        return (f"tc class {verb} dev {self.intf} parent 1:1 classid 1:{10 + index} htb rate {floor} ceil {rate} "
                f"prio {prio} burst {burst} cburst {burst} quantum {MTU + 14}")

    def install(self) -> None:
        rate = f"{self.rate:g}mbit"
        self.host.cmd(f"tc qdisc del dev {self.intf} root 2>/dev/null")  # the link's plain shaper
        self._run(f"tc qdisc add dev {self.intf} root handle 1: htb default 99")
        self._run(f"tc class replace dev {self.intf} parent 1: classid 1:1 htb rate {rate} ceil {rate} "
                  f"quantum {MTU + 14}")
        floor = f"{max(self.rate / 100, 0.01):g}mbit"
        self._run(f"tc class replace dev {self.intf} parent 1:1 classid 1:99 htb rate {floor} ceil {rate} prio 7 "
                  f"quantum {MTU + 14}")
        self._run(f"tc qdisc replace dev {self.intf} parent 1:99 handle 99: pfifo limit {QUEUE_PACKETS}")
        for i, s in enumerate(self.servers):
            self._run(self._class_cmd("replace", i, self.order.index(i)))
            self._run(f"tc qdisc replace dev {self.intf} parent 1:{10 + i} handle {10 + i}: "
                      f"pfifo limit {QUEUE_PACKETS}")
            value, mask = source_port_match(s.job, s.node_id)
            self._run(f"tc filter replace dev {self.intf} parent 1: protocol ip prio 1 handle 800::{i + 1:x} "
                      f"u32 match ip protocol 17 0xff match ip sport {value:#x} {mask:#x} flowid 1:{10 + i}")

    def favour(self, first: int) -> None:
        """Make server `first` the highest priority, the others after it in turn."""
        n = len(self.servers)
        self.order = [(first + k) % n for k in range(n)]
        for i in range(n):
            self._run(self._class_cmd("change", i, self.order.index(i)))

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
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.host.cmd(f"tc qdisc del dev {self.intf} root 2>/dev/null")
        if restore_rate:
            from mininet_topos.shaping import shape

            shape(self.host, self.intf, restore_rate)
