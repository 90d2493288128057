"""An in-memory network for engines in one process: the hub delivers datagrams by IP address.

For tests and simulation without Mininet: every engine gets a `MemoryLink` on a shared
`MemoryHub`; the hub can drop a fraction of the datagrams (seeded) to exercise loss recovery.
"""

from __future__ import annotations

import queue
import random
import threading


class MemoryHub:
    def __init__(self, loss: float = 0.0, seed: int = 0) -> None:
        self.loss = loss
        self._rnd = random.Random(seed)
        self._queues: dict[str, queue.Queue[bytes]] = {}
        self._lock = threading.RLock()
        self.dropped = 0
        self.delivered = 0

    def link(self, ip: str) -> MemoryLink:
        with self._lock:
            self._queues.setdefault(ip, queue.Queue())
        return MemoryLink(self, ip)

    def deliver(self, datagram: bytes, dst_ip: str) -> None:
        with self._lock:
            lost = self.loss > 0 and self._rnd.random() < self.loss
            q = self._queues.get(dst_ip)
            if lost or q is None:
                self.dropped += 1
                return
            self.delivered += 1
        q.put(datagram)

    def queue_of(self, ip: str) -> queue.Queue[bytes]:
        return self._queues[ip]


class MemoryLink:
    def __init__(self, hub: MemoryHub, ip: str) -> None:
        self.hub = hub
        self.ip = ip

    def send(self, datagram: bytes, dst_ip: str) -> None:
        self.hub.deliver(datagram, dst_ip)

    def recv(self, timeout: float) -> bytes | None:
        try:
            if timeout <= 0:
                return self.hub.queue_of(self.ip).get_nowait()
            return self.hub.queue_of(self.ip).get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        pass
