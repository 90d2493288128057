"""Controls DlcpClassify / DlcpEgress: per-job features, class -> queue mapping, thresholds, port rates.

The packet class is BTH.resv7 = droppable << 6 | layer class << 3 | magnitude class << 1
(docs/dlcp.md); `marking` builds it for the hosts and `default_classes` maps it to the
8 strict-priority queues: front layers high (large magnitudes one step higher on request),
ACKs at DLCP_ACK_PRIORITY, everything unclassified at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.constants import CONFIG
from controller.p4rt import Entity, TableEntry, Ternary
from controller.topology import Topology

JOBS = "dlcp_jobs"
CLASSES = "dlcp_classes"
PORT_RATES = "dlcp_port_rates"
THRESHOLDS = "dlcp_drop_thresholds"
EVENTS = "dlcp_events"

LAYER_CLASSES = 8
MAGNITUDE_CLASSES = 4


def marking(droppable: bool, layer_class: int, magnitude_class: int) -> int:
    """The 7-bit BTH.resv7 value of a packet's class."""
    if not (0 <= layer_class < LAYER_CLASSES and 0 <= magnitude_class < MAGNITUDE_CLASSES):
        raise ValueError(f"class out of range: layer {layer_class}, magnitude {magnitude_class}")
    return int(droppable) << 6 | layer_class << 3 | magnitude_class << 1


def event_names() -> dict[int, str]:
    return {v: k.removeprefix("DLCP_EV_").lower() for k, v in CONFIG.values.items() if k.startswith("DLCP_EV_")}


@dataclass(frozen=True)
class Features:
    priority: bool = False
    drop: bool = False
    spray: bool = False

    def describe(self) -> str:
        on = [name for name in ("priority", "drop", "spray") if getattr(self, name)]
        return "+".join(on) or "off"


def features_entry(job: int, features: Features) -> TableEntry:
    return TableEntry(JOBS, {"meta.dlcp.job": job}, "set_features", {
        "priority": int(features.priority), "drop": int(features.drop), "spray": int(features.spray)})


def default_classes(job: int, by_magnitude: bool = False) -> list[TableEntry]:
    """Layer class l -> priority max(1, 6 - l): the front layers first.

    With by_magnitude, packets of magnitude class 3 go one step higher too. That is per-packet
    priority within a message, which reorders its packets; the default keeps a message in one
    queue and lets magnitude decide only which packets may be dropped (docs/dlcp.md).
    """
    rules: list[TableEntry] = []
    for layer in range(LAYER_CLASSES):
        base = max(1, 6 - layer)
        rules.append(TableEntry(CLASSES, {"meta.dlcp.job": job, "hdr.bth.resv7": Ternary(layer << 3, 0b0111000)},
                                "set_priority", {"priority": base}, priority=10))
        if by_magnitude:
            rules.append(TableEntry(CLASSES, {"meta.dlcp.job": job,
                                              "hdr.bth.resv7": Ternary(layer << 3 | 3 << 1, 0b0111110)},
                                    "set_priority", {"priority": min(6, base + 1)}, priority=20))
    return rules


def rate_param(mbps: float) -> int:
    """Virtual-queue drain rate in bytes per 1024 us."""
    return max(1, round(mbps * 1e6 / 8 * (1 << CONFIG.DLCP_RATE_SHIFT) / 1e6))


def threshold_entries(thresholds: dict[int, int]) -> list[TableEntry]:
    """Per priority, the virtual-queue bytes above which its droppable packets are dropped."""
    return [TableEntry(THRESHOLDS, {"meta.dlcp.priority": p}, "set_threshold", {"bytes": b})
            for p, b in sorted(thresholds.items())]


def threshold_priority(entry: TableEntry) -> int:
    value = entry.match["meta.dlcp.priority"]
    if not isinstance(value, int):
        raise TypeError(f"{THRESHOLDS}: unexpected match {value!r}")
    return value


def link_rate(topo: Topology, switch: str) -> float | None:
    """The slowest shaped link of a switch (its virtual queues' thresholds are set for it)."""
    rates = [lk.bw_mbps for lk in topo.links_of(switch) if lk.bw_mbps]
    return min(rates) if rates else None


def default_thresholds(mbps: float) -> dict[int, int]:
    """Low priorities (0-2) drop at 10 ms of queue at the link rate (at least 16 KiB), middle ones
    (3-5) at 25 ms (at least 32 KiB), the top two never: well below the ~100 ms (64 KiB at least)
    byte FIFO of a shaped port, and above the bursts BMv2 itself makes (it forwards in batches,
    so a few packets arriving together are not yet congestion)."""
    per_ms = mbps * 1e6 / 8 / 1000
    return {p: max(16 << 10, int(per_ms * 10)) if p < 3 else max(32 << 10, int(per_ms * 25)) for p in range(6)}


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    """Virtual queues on every shaped port of the switch, with default thresholds."""
    rates = {lk.port_of(switch): lk.bw_mbps for lk in topo.links_of(switch) if lk.bw_mbps}
    entries: list[Entity] = [TableEntry(PORT_RATES, {"std_meta.egress_port": port}, "set_rate",
                                        {"bytes_per_1024us": rate_param(mbps)}) for port, mbps in sorted(rates.items())]
    slowest = link_rate(topo, switch)
    if slowest is not None:
        entries += threshold_entries(default_thresholds(slowest))
    return entries
