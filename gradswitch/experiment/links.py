"""What every shaped link carried over a run, from its sender's shaper.

Each direction of a shaped link is limited at its sender (gradswitch/net/shaping.py): a switch's
egress HTB tree in the root namespace, a host's on its eth0. The bytes that shaper SENT (its
root qdisc's counter, read at the go and at the jobs' end) are what the link carried; divided by
what the link's rate carries in that time, its load (at most about 1: HTB lends a burst of about
a millisecond). What a switch program handed to a port (the switches' port counters,
gradswitch/experiment/counters.py) can be more: the shaper drops what its queue cannot hold,
and those packets never crossed the link.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from typing import Any

from gradswitch.net.shaping import SHAPER_STATS_COMMAND, ShaperStats, parse_shaper_stats
from gradswitch.topology.model import Topology


@dataclass(frozen=True)
class Direction:
    """One direction of a shaped link: shaped at the sender's port."""

    sender: str
    receiver: str
    port: int  # the sender's port (a host's: its interface number)
    rate_mbps: float
    kind: str  # "uplink" (edge switch to a switch without hosts), "downlink", "fabric" (other switch pairs),
    # "from-host", "to-host"

    @property
    def name(self) -> str:
        return f"{self.sender}->{self.receiver}"


def _kind(topo: Topology, sender: str, receiver: str, edges: set[str]) -> str:
    if topo.is_host(sender):
        return "from-host"
    if topo.is_host(receiver):
        return "to-host"
    if sender in edges and receiver not in edges:
        return "uplink"
    if receiver in edges and sender not in edges:
        return "downlink"
    return "fabric"


def shaped_directions(topo: Topology) -> list[Direction]:
    """Both directions of every shaped link of the topology."""
    edges = {s.name for s in topo.edge_switches()}
    return [Direction(a, b, port, lk.bw_mbps, _kind(topo, a, b, edges))
            for lk in topo.links if lk.bw_mbps
            for a, port, b in ((lk.a, lk.a_port, lk.b), (lk.b, lk.b_port, lk.a))]


Reading = dict[str, tuple[float, ShaperStats]]  # direction name -> (monotonic time read, its shaper's counters)


def _host_reader(node: Any) -> subprocess.Popen[str]:
    proc: subprocess.Popen[str] = node.popen(list(SHAPER_STATS_COMMAND), stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)
    return proc


def read_shapers(net: Any, directions: list[Direction]) -> Reading:
    """Every direction's shaper counters now: the switches' in one `tc` of the root namespace, each
    host's in its own namespace (all at once). `net`: a running GradNetwork."""
    topo: Topology = net.topo
    readers = {h: _host_reader(net.host(h)) for h in sorted({d.sender for d in directions if topo.is_host(d.sender)})}
    by_node: dict[str, tuple[float, dict[str, ShaperStats]]] = {}
    if any(topo.is_switch(d.sender) for d in directions):
        root = subprocess.run(list(SHAPER_STATS_COMMAND), capture_output=True, text=True, check=True, timeout=30)
        stats = parse_shaper_stats(root.stdout)
        by_node.update({s.name: (time.monotonic(), stats) for s in topo.switches})
    for host, proc in readers.items():
        out, err = proc.communicate(timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(SHAPER_STATS_COMMAND)} on {host} failed: {err.strip()}")
        by_node[host] = (time.monotonic(), parse_shaper_stats(out))
    reading: Reading = {}
    for d in directions:
        when, stats = by_node[d.sender]
        intf = net.host(d.sender).intfs[d.port].name
        if intf in stats:  # a shaped interface always has its HTB root; a missing one is not counted
            reading[d.name] = (when, stats[intf])
    return reading


def usage(directions: list[Direction], before: Reading, after: Reading) -> dict[str, dict[str, Any]]:
    """Per direction, what its link carried between two readings: bytes its shaper sent, packets its
    queues dropped, the time, and the load (sent over what the rate carries in that time)."""
    out: dict[str, dict[str, Any]] = {}
    for d in directions:
        if d.name not in before or d.name not in after:
            continue
        (t0, s0), (t1, s1) = before[d.name], after[d.name]
        seconds = t1 - t0
        sent = s1.sent_bytes - s0.sent_bytes
        out[d.name] = {"kind": d.kind, "rate_mbps": d.rate_mbps, "seconds": seconds, "sent_bytes": sent,
                       "dropped_packets": s1.dropped_packets - s0.dropped_packets,
                       "load": sent * 8 / (seconds * d.rate_mbps * 1e6) if seconds > 0 else None}
    return dict(sorted(out.items()))


@dataclass
class LinkMeter:
    """The shaped links' usage between `start()` (the go) and `stop()` (the jobs' end)."""

    net: Any  # a running GradNetwork
    directions: list[Direction]
    _before: Reading | None = None

    @classmethod
    def of(cls, net: Any) -> LinkMeter:
        return cls(net, shaped_directions(net.topo))

    def start(self) -> None:
        self._before = read_shapers(self.net, self.directions) if self.directions else {}

    def stop(self) -> dict[str, dict[str, Any]]:
        if not self._before:
            return {}
        return usage(self.directions, self._before, read_shapers(self.net, self.directions))
