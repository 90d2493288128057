"""Link rate shaping with HTB (this kernel has HTB and TBF, but no netem, prio or red).

Every shaped interface gets `root htb` with one class at the link rate; its leaf queue is a
plain FIFO (pfifo, `limit` packets). Both ends of a link are shaped, so each direction is
limited at its sender. Loss is never injected here: that is the switches' fault table.
"""

from __future__ import annotations

from typing import Any

QUEUE_PACKETS = 1000
MTU = 9000


class ShapingError(RuntimeError):
    pass


# u32 match of a RoCE v2 acknowledgement (IPv4 without options: UDP port at 22, BTH opcode at 28).
ROCE_ACK_MATCH = "match ip protocol 17 0xff match u16 4791 0xffff at 22 match u8 0x11 0xff at 28"


def htb_commands(intf: str, rate_mbps: float, limit: int = QUEUE_PACKETS, mtu: int = MTU) -> list[str]:
    """A host's shaper: the link rate, with the host's own RoCE ACKs sent ahead of its data.

    A RoCE NIC answers requests from its responder logic, not from the back of its send queue;
    a single FIFO here would hold every ACK behind a window of data (tens of ms at 20 Mb/s) and
    make the peers' retransmission timers fire for nothing.
    """
    rate = f"{rate_mbps:g}mbit"
    floor = f"{max(rate_mbps / 100, 0.01):g}mbit"
    burst = max(mtu + 14, int(rate_mbps * 1e6 / 8 / 1000))  # about 1 ms of the rate, at least one frame
    cls = f"burst {burst} cburst {burst} quantum {mtu + 14}"
    return [
        f"tc qdisc replace dev {intf} root handle 1: htb default 10",
        f"tc class replace dev {intf} parent 1: classid 1:1 htb rate {rate} ceil {rate} {cls}",
        f"tc class replace dev {intf} parent 1:1 classid 1:10 htb rate {floor} ceil {rate} prio 1 {cls}",
        f"tc class replace dev {intf} parent 1:1 classid 1:11 htb rate {floor} ceil {rate} prio 0 {cls}",
        f"tc qdisc replace dev {intf} parent 1:10 handle 10: pfifo limit {limit}",
        f"tc qdisc replace dev {intf} parent 1:11 handle 11: pfifo limit {limit}",
        f"tc filter replace dev {intf} parent 1: protocol ip prio 1 handle 800::1 u32 {ROCE_ACK_MATCH} flowid 1:11",
    ]


def shape(node: Any, intf: str, rate_mbps: float, limit: int = QUEUE_PACKETS) -> None:
    """Limit what `node` sends on `intf` to rate_mbps; raises with tc's message on failure."""
    for cmd in htb_commands(intf, rate_mbps, limit):
        out = node.cmd(f"{cmd} 2>&1; echo rc=$?")
        if not out.rstrip().endswith("rc=0"):
            raise ShapingError(f"{node.name}: `{cmd}` failed: {out.strip()}")


def unshape(node: Any, intf: str) -> None:
    node.cmd(f"tc qdisc del dev {intf} root 2>/dev/null")


def priority_commands(intf: str, rate_mbps: float, limit: int = QUEUE_PACKETS, mtu: int = MTU) -> list[str]:
    """HTB at the link rate with one class per DSCP class selector (the priority the switch chose).

    Each class is guaranteed 1% of the rate and may borrow all of it; HTB lends to the lowest
    `prio` first, so the class of DSCP CS7 (priority 7) is served before CS6 ... before CS0:
    strict priority within 1% (docs/dlcp.md). Non-IP traffic goes to priority 0.
    """
    rate = f"{rate_mbps:g}mbit"
    floor = f"{max(rate_mbps / 100, 0.01):g}mbit"
    burst = max(mtu + 14, int(rate_mbps * 1e6 / 8 / 1000))
    cmds = [
        f"tc qdisc replace dev {intf} root handle 1: htb default 10",
        f"tc class replace dev {intf} parent 1: classid 1:1 htb rate {rate} ceil {rate} burst {burst} "
        f"cburst {burst} quantum {mtu + 14}",
    ]
    for p in range(8):
        cmds += [
            f"tc class replace dev {intf} parent 1:1 classid 1:{10 + p} htb rate {floor} ceil {rate} prio {7 - p} "
            f"burst {burst} cburst {burst} quantum {mtu + 14}",
            f"tc qdisc replace dev {intf} parent 1:{10 + p} handle {10 + p}: pfifo limit {limit}",
        ]
        if p:
            cmds.append(f"tc filter replace dev {intf} parent 1: protocol ip prio 1 handle 800::{p:x} "
                        f"u32 match ip tos {p << 5:#x} 0xe0 flowid 1:{10 + p}")
    return cmds


def shape_priority(node: Any, intf: str, rate_mbps: float, limit: int = QUEUE_PACKETS) -> None:
    for cmd in priority_commands(intf, rate_mbps, limit):
        out = node.cmd(f"{cmd} 2>&1; echo rc=$?")
        if not out.rstrip().endswith("rc=0"):
            raise ShapingError(f"{node.name}: `{cmd}` failed: {out.strip()}")
