"""Controls DlcpIngress / DlcpEgress: the RoCE class, per-job features, class -> queue mapping,
thresholds, port rates.

The packet class in BTH.resv7 is gradswitch/protocol/dlcp.py's (docs/dlcp.md): the hosts mark it,
and `default_classes` maps it to the strict-priority queues: front layers high (large
magnitudes one step higher on request), ACKs and trimmed packets at DLCP_ACK_PRIORITY, the
rest at 0, or every RoCE v2 packet at ROCE_CLASS_PRIORITY while the RoCE class is on
(`roce_class_entry`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.control.p4rt import Entity, TableEntry, Ternary
from gradswitch.protocol.dlcp import (
    LAYER_CLASSES,
    MAGNITUDE_CLASSES,
    default_thresholds,
    layer_magnitude_match,
    layer_match,
)
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.topology.model import Topology

ROCE_CLASS = "roce_class"
JOBS = "dlcp_jobs"
CLASSES = "dlcp_classes"
PORT_RATES = "dlcp_port_rates"
THRESHOLDS = "dlcp_drop_thresholds"
EVENTS = "dlcp_events"


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


def check_job(job: int) -> int:
    """A job id the switch keeps DLCP state for (its counters have DLCP_MAX_JOBS blocks)."""
    if not 1 <= job < CONFIG.DLCP_MAX_JOBS:
        raise ValueError(f"DLCP job id {job}: must be 1..{CONFIG.DLCP_MAX_JOBS - 1} (DLCP_MAX_JOBS in config.p4)")
    return job


def roce_class_entry() -> TableEntry:
    """The RoCE class's one entry: every RoCE v2 packet (UDP destination port 4791) at ROCE_CLASS_PRIORITY."""
    return TableEntry(ROCE_CLASS, {"hdr.udp.dst_port": CONFIG.ROCE_V2_UDP_PORT}, "set_roce_class")


def features_entry(job: int, features: Features) -> TableEntry:
    check_job(job)
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
        rules.append(TableEntry(CLASSES, {"meta.dlcp.job": job, "hdr.bth.resv7": Ternary(*layer_match(layer))},
                                "set_priority", {"priority": base}, priority=10))
        if by_magnitude:
            top = layer_magnitude_match(layer, MAGNITUDE_CLASSES - 1)
            rules.append(TableEntry(CLASSES, {"meta.dlcp.job": job, "hdr.bth.resv7": Ternary(*top)},
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


def base_entries(topo: Topology, switch: str) -> list[Entity]:
    """Virtual queues on every shaped port of the switch, with default thresholds."""
    rates = {lk.port_of(switch): lk.bw_mbps for lk in topo.links_of(switch) if lk.bw_mbps}
    entries: list[Entity] = [TableEntry(PORT_RATES, {"std_meta.egress_port": port}, "set_rate",
                                        {"bytes_per_1024us": rate_param(mbps)}) for port, mbps in sorted(rates.items())]
    slowest = topo.slowest_link_mbps(switch)
    if slowest is not None:
        entries += threshold_entries(default_thresholds(slowest))
    return entries
