"""An in-memory network for engines in one process: the hub delivers datagrams by IP address.

For tests and simulation without Mininet: every engine gets a `MemoryLink` on a shared
`MemoryHub`; the hub can drop a fraction of the datagrams (seeded) to exercise loss recovery,
hold datagrams back by a scripted delay (`delay(datagram) -> seconds`) to reorder them the
way strict priorities or per-packet spraying over paths of different delay would, trim
the droppable RoCE packets a rule selects (`trim(datagram) -> bool`) as a DLCP switch over its
drop threshold does (gradswitch/roce/wire.py trim_ipv4), and lose the datagrams a rule selects
(`drop(datagram) -> bool`: a chosen packet, seen every time it passes, resends included).
"""

from __future__ import annotations

import heapq
import itertools
import queue
import random
import threading
import time
from collections.abc import Callable, Collection

from gradswitch.protocol.dlcp import DROPPABLE
from gradswitch.protocol.polling import wait_until
from gradswitch.roce.wire import IPV4_HEADER_LEN, UDP_HEADER_LEN, trim_ipv4

Delay = Callable[[bytes], float]  # seconds a datagram is held before it is delivered (0: at once)
Trim = Callable[[bytes], bool]  # which droppable datagrams a DLCP switch would drop: trimmed instead
Drop = Callable[[bytes], bool]  # which datagrams the hub loses (called for every datagram, under the hub's lock)
RESV7_BYTE = IPV4_HEADER_LEN + UDP_HEADER_LEN + 8  # BTH byte 8: AckReq and resv7
TRIMMED_TOS = 7 << 5  # the class a trimming switch gives its notification (DSCP CS7, DLCP_ACK_PRIORITY)


def droppable(datagram: bytes) -> bool:
    """A RoCE data packet its sender marked droppable (DLCP)."""
    return len(datagram) > RESV7_BYTE and bool(datagram[RESV7_BYTE] & DROPPABLE)


class MemoryHub:
    def __init__(self, loss: float = 0.0, seed: int = 0, delay: Delay | None = None, trim: Trim | None = None,
                 drop: Drop | None = None) -> None:
        self.loss = loss
        self.delay = delay
        self.trim = trim
        self.drop = drop
        self._rnd = random.Random(seed)
        self._queues: dict[str, queue.Queue[bytes]] = {}
        self._held: dict[str, list[tuple[float, int, bytes]]] = {}  # ip -> heap of (due, seq, datagram)
        self._seq = itertools.count()
        self._lock = threading.RLock()
        self.dropped = 0
        self.delivered = 0
        self.delayed = 0
        self.trimmed: list[bytes] = []  # the trimmed datagrams delivered

    def link(self, ip: str) -> MemoryLink:
        with self._lock:
            self._queues.setdefault(ip, queue.Queue())
            self._held.setdefault(ip, [])
        return MemoryLink(self, ip)

    def deliver(self, datagram: bytes, dst_ip: str) -> None:
        with self._lock:
            lost = self.loss > 0 and self._rnd.random() < self.loss
            lost = (self.drop is not None and self.drop(datagram)) or lost
            q = self._queues.get(dst_ip)
            if lost or q is None:
                self.dropped += 1
                return
            self.delivered += 1
            if self.trim is not None and droppable(datagram) and self.trim(datagram):
                datagram = trim_ipv4(datagram, tos=TRIMMED_TOS)
                self.trimmed.append(datagram)
            held = self.delay(datagram) if self.delay is not None else 0.0
            if held > 0:
                self.delayed += 1
                heapq.heappush(self._held[dst_ip], (time.monotonic() + held, next(self._seq), datagram))
                return
        q.put(datagram)

    def release(self, ip: str) -> float | None:
        """Deliver the held datagrams of `ip` that are due; seconds until the next one (None: none held)."""
        with self._lock:
            held = self._held[ip]
            now = time.monotonic()
            while held and held[0][0] <= now:
                self._queues[ip].put(heapq.heappop(held)[2])
            return held[0][0] - now if held else None

    def has_link(self, ip: str) -> bool:
        with self._lock:
            return ip in self._queues

    def queue_of(self, ip: str) -> queue.Queue[bytes]:
        return self._queues[ip]


class MemoryLink:
    def __init__(self, hub: MemoryHub, ip: str) -> None:
        self.hub = hub
        self.ip = ip

    def send(self, datagram: bytes, dst_ip: str) -> None:
        self.hub.deliver(datagram, dst_ip)

    def recv(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            due = self.hub.release(self.ip)
            left = deadline - time.monotonic()
            wait = left if due is None else min(left, due)
            try:
                if wait <= 0:
                    return self.hub.queue_of(self.ip).get_nowait()
                return self.hub.queue_of(self.ip).get(timeout=wait)
            except queue.Empty:
                if time.monotonic() >= deadline:
                    return None

    def resolve(self, peers: Collection[str], timeout: float) -> None:
        """Every peer is known once it has a link on the hub (engines in threads may start in any order)."""
        wait_until(lambda: all(self.hub.has_link(ip) for ip in peers), timeout, interval=0.01,
                   what=f"links for {sorted(peers)} on the hub")

    def close(self) -> None:
        pass
