"""How fast the controller notices a failed switch or link and routes around it, and how long a restart takes
(docs/faults.md, "Recovery in the switches").

On a 2x2 leaf-spine fabric (unshaped links, the switch-to-switch ones patched as a run with a link fault patches
them: gradswitch/net/patch_links.py), a paced UDP flow from h1 to h3 is hashed through spine1; its
receiver writes each packet's sequence number with the time it arrived. Each round:

- spine1's process killed (Testbed.crash_switch): `detect` (until the controller's switch-down event),
  `reroute` (until its rerouted event: every live switch written), `gap` (the flow's longest silence from the kill
  on: what the flow lost);
- spine1 restarted (Testbed.restart_switch): `restart` (process start to pipeline, entries and routes written);
- leaf1-spine1 cut in its patch (Testbed.set_link): `detect`, `reroute`, `gap` as above, from the cut;
- and up again: `detect` (link-up event) and `back` (until spine1 counts the flow's packets again).

Every time is from the fault's call to the event's `at` (time.monotonic(), one clock for every namespace).
Needs root and BMv2; writes bench/results/switch-faults.json.

    python -m bench.switch_faults [--rounds 5] [--rate 200] [--bmv2 PATH]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import NO_ENGINE, Limits, MachineMeter, bmv2_option, save, use_bmv2
from gradswitch.control.health import HealthEvent, HealthKind
from gradswitch.control.routing import ecmp_member
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.protocol.polling import wait_until
from gradswitch.topology.generators import leafspine
from gradswitch.topology.model import Topology
from gradswitch.version import code_version

RATE_PPS = 200  # the watched flow: one packet every 5 ms
DPORT = 7000
IP_PROTO_UDP = 17

SENDER = textwrap.dedent("""
    import socket, struct, sys, time
    dst, sport, dport, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("", sport))
    seq, t0 = 0, time.monotonic()
    while True:
        try:
            s.sendto(struct.pack("!Q", seq) + bytes(100), (dst, dport))
        except OSError:
            pass
        seq += 1
        wait = t0 + seq / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the sender's pace, not a synchronisation
""")
RECEIVER = textwrap.dedent("""
    import socket, struct, sys, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("", int(sys.argv[1])))
    with open(sys.argv[2], "w") as out:
        while True:
            data = s.recv(2048)
            out.write(f"{struct.unpack('!Q', data[:8])[0]} {time.monotonic()}\\n")
            out.flush()
""")


@dataclass
class Flow:
    """A paced UDP flow from one host to another and what its receiver has seen."""

    log: Path
    procs: list[Any]
    rate_pps: float

    def arrivals(self) -> list[tuple[int, float]]:
        out = []
        for line in (self.log.read_text().splitlines() if self.log.exists() else []):
            parts = line.split()
            if len(parts) == 2:
                out.append((int(parts[0]), float(parts[1])))
        return out

    def count(self) -> int:
        return len(self.arrivals())

    def wait_for(self, more: int, timeout: float = 20.0) -> None:
        """Until `more` packets have arrived beyond those seen now."""
        target = self.count() + more
        wait_until(lambda: self.count() >= target, timeout, what=f"{more} more packets of the flow")

    def longest_gap(self, after: float) -> float:
        """The longest time between two arrivals from `after` (the fault) on, counting from `after` itself."""
        times = [after] + [t for _, t in self.arrivals() if t >= after]
        return max(b - a for a, b in itertools.pairwise(times)) if len(times) > 1 else float("inf")

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait(timeout=10)


def port_towards(topo: Topology, switch: str, peer: str) -> int:
    return topo.ports_between(switch, peer)[0]


def source_port_through(topo: Topology, src: str, dst: str, spine: str) -> int:
    """A UDP source port whose flow the source's leaf hashes onto its uplink to `spine` (the plain ECMP hash)."""
    leaf, _ = topo.attachment(src)
    uplinks = sorted(port for port, _, _ in topo.switch_neighbors(leaf))
    want = uplinks.index(port_towards(topo, leaf, spine))
    for sport in range(20000, 21000):
        if ecmp_member(topo.host(src).ip, topo.host(dst).ip, IP_PROTO_UDP, sport, DPORT, len(uplinks)) == want:
            return sport
    raise RuntimeError(f"no source port hashes onto {spine}")


def start_flow(net: Testbed, src: str, dst: str, spine: str, log: Path, rate_pps: float = RATE_PPS) -> Flow:
    """A flow from src to dst hashed through `spine`, once its first packets have arrived."""
    sport = source_port_through(net.topo, src, dst, spine)
    receiver = net.host(dst).popen([sys.executable, "-c", RECEIVER, str(DPORT), str(log)])
    wait_until(lambda: f":{DPORT}" in net.host(dst).cmd("ss -lun"), 10, what="the flow's receiver")
    sender = net.host(src).popen([sys.executable, "-c", SENDER, net.topo.host(dst).ip, str(sport), str(DPORT),
                                  str(rate_pps)])
    flow = Flow(log, [sender, receiver], rate_pps)
    flow.wait_for(20)
    return flow


def rx_through(net: Testbed, switch: str, port: int) -> int:
    """Packets a switch has received on a port (since its start)."""
    return {p.port: p.rx_packets for p in net.fabric.port_stats(switch)}[port]


@dataclass
class HealthLog:
    """The controller's HealthEvents as they arrive (ControlPlane.subscribe)."""

    seen: list[HealthEvent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, event: HealthEvent) -> None:
        with self.lock:
            self.seen.append(event)

    def first(self, kind: HealthKind, target: str | None = None, after: float = 0.0, timeout: float = 10.0
              ) -> HealthEvent:
        def find() -> HealthEvent | None:
            with self.lock:
                return next((e for e in self.seen if e.kind == kind and e.at >= after
                             and (target is None or e.target == target)), None)

        found = wait_until(find, timeout, what=f"a {kind} event" + (f" for {target}" if target else ""))
        assert found is not None
        return found


def watch_health(net: Testbed) -> HealthLog:
    assert net.control is not None, "the network is not running"
    log = HealthLog()
    net.control.subscribe(log.add)
    return log


Round = dict[str, float]


def one_round(net: Testbed, flow: Flow, health: HealthLog) -> Round:
    """One switch crash and restart, one uplink down and up; seconds of each step (see the module's text)."""
    topo, out = net.topo, {}
    spine_in = port_towards(topo, "spine1", "leaf1")
    settle = int(flow.rate_pps * 0.3)  # 0.3 s of packets after a fault: the gap is over
    t = time.monotonic()
    net.crash_switch("spine1")
    out["switch_detect_s"] = health.first(HealthKind.SWITCH_DOWN, "spine1", t).at - t
    out["switch_reroute_s"] = health.first(HealthKind.REROUTED, "spine1", t).at - t
    flow.wait_for(settle)
    out["switch_gap_s"] = flow.longest_gap(t)
    t = time.monotonic()
    net.restart_switch("spine1")
    out["restart_s"] = time.monotonic() - t
    wait_until(lambda: rx_through(net, "spine1", spine_in) >= 10, 10, what="the flow through spine1 again")
    t = net.set_link("leaf1", "spine1", up=False).at  # from the cut
    out["link_detect_s"] = health.first(HealthKind.LINK_DOWN, "leaf1-spine1", t).at - t
    out["link_reroute_s"] = health.first(HealthKind.REROUTED, "leaf1-spine1", t).at - t
    flow.wait_for(settle)
    out["link_gap_s"] = flow.longest_gap(t)
    before = rx_through(net, "spine1", spine_in)
    t = net.set_link("leaf1", "spine1", up=True).at
    out["link_up_detect_s"] = health.first(HealthKind.LINK_UP, "leaf1-spine1", t).at - t
    wait_until(lambda: rx_through(net, "spine1", spine_in) > before, 10, what="the flow over leaf1-spine1 again")
    out["link_back_s"] = time.monotonic() - t
    return out


def summary(rounds: list[Round]) -> dict[str, dict[str, float]]:
    return {key: {"median": statistics.median(r[key] for r in rounds), "min": min(r[key] for r in rounds),
                  "max": max(r[key] for r in rounds)} for key in rounds[0]}


def measure(rounds: int, rate_pps: float) -> dict[str, Any]:
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
    with tempfile.TemporaryDirectory(prefix="gs-switch-faults-") as tmp, \
            Testbed(topo, NetworkOptions(run_dir=Path(tmp) / "net", patch_links=True)) as net:
        health = watch_health(net)
        flow = start_flow(net, "h1", "h3", "spine1", Path(tmp) / "flow.log", rate_pps)
        try:
            with MachineMeter() as machine:
                samples = [one_round(net, flow, health) for _ in range(rounds)]
        finally:
            flow.stop()
    limits = Limits(None, machine.cpu_idle, "unshaped veths")
    print(limits.line())
    return {"code_version": code_version(), "topology": "leafspine 2x2, 2 hosts per leaf, unshaped",
            "flow": {"from": "h1", "to": "h3", "through": "spine1", "rate_pps": rate_pps},
            "rounds": rounds, "summary": summary(samples), "samples": samples, **limits.figures()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.switch_faults", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="crash/restart and down/up rounds (default 5)")
    parser.add_argument("--rate", type=float, default=RATE_PPS, help=f"the flow's packets/s (default {RATE_PPS})")
    bmv2_option(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rate <= 0:
        parser.error(f"--rounds {args.rounds} / --rate {args.rate}: give a round or more and a rate above 0")
    use_bmv2(args)
    figures = measure(args.rounds, args.rate)
    for key, s in figures["summary"].items():
        print(f"{key:18} median {s['median'] * 1000:7.1f} ms  [{s['min'] * 1000:.1f}-{s['max'] * 1000:.1f}]")
    print(save("switch-faults", figures, engines=NO_ENGINE))  # a UDP flow: no job
    return 0


if __name__ == "__main__":
    sys.exit(main())
