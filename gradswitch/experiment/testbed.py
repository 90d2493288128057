"""A Mininet network of BMv2 switches with its controller: what `gradswitch net`, the
experiment runner, the benchmarks and the end-to-end tests bring up.

`Testbed` is a `gradswitch.net.network.GradNetwork` whose switches, once running, are
programmed by a fabric controller (pipeline and every control's base entries); on leaving,
the controller's sessions close before the switches stop.

Failures (docs/faults.md, "Recovery in the switches"): `crash_switch` kills a switch's process,
`restart_switch` starts it again and has the controller give it back what it held, `hang_switch`
stops its process (SIGSTOP) and `release_switch` lets it go on (SIGCONT), `set_link` takes a link
down or up. The controller notices each by itself (a switch's P4Runtime stream, its heartbeat, the
carrier of the links' switch ports) and routes around it (gradswitch/control/fabric.py). The
network's stop lets a stopped switch go on before it ends it (gradswitch/net/bmv2.py).
"""

from __future__ import annotations

import logging
import math
import time

from gradswitch.control.bmv2_thrift import Bmv2Thrift, ThriftError
from gradswitch.control.control_plane import ControlPlane
from gradswitch.control.fabric import Fabric, switch_addresses
from gradswitch.control.health import WatchedLink
from gradswitch.net import process_state
from gradswitch.net.network import GradNetwork, LinkChange, NetworkError
from gradswitch.net.patch_links import set_patch
from gradswitch.net.shaping import set_rate

log = logging.getLogger(__name__)

PORT_CALL_TIMEOUT_S = 10.0  # a Thrift port call (port_add)
PORT_REMOVE_S = 2.0  # a port_remove that takes longer has deadlocked (Testbed._give_up_port)


class Testbed(GradNetwork):
    __test__ = False  # not a pytest test class, whatever its name

    control: ControlPlane | None = None
    restart_s: dict[str, float]  # per switch: how long its last restart_switch took

    def programmed(self) -> None:
        self.restart_s = {}
        self._cut: dict[tuple[str, str], tuple[tuple[str, str], int, bool]] = {}  # link: the end set_link took down
        fabric = Fabric(self.topo, switch_addresses(self.topo, self.options.grpc_base, self.options.thrift_base))
        self.control = ControlPlane.over(fabric)
        fabric.start(timeout=self.options.start_timeout)
        fabric.watch_links(self.watched_links())
        fabric.watch_heartbeat()  # a switch that stops answering is named hung (docs/faults.md)

    def watched_links(self) -> list[WatchedLink]:
        """Every link with the interfaces of its switch ends (in the root namespace, where the controller runs)."""
        return [WatchedLink(lk.a, lk.b, tuple(intf for node, intf in self.link_interfaces(lk.a, lk.b)
                                              if self.topo.is_switch(node))) for lk in self.topo.links]

    def set_link(self, a: str, b: str, up: bool) -> LinkChange:
        """A link down (or up again). A patched link (NetworkOptions.patch_links, gradswitch/net/patch_links.py)
        is cut in its patch: both switch ports lose their carrier. Otherwise one end's interface is taken down,
        the other loses its carrier, as a cut cable's would. The controller notices by the switch ports'
        carrier and reroutes. The end taken down is a host's where the link has one, else a dead switch's,
        else the second switch's (b), whose BMv2 first gives the port up (Thrift port_remove; added back once
        it is up): BMv2 stops receiving on every port once an interface goes down under it, but not when one
        loses its carrier. Returns when the interface was set, the moment the link failed or came back
        (LinkChange)."""
        patch = self.patch_of(a, b)
        if patch is not None:  # both switch ports lose (or regain) their carrier; BMv2 is not touched
            at = time.monotonic()
            set_patch(patch, up)
            return LinkChange(at)
        ends = list(zip(self.link_interfaces(a, b), self.topo.ports_between(a, b), strict=True))
        key = (min(a, b), max(a, b))
        if up:
            if key not in self._cut:  # not taken down here: both ends up, whatever they were
                return super().set_link(a, b, up)
            (node, intf), port, removed = self._cut.pop(key)
            changed = LinkChange(time.monotonic())
            self.set_interface(node, intf, True, f"link {a}-{b}")
            if removed and self._switch_node(node).bmv2.alive():  # (else: a restart took the port as it was up)
                with Bmv2Thrift(self.ports[node].thrift, timeout=PORT_CALL_TIMEOUT_S) as thrift:
                    thrift.port_add(intf, port)
            return changed
        hosts = [e for e in ends if not self.topo.is_switch(e[0][0])]
        dead = [e for e in ends if self.topo.is_switch(e[0][0]) and not self._switch_node(e[0][0]).bmv2.alive()]
        (node, intf), port = (hosts or dead or [ends[1]])[0]
        removed = not hosts and not dead
        restarted_at = self._give_up_port(node, port, intf) if removed else None
        changed = LinkChange(time.monotonic()) if restarted_at is None else LinkChange(
            restarted_at, f"{node}'s BMv2 did not give up port {port} within {PORT_REMOVE_S:g} s (its port_remove "
            f"deadlocks now and then under traffic): {node} was restarted with its end of the link down")
        self.set_interface(node, intf, False, f"link {a}-{b}")
        self._cut[key] = ((node, intf), port, removed)
        return changed

    def _give_up_port(self, switch: str, port: int, intf: str) -> float | None:
        """port_remove, which BMv2 can deadlock: it takes the port lock, then waits for its receive thread to
        answer, which may be waiting for that lock (bmi_port.c: more likely the busier the machine). A switch
        that does not answer in PORT_REMOVE_S is restarted with the interface down (the controller gives it
        its entries again; it comes up without the port) and the run's log says so; then returns when it took
        the interface down (None: port_remove answered)."""
        try:
            with Bmv2Thrift(self.ports[switch].thrift, timeout=PORT_REMOVE_S) as thrift:
                thrift.port_remove(port)
            return None
        except ThriftError as e:
            log.warning("switch %s: BMv2 did not give up port %d (%s): its port_remove deadlocked; restarting it "
                        "with %s down", switch, port, e, intf)
            self.kill_switch(switch)
            down = time.monotonic()
            self.set_interface(switch, intf, False, f"{switch}'s port {port}")
            self.restart_switch(switch)
            return down

    def crash_switch(self, name: str) -> None:
        """SIGKILL the switch's BMv2 process; nothing else is touched (its interfaces stay). The controller
        notices by itself (its P4Runtime stream ends) and routes around it."""
        self.kill_switch(name)

    def _running_pid(self, name: str) -> int:
        proc = self._switch_node(name).bmv2
        if proc is None or proc.proc is None or not proc.alive():
            raise NetworkError(f"switch {name} is not running")
        return int(proc.proc.pid)

    def hang_switch(self, name: str) -> None:
        """SIGSTOP the switch's BMv2 process: it forwards nothing and answers nothing (P4Runtime, Thrift) while
        its connections stay open. The controller's heartbeat names it hung (gradswitch/control/fabric.py). Returns
        once the process is stopped."""
        process_state.stop(self._running_pid(name), f"{name}'s BMv2 process")

    def release_switch(self, name: str) -> None:
        """SIGCONT a hung switch's process; if the controller had named it hung it takes it back (its pipeline
        pushed again, every entry it holds for it, routes through it again), as after a restart."""
        started = time.monotonic()
        process_state.resume(self._running_pid(name), f"{name}'s BMv2 process")
        self.fabric.released(name, timeout=self.options.start_timeout)
        self.restart_s[name] = time.monotonic() - started

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
        (gradswitch/net/shaping.py, HTB classes changed in place; a link that had no rate gets its shapers). The
        slow-worker fault's `rate=MBPS` (gradswitch/topology/faults.py)."""
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
