"""A Mininet network of BMv2 switches with its controller: what `gradswitch net`, the
experiment runner, the benchmarks and the end-to-end tests bring up.

`Testbed` is a `mininet_topos.network.GradNetwork` whose switches, once running, are
programmed by a fabric controller (pipeline and every control's base entries); on leaving,
the controller's sessions close before the switches stop.

Failures (docs/faults.md, "Recovery in the switches"): `crash_switch` kills a switch's process,
`restart_switch` starts it again and has the controller give it back what it held, `set_link`
takes a link down or up. The controller notices each by itself (a switch's P4Runtime stream, the
carrier of the links' switch ports) and routes around it (controller/fabric.py).
"""

from __future__ import annotations

import math
import time

from controller.bmv2_thrift import Bmv2Thrift
from controller.control_plane import ControlPlane
from controller.fabric import Fabric, switch_addresses
from controller.health import WatchedLink
from mininet_topos.network import GradNetwork
from mininet_topos.shaping import set_rate

PORT_CALL_TIMEOUT_S = 60.0  # a port_remove waits for BMv2's receive loop to let go of its ports


class Testbed(GradNetwork):
    __test__ = False  # not a pytest test class, whatever its name

    control: ControlPlane | None = None
    restart_s: dict[str, float]  # per switch: how long its last restart_switch took

    def programmed(self) -> None:
        self.restart_s = {}
        fabric = Fabric(self.topo, switch_addresses(self.topo, self.options.grpc_base, self.options.thrift_base))
        self.control = ControlPlane.over(fabric)
        fabric.start(timeout=self.options.start_timeout)
        fabric.watch_links(self.watched_links())

    def watched_links(self) -> list[WatchedLink]:
        """Every link with the interfaces of its switch ends (in the root namespace, where the controller runs)."""
        return [WatchedLink(lk.a, lk.b, tuple(intf for node, intf in self.link_interfaces(lk.a, lk.b)
                                              if self.topo.is_switch(node))) for lk in self.topo.links]

    def set_link(self, a: str, b: str, up: bool) -> float:
        """Both ends of a link down (or up again). A switch end is first taken from its BMv2 process (Thrift
        port_remove; added back after it is up): BMv2 stops receiving on every port once one of its interfaces
        goes down under it. The controller notices by the ports' carrier and reroutes. Returns when the
        interfaces changed (time.monotonic()): the moment the link failed or came back, which port_remove
        (seconds on a loaded machine: BMv2's receive loop holds the port lock while its queue is full)
        precedes."""
        ends = [(node, port, intf) for (node, intf), port in zip(self.link_interfaces(a, b),
                                                                 self.topo.ports_between(a, b), strict=True)
                if self.topo.is_switch(node)]
        running = [(node, port, intf) for node, port, intf in ends if self._switch_node(node).bmv2.alive()]
        if not up:
            for node, port, _ in running:  # a crashed switch has no port to give up (restart_switch sees to it)
                with Bmv2Thrift(self.ports[node].thrift, timeout=PORT_CALL_TIMEOUT_S) as thrift:
                    thrift.port_remove(port)
        changed = super().set_link(a, b, up)
        if up:
            for node, port, intf in running:
                with Bmv2Thrift(self.ports[node].thrift, timeout=PORT_CALL_TIMEOUT_S) as thrift:
                    thrift.port_add(intf, port)
        return changed

    def crash_switch(self, name: str) -> None:
        """SIGKILL the switch's BMv2 process; nothing else is touched (its interfaces stay). The controller
        notices by itself (its P4Runtime stream ends) and routes around it."""
        self.kill_switch(name)

    def restart_switch(self, name: str) -> None:
        """Start a crashed switch again (same ports, device id, interfaces); the controller reconnects, pushes
        its pipeline and every entry it holds for it, and routes through it again. Returns once it forwards
        (every write acknowledged); `restart_s[name]` is how long that took from the process's start."""
        started = time.monotonic()
        self.start_switch_again(name)  # an interface set_link took down is not taken as a port (BMv2 cannot open
        # it: "Add port operation failed" in its log); set_link's up adds it
        self.fabric.restore(name, timeout=self.options.start_timeout)
        self.restart_s[name] = time.monotonic() - started

    def unprogrammed(self) -> None:
        if self.control is not None:
            self.control.fabric.close()
            self.control = None

    @property
    def fabric(self) -> Fabric:
        """The fabric controller (while the network runs)."""
        if self.control is None:
            raise RuntimeError("the network is not running")
        return self.control.fabric

    def set_link_rate(self, host: str, mbps: float) -> None:
        """Cut (or give back) a host's link to `mbps`, both directions, now: the host's shaper and its switch port's
        (mininet_topos/shaping.py, HTB classes changed in place; a link that had no rate gets its shapers). The
        slow-worker fault's `rate=MBPS` (topology/faults.py)."""
        if not (math.isfinite(mbps) and mbps > 0):
            raise ValueError(f"link rate {mbps} Mb/s: a rate above 0 Mb/s")
        if self.net is None:
            raise RuntimeError("the network is not running")
        links = list(self.topo.links_of(host))
        if self.topo.is_switch(host) or len(links) != 1:
            raise ValueError(f"{host} is not a host with one link (hosts: "
                             f"{', '.join(h.name for h in self.topo.hosts)})")
        lk = links[0]
        for name, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
            node = self.net.get(name)
            set_rate(node, node.intfs[port].name, mbps, switch=self.topo.is_switch(name), shaped=bool(lk.bw_mbps))

    def __enter__(self) -> Testbed:
        self.start()
        return self
