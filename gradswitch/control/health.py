"""What the controller knows about the health of its fabric, and who it tells.

The controller itself notices a switch that died (its P4Runtime stream ended: gradswitch/control/fabric.py) and a link
that went down (the carrier of a switch port: `LinkWatch` below), routes around what is out and puts it back
when it returns (gradswitch/control/fabric.py, `Fabric.reroute`). Each of these is a `HealthEvent`, handed to every
subscriber (`ControlPlane.subscribe`, or `Fabric.health.subscribe`) on the thread that noticed it: a
subscriber returns quickly and must not write to the fabric from inside the callback.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gradswitch.protocol.choice import Choice

log = logging.getLogger(__name__)


class HealthKind(Choice):
    SWITCH_DOWN = "switch-down"  # its P4Runtime stream ended (the process died)
    SWITCH_HUNG = "switch-hung"  # it stopped answering: its heartbeat missed its deadline (fabric.Heartbeat)
    SWITCH_UP = "switch-up"  # reconnected, its pipeline and every entry the controller holds for it pushed again
    LINK_DOWN = "link-down"  # a port of the link lost its carrier
    LINK_UP = "link-up"  # both ends carry again
    REROUTED = "rerouted"  # routes and ECMP groups of the live switches recomputed and pushed


@dataclass(frozen=True)
class HealthEvent:
    kind: HealthKind
    target: str  # a switch name, a link as "A-B" (the topology's order), or, for rerouted, what caused it
    at: float  # time.monotonic() when the controller noticed it (rerouted: when the last switch was written)
    detail: str = ""

    def describe(self) -> str:
        return f"{self.kind} {self.target}" + (f" ({self.detail})" if self.detail else "")


Subscriber = Callable[[HealthEvent], None]


@dataclass
class Health:
    """The events so far and the subscribers they go to (thread safe)."""

    events: list[HealthEvent] = field(default_factory=list)
    _subscribers: list[Subscriber] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback` with every event from now on; returns a function that unsubscribes it."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def publish(self, kind: HealthKind, target: str, detail: str = "", at: float | None = None) -> HealthEvent:
        event = HealthEvent(kind, target, time.monotonic() if at is None else at, detail)
        with self._lock:
            self.events.append(event)
            subscribers = list(self._subscribers)
        log.log(logging.WARNING if kind in (HealthKind.SWITCH_DOWN, HealthKind.LINK_DOWN) else logging.INFO,
                "fabric health: %s", event.describe())
        for callback in subscribers:
            try:
                callback(event)
            except Exception:  # one subscriber's bug must not stop the others or the controller
                log.exception("health subscriber failed on %s", event.describe())
        return event

    def since(self, at: float) -> list[HealthEvent]:
        with self._lock:
            return [e for e in self.events if e.at >= at]


def link_name(a: str, b: str) -> str:
    """How a link is named in events: its two ends joined by '-' (the fault target's form)."""
    return f"{a}-{b}"


@dataclass(frozen=True)
class WatchedLink:
    """A link and the interfaces of its switch ends in this (the root) namespace."""

    a: str
    b: str
    interfaces: tuple[str, ...]

    @property
    def name(self) -> str:
        return link_name(self.a, self.b)


SYS_NET = Path("/sys/class/net")


class CarrierReader:
    """Whether an interface is up and carries (a veth carries while both of its ends are up), from its
    `operstate` in sysfs. Each interface's file stays open and is read again in place (LinkWatch asks for every
    switch port every 20 ms, on the machine the measured runs share: 1.5 us a read here, against 62 us opening
    the path each time); a read that fails (the interface was deleted) says down and opens the path anew next
    time, which finds an interface created again under the same name."""

    def __init__(self, sys_net: Path = SYS_NET) -> None:
        self.sys_net = sys_net
        self._fds: dict[str, int] = {}

    def __call__(self, interface: str) -> bool:
        fd = self._fds.get(interface)
        try:
            if fd is None:
                fd = self._fds[interface] = os.open(f"{self.sys_net}/{interface}/operstate", os.O_RDONLY)
            return os.pread(fd, 16, 0).strip() == b"up"
        except OSError:  # gone (or never there)
            self._forget(interface)
            return False

    def _forget(self, interface: str) -> None:
        fd = self._fds.pop(interface, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for interface in list(self._fds):
            self._forget(interface)


class LinkWatch:
    """Polls the carrier of every switch port of a set of links on a thread; calls `changed(link, up)` when a
    link goes down (any of its ends stops carrying) or comes back (all carry again)."""

    def __init__(self, links: Iterable[WatchedLink], changed: Callable[[WatchedLink, bool], None],
                 interval_s: float = 0.02, is_up: Callable[[str], bool] | None = None) -> None:
        self.links = [lk for lk in links if lk.interfaces]
        self.changed = changed
        self.interval_s = interval_s
        self._reader: CarrierReader | None = None  # its own reader's sysfs files stay open until stop
        if is_up is None:
            is_up = self._reader = CarrierReader()
        self.is_up = is_up
        self.state = {lk.name: True for lk in self.links}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        """One look at every link (what the thread does every interval)."""
        for lk in self.links:
            up = all(self.is_up(i) for i in lk.interfaces)
            if up != self.state[lk.name]:
                self.state[lk.name] = up
                try:
                    self.changed(lk, up)
                except Exception:
                    log.exception("link %s: handling %s failed", lk.name, "up" if up else "down")

    def start(self) -> LinkWatch:
        self._thread = threading.Thread(target=self._run, name="link-watch", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._reader is not None:
            self._reader.close()
