"""The switches' counters over one run: a snapshot when the workers start, the difference at the end."""

from __future__ import annotations

import time
from typing import Any

from gradswitch.control.fabric import Fabric
from gradswitch.topology.model import Topology

Snapshot = dict[str, Any]


def snapshot(fabric: Fabric, skip: set[str] | frozenset[str] = frozenset()) -> Snapshot:
    """Per switch: drops by reason, and per port [rx packets, tx packets, tx bytes], at a time."""
    return {name: {"drops": fabric.drops(name), "time": time.monotonic(),
                   "ports": {p.port: [p.rx_packets, p.tx_packets, p.tx_bytes] for p in fabric.port_stats(name)}}
            for name in fabric.switch_names() if name not in skip}


def delta(after: Snapshot, before: Snapshot) -> dict[str, Any]:
    """Switch counters of this run only (the network may have carried earlier runs)."""
    out: dict[str, Any] = {}
    for name, a in after.items():
        b = before.get(name, {"drops": {}, "ports": {}, "time": a["time"]})
        drops = {k: v - b["drops"].get(k, 0) for k, v in a["drops"].items() if v - b["drops"].get(k, 0)}
        ports = {p: [x - y for x, y in zip(v, b["ports"].get(p, [0] * len(v)), strict=True)]
                 for p, v in a["ports"].items()}
        out[name] = {"drops": drops, "ports": ports, "seconds": a["time"] - b["time"]}
    return out


def label_ports(switches: dict[str, Any], topo: Topology) -> None:
    """Name what is at the far end of every port (`neighbours`: port -> node), so that loads can be
    read per link (which spine a leaf's uplink goes to) and not only per port."""
    for name, counters in switches.items():
        if topo.is_switch(name):
            counters["neighbours"] = {str(lk.port_of(name)): lk.other(name)[0] for lk in topo.links_of(name)}
