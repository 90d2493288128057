"""Link rate shaping with HTB (this kernel has HTB and TBF, but no netem, prio or red).

Every shaped interface gets an HTB tree under a parent class at the link rate, whose leaf
classes each hold a byte FIFO of about 100 ms at the link rate (a switch-like buffer, not
the thousand jumbo frames a packet limit would allow). Leaf classes differ only in HTB
`prio`: each is guaranteed 1% of the rate and may borrow all of it, and HTB lends to the
lowest prio first, so the classes are served in strict priority within 1%.

- hosts (`shape`): their own RoCE ACKs ahead of their data, as a NIC's responder does;
- switches' egress (`shape_priority`): one class per DSCP class selector, the priority the
  switch program chose (docs/dlcp.md);
- TensorLights builds its own tree of the same kind (gradswitch/net/tensorlights.py).

Both ends of a link are shaped, so each direction is limited at its sender. Loss is never
injected here: that is the switches' fault-injection table.

What a link carried is what its sender's shaper sent: the root HTB qdisc's `Sent` counter (bytes
it dequeued to the interface; what its queues dropped is counted apart), read with
`tc -s -j qdisc show` (`shaper_stats`). What a switch program handed to a port can be more: the
shaper drops what its queue cannot hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.queues import buffer_bytes

MTU = 9000
PRIORITY_CLASSES = CONFIG.PRIORITY_QUEUES  # a switch egress's HTB classes: one per DSCP class selector
# u32 match of a RoCE v2 acknowledgement (IPv4 without options: UDP port at 22, BTH opcode at 28).
ROCE_ACK_MATCH = (f"match ip protocol {CONFIG.IP_PROTO_UDP} 0xff match u16 {CONFIG.ROCE_V2_UDP_PORT} 0xffff at 22 "
                  f"match u8 {CONFIG.ROCE_ACKNOWLEDGE:#x} 0xff at 28")


class ShapingError(RuntimeError):
    pass


def _opts(rate_mbps: float, mtu: int = MTU) -> str:
    burst = max(mtu + 14, int(rate_mbps * 1e6 / 8 / 1000))  # about 1 ms of the rate, at least one frame
    return f"burst {burst} cburst {burst} quantum {mtu + 14}"


def leaf_class(verb: str, intf: str, rate_mbps: float, minor: int, prio: int) -> str:
    """`tc class add|change` of a leaf: 1% of the rate guaranteed, all of it borrowable, HTB prio."""
    floor = f"{max(rate_mbps / 100, 0.01):g}mbit"
    return (f"tc class {verb} dev {intf} parent 1:1 classid 1:{minor} htb rate {floor} ceil {rate_mbps:g}mbit "
            f"prio {prio} {_opts(rate_mbps)}")


def htb_tree(intf: str, rate_mbps: float, classes: dict[int, int], default: int) -> list[str]:
    """tc commands of an HTB tree: parent 1:1 at the rate, leaf class 1:<minor> with HTB prio
    `classes[minor]` and a byte FIFO each, unclassified traffic to 1:<default>."""
    rate = f"{rate_mbps:g}mbit"
    cmds = [
        f"tc qdisc del dev {intf} root",
        f"tc qdisc add dev {intf} root handle 1: htb default {default}",
        f"tc class add dev {intf} parent 1: classid 1:1 htb rate {rate} ceil {rate} {_opts(rate_mbps)}",
    ]
    for minor, prio in sorted(classes.items()):
        cmds += [
            leaf_class("add", intf, rate_mbps, minor, prio),
            f"tc qdisc add dev {intf} parent 1:{minor} handle {minor}: bfifo limit {buffer_bytes(rate_mbps)}",
        ]
    return cmds


# What the kernel charges a queued packet to its sender's socket (its skb's truesize) over its length: at most
# about 4x for the small packets (ACKs) a queue may also hold.
TRUESIZE_FACTOR = 4
MAX_SEND_BUFFER_BYTES = 64 << 20  # (a queue of 8 full classes at over 160 Mb/s would need more: none does)


def switch_send_buffer_bytes(rates_mbps: list[float]) -> int:
    """A send buffer for a switch's packet sockets that the HTB tree behind each never fills: what its eight
    classes hold at the fastest rate, charged as the kernel charges it.

    BMv2 sends each port's packets on a packet socket. Every packet queued in the port's HTB tree stays charged
    to that socket until HTB dequeues it; once the socket's send buffer (net.core.wmem_default: 208 KiB) is
    full, BMv2's send blocks and every packet for the port waits in BMv2's own FIFO, whatever its priority:
    a bulk TCP flow filling its 100 ms class starved the RoCE class above it."""
    fastest = max(rates_mbps, default=0.0)
    return min(MAX_SEND_BUFFER_BYTES, PRIORITY_CLASSES * buffer_bytes(fastest) * TRUESIZE_FACTOR) if fastest else 0


def u32_filter(intf: str, handle: int, match: str, minor: int) -> str:
    return f"tc filter add dev {intf} parent 1: protocol ip prio 1 handle 800::{handle:x} u32 {match} flowid 1:{minor}"


HOST_CLASSES = {10: 1, 11: 0}  # a host's leaf classes (minor: HTB prio): its data, and its RoCE ACKs ahead of it
HOST_ACK_CLASS = 11
# A switch egress's leaf classes: CS p -> class 1:1p, HTB prio 7 - p.
SWITCH_CLASSES = {10 + p: 7 - p for p in range(PRIORITY_CLASSES)}


def htb_commands(intf: str, rate_mbps: float) -> list[str]:
    """A host's shaper: the link rate, with the host's own RoCE ACKs sent ahead of its data.

    A RoCE NIC answers requests from its responder logic, not from the back of its send queue;
    a single FIFO here would hold every ACK behind a window of data (tens of ms at 20 Mb/s) and
    make the peers' retransmission timers fire for nothing.
    """
    return htb_tree(intf, rate_mbps, HOST_CLASSES, default=10) + [u32_filter(intf, 1, ROCE_ACK_MATCH, HOST_ACK_CLASS)]


def priority_commands(intf: str, rate_mbps: float) -> list[str]:
    """A switch egress: one class per DSCP class selector (CS p -> class 1:1p, HTB prio 7-p),
    non-IP traffic and CS0 in priority 0."""
    cmds = htb_tree(intf, rate_mbps, SWITCH_CLASSES, default=10)
    return cmds + [u32_filter(intf, p, f"match ip tos {p << 5:#x} 0xe0", 10 + p) for p in range(1, PRIORITY_CLASSES)]


def rate_commands(intf: str, rate_mbps: float, classes: dict[int, int]) -> list[str]:
    """`tc ... change` of a shaped interface's tree (htb_tree's) to another rate, at run time: the parent class, every
    leaf class (its 1 % floor, its ceiling) and every leaf's byte FIFO (about 100 ms of the new rate). Packets queued
    stay queued; nothing is torn down, so the filters and the priorities stay as they were."""
    rate = f"{rate_mbps:g}mbit"
    cmds = [f"tc class change dev {intf} parent 1: classid 1:1 htb rate {rate} ceil {rate} {_opts(rate_mbps)}"]
    for minor, prio in sorted(classes.items()):
        cmds += [leaf_class("change", intf, rate_mbps, minor, prio),
                 f"tc qdisc change dev {intf} parent 1:{minor} handle {minor}: bfifo limit {buffer_bytes(rate_mbps)}"]
    return cmds


def run(node: Any, cmds: list[str], first_may_fail: bool = True) -> None:
    """Run tc commands on a node; the first (deleting an old root) may fail, the others may not."""
    for i, cmd in enumerate(cmds):
        out = node.cmd(f"{cmd} 2>&1; echo rc=$?")
        if (i or not first_may_fail) and not out.rstrip().endswith("rc=0"):
            raise ShapingError(f"{node.name}: `{cmd}` failed: {out.strip()}")


def shape(node: Any, intf: str, rate_mbps: float) -> None:
    """Limit what a host sends on `intf` to rate_mbps (its ACKs first)."""
    run(node, htb_commands(intf, rate_mbps))


def shape_priority(node: Any, intf: str, rate_mbps: float) -> None:
    """Limit what a switch sends on `intf` to rate_mbps, in strict priority of the DSCP it wrote."""
    run(node, priority_commands(intf, rate_mbps))


def set_rate(node: Any, intf: str, rate_mbps: float, switch: bool, shaped: bool) -> None:
    """Change what `intf` sends to rate_mbps now (`switch`: a switch egress's tree, else a host's); `shaped`: it has
    its tree already (changed in place), else it gets one."""
    if not shaped:
        (shape_priority if switch else shape)(node, intf, rate_mbps)
        return
    run(node, rate_commands(intf, rate_mbps, SWITCH_CLASSES if switch else HOST_CLASSES), first_may_fail=False)


def unshape(node: Any, intf: str) -> None:
    node.cmd(f"tc qdisc del dev {intf} root 2>/dev/null")


# ---- what the shapers sent ----

SHAPER_STATS_COMMAND = ("tc", "-s", "-j", "qdisc", "show")  # every interface of the namespace it runs in


@dataclass(frozen=True)
class ShaperStats:
    """Counters of an interface's root HTB qdisc since it was made."""

    sent_bytes: int  # bytes the shaper put on the link (dequeued to the interface), Ethernet headers included
    sent_packets: int
    dropped_packets: int  # packets its queues dropped (a full FIFO): offered to the link, never carried


def parse_shaper_stats(tc_json: str, dev: str | None = None) -> dict[str, ShaperStats]:
    """Per interface, its root HTB qdisc's counters, from the output of `tc -s -j qdisc show`
    (every interface: each entry names its `dev`) or `... show dev DEV` (give `dev`: the entries
    do not name it). Interfaces without an HTB root (unshaped: noqueue, pfifo_fast) are left out."""
    out: dict[str, ShaperStats] = {}
    for q in json.loads(tc_json or "[]"):
        if q.get("kind") != "htb" or not q.get("root"):
            continue
        name = q.get("dev", dev)
        if name is None:
            raise ValueError("tc output names no interface: give dev")
        out[name] = ShaperStats(int(q["bytes"]), int(q["packets"]), int(q.get("drops", 0)))
    return out
