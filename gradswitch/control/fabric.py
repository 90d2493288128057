"""The controller of a whole topology: one P4Runtime session per switch, all driven at once.

`Fabric` holds the sessions and the generic switch API: entries, counters, ports, drops,
packet I/O, fault injection. Features with state of their own build on it
(gradswitch/control/netreduce_jobs.py, gradswitch/control/dlcp_settings.py); gradswitch/control/control_plane.py
puts them together for the REPL, in process (inside `gradswitch net`) or through the control
socket of a running network (`gradswitch repl`, gradswitch/control/control_socket.py): every write to
a switch goes through the one primary session this object holds.

The fabric also keeps its switches running through failures (docs/faults.md, "Recovery in the switches"):
every write is recorded per switch (gradswitch/control/written_entries.py); a switch whose P4Runtime stream ends is
marked down (`is_up`), left out of `switch_names`, and the live switches' routes and ECMP groups are recomputed
around it and rewritten (`reroute`); `restore` gives a restarted switch its pipeline and every entry it held,
then routes go back through it. Links are watched by their ports' carrier (`watch_links`, gradswitch/control/health.py).
A switch that stops answering without dying (its process stopped: the switch-hang fault) keeps its stream open;
the heartbeat (`watch_heartbeat`) notices it: every HEARTBEAT_INTERVAL_S it asks every live switch for its
pipeline's cookie with a deadline of HEARTBEAT_DEADLINE_S, asks again at once after a miss, and names a switch
that missed HEARTBEAT_MISSES in a row hung (`switch-hung`): its session abandoned (every call in flight to it
ended, every later one refused at once), the switch out as a dead one is, routed around. So a switch is named
hung at most HUNG_DETECT_BOUND_S after it stopped answering (docs/faults.md, "A switch that hangs"; the constants:
gradswitch/protocol/heartbeat.py). `released` takes it back once its process goes on: once it has gone through
what it was sent while it was stopped (gradswitch/control/drain.py), its pipeline pushed again and every entry the
controller holds.
What the fabric notices is published on `health` (HealthEvents).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from gradswitch.control.controls import all_base_entries, fault_injection, l3_forwarding, port_counters
from gradswitch.control.controls.port_counters import PortStats
from gradswitch.control.drain import Drained
from gradswitch.control.drain import drain as drain_backlog
from gradswitch.control.health import Health, HealthKind, LinkWatch, WatchedLink, link_name
from gradswitch.control.p4rt import (
    CONTROLLER_ELECTION_ID,
    CounterValue,
    Entity,
    MulticastGroup,
    P4Info,
    PacketIn,
    SwitchAddress,
    SwitchError,
    SwitchSession,
    SwitchUnavailable,
    TableEntry,
)
from gradswitch.control.p4rt.entities import format_entry, normalize
from gradswitch.control.p4rt.session import DELETE, INSERT, MODIFY, ElectionId
from gradswitch.control.routing import NOTHING_OUT, Outage
from gradswitch.control.written_entries import TrackedSession, WrittenEntries, entity_key, same_entity
from gradswitch.net.bmv2 import GRPC_BASE_PORT, THRIFT_BASE_PORT, switch_ports
from gradswitch.protocol.ecmp import Balancing
from gradswitch.protocol.heartbeat import HEARTBEAT_DEADLINE_S, HEARTBEAT_INTERVAL_S, HEARTBEAT_MISSES
from gradswitch.protocol.paths import BMV2_JSON, P4INFO
from gradswitch.topology.model import Topology

log = logging.getLogger(__name__)
T = TypeVar("T")

RELEASE_RETRIES = 3  # a switch let go on: tries at taking it back (its old stream may still hold the election id)

def switch_addresses(topo: Topology, grpc_base: int = GRPC_BASE_PORT, thrift_base: int = THRIFT_BASE_PORT
                     ) -> dict[str, SwitchAddress]:
    """Where every switch of a topology listens (the ports its BMv2 process was given)."""
    out: dict[str, SwitchAddress] = {}
    for s in topo.switches:
        ports = switch_ports(s.device_id, grpc_base, thrift_base)
        out[s.name] = SwitchAddress(s.name, s.device_id, ports.grpc, ports.thrift)
    return out


@dataclass(frozen=True)
class EntryView:
    """An entry as the REPL lists it."""

    switch: str
    entry: TableEntry
    text: str


class Fabric:
    """Sessions with every switch of a topology."""

    def __init__(
        self,
        topo: Topology,
        addresses: dict[str, SwitchAddress] | None = None,
        p4info: P4Info | None = None,
        election_id: ElectionId = CONTROLLER_ELECTION_ID,
    ) -> None:
        self.topo = topo
        self.addresses = addresses if addresses is not None else switch_addresses(topo)
        self.p4info = p4info if p4info is not None else P4Info.from_file(P4INFO)
        self.election_id = election_id
        self.sessions: dict[str, SwitchSession] = {}
        self.written: dict[str, WrittenEntries] = {name: WrittenEntries(self.p4info) for name in self.addresses}
        self.health = Health()
        self.outage: Outage = NOTHING_OUT  # what the controller knows is out now
        self._failover = threading.RLock()  # one change of the outage (and its rerouting) at a time
        self._link_watch: LinkWatch | None = None
        self._heartbeat: threading.Thread | None = None
        self._heartbeat_stop = threading.Event()
        self._released_at: dict[str, float] = {}  # a hung switch let go on: when (time.monotonic())
        self.drained: dict[str, Drained | None] = {}  # a switch's last restore: what it went through first (drain)
        self.missed: dict[str, int] = {}  # per switch: heartbeats missed in a row now
        self._balancing = l3_forwarding.PLAIN  # the last setting seen on the routes (for when none is ECMP)

    # ---- life cycle ----

    def _each(self, fn: Callable[[str], T], names: Iterable[str] | None = None) -> dict[str, T]:
        """Run fn for every switch in parallel; the first failure is raised with its switch named."""
        names = list(names if names is not None else self.addresses)
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(names)))) as pool:
            futures = {name: pool.submit(fn, name) for name in names}
            return {name: fut.result() for name, fut in futures.items()}

    def _open(self, name: str, timeout: float) -> TrackedSession:
        return TrackedSession(self.addresses[name], self.p4info, self.election_id, timeout, self.written[name],
                              self._stream_ended)

    def connect(self, timeout: float = 10.0) -> None:
        def open_one(name: str) -> SwitchSession:
            return self._open(name, timeout)

        try:
            self.sessions = self._each(open_one)
        except BaseException:
            self.close()
            raise

    def push_pipelines(self, p4info_path: Path = P4INFO, json_path: Path = BMV2_JSON, force: bool = False) -> None:
        self._each(lambda n: self.sessions[n].push_pipeline(p4info_path, json_path, force))

    def install_base(self) -> int:
        """Install every control's start-up entries on every switch; returns how many."""
        counts = self._each(lambda n: self._install(n, all_base_entries(self.topo, n)))
        return sum(counts.values())

    def _install(self, switch: str, entities: Sequence[Entity]) -> int:
        self.session(switch).insert(entities)
        return len(entities)

    def start(self, timeout: float = 10.0) -> None:
        """Connect, push the pipeline and install the base entries on every switch."""
        self.connect(timeout)
        self.push_pipelines()
        n = self.install_base()
        log.info("fabric %s: %d switches programmed, %d entries", self.topo.name, len(self.sessions), n)

    def close(self) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=HEARTBEAT_DEADLINE_S + 1.0)
            self._heartbeat = None
        if self._link_watch is not None:
            self._link_watch.stop()
            self._link_watch = None
        for s in self.sessions.values():
            s.close()
        self.sessions = {}

    def __enter__(self) -> Fabric:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the API of the REPL and of the control socket ----

    def switch_names(self) -> list[str]:
        """The switches that are up (a dead one holds nothing to read or set until it is restored)."""
        return [name for name in self.addresses if name not in self.outage.switches]

    def is_up(self, switch: str) -> bool:
        return switch not in self.outage.switches

    def session(self, switch: str) -> SwitchSession:
        try:
            return self.sessions[switch]
        except KeyError:
            known = ", ".join(self.sessions) or "none connected"
            raise SwitchError(switch, f"no such switch in this network ({known})") from None

    def describe_switches(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for name, addr in self.addresses.items():
            sw = self.topo.switch(name)
            sess = self.sessions.get(name)
            out.append({
                "name": name, "role": sw.role, "device_id": addr.device_id, "grpc": addr.grpc_addr,
                "thrift_port": addr.thrift_port, "ports": self.topo.ports_of(name),
                "primary": bool(sess and sess.is_primary), "up": self.is_up(name),
            })
        return out

    def table_names(self) -> list[str]:
        return self.p4info.table_names()

    def read_entries(self, switch: str, table: str) -> list[EntryView]:
        return [EntryView(switch, e, format_entry(self.p4info, e)) for e in self.session(switch).read_table(table)]

    def insert(self, switch: str, entities: Sequence[Entity]) -> None:
        self.session(switch).write([(INSERT, e) for e in entities])

    def modify(self, switch: str, entities: Sequence[Entity]) -> None:
        self.session(switch).write([(MODIFY, e) for e in entities])

    def delete(self, switch: str, entities: Sequence[Entity]) -> None:
        self.session(switch).write([(DELETE, e) for e in entities])

    def normalize(self, entry: TableEntry) -> TableEntry:
        return normalize(self.p4info, entry)

    def read_counter(self, switch: str, counter: str, index: int | None = None) -> dict[int, CounterValue]:
        return self.session(switch).read_counter(counter, index)

    def clear_counter(self, switch: str, counter: str, indices: Iterable[int]) -> None:
        self.session(switch).clear_counter(counter, indices)

    def read_multicast_group(self, switch: str, group_id: int) -> MulticastGroup | None:
        return self.session(switch).read_multicast_group(group_id)

    def port_stats(self, switch: str) -> list[PortStats]:
        return port_counters.port_stats(self.session(switch), self.topo.ports_of(switch))

    def drops(self, switch: str) -> dict[str, int]:
        return port_counters.drops(self.session(switch))

    def packet_out(self, switch: str, payload: bytes, egress_port: int) -> None:
        self.session(switch).send_packet_out(payload, egress_port=egress_port)

    def next_packet_in(self, switch: str, timeout: float = 1.0) -> PacketIn | None:
        return self.session(switch).next_packet_in(timeout)

    def set_port_loss(
        self,
        switch: str,
        port: int,
        fraction: float,
        direction: fault_injection.Direction = "both",
        ip_protocol: int | None = None,
        l4_dst_port: int | None = None,
        corrupt: bool = False,
    ) -> list[TableEntry]:
        """Drop (or corrupt) a fraction of a port's packets (0 removes the rule); returns the rules now installed."""
        rules = fault_injection.loss_entries(port, fraction, direction, ip_protocol, l4_dst_port, corrupt=corrupt)
        keys = {(n.table, frozenset(n.match.items())) for n in map(self.normalize, rules)}
        sess = self.session(switch)
        # A dead switch holds nothing: only the record of what it held loses the rules (restore would give them back).
        held = sess.read_table if self.is_up(switch) else self.written[switch].table
        stale = [
            e
            for table in {r.table for r in rules}
            for e in map(self.normalize, held(table))
            if (e.table, frozenset(e.match.items())) in keys
        ]
        sess.delete(stale)
        if fraction == 0:
            return []
        sess.insert(rules)
        return rules

    # ---- failures: noticed, routed around, restored ----

    def _stream_ended(self, switch: str) -> None:
        """A session's stream ended while open: its switch died (called on that stream's thread)."""
        with self._failover:
            if not self.is_up(switch):
                return
            at = time.monotonic()
            self.outage = self.outage.with_switch(switch, True)
            self.health.publish(HealthKind.SWITCH_DOWN, switch, "its P4Runtime stream ended", at=at)
            self._reroute_after(switch)

    def _reroute_after(self, cause: str) -> None:
        """Reroute on a watcher's thread: a switch that dies meanwhile is rerouted around by its own event."""
        try:
            self.reroute(cause)
        except SwitchError as e:
            log.warning("rerouting after %s failed: %s", cause, e)

    def link_changed(self, a: str, b: str, up: bool) -> None:
        """A link went down or came back (LinkWatch, or a caller that knows): routes follow."""
        with self._failover:
            if (frozenset((a, b)) not in self.outage.links) == up:
                return
            at = time.monotonic()
            self.outage = self.outage.with_link(a, b, not up)
            self.health.publish(HealthKind.LINK_UP if up else HealthKind.LINK_DOWN, link_name(a, b), at=at)
            self._reroute_after(link_name(a, b))

    def watch_links(self, links: Iterable[WatchedLink], interval_s: float = 0.02) -> LinkWatch:
        """Watch the carrier of the links' switch ports on a thread until `close`."""
        if self._link_watch is not None:
            self._link_watch.stop()
        self._link_watch = LinkWatch(links, lambda lk, up: self.link_changed(lk.a, lk.b, up), interval_s).start()
        return self._link_watch

    # ---- the heartbeat: a switch that stops answering ----

    def watch_heartbeat(self, interval_s: float = HEARTBEAT_INTERVAL_S, deadline_s: float = HEARTBEAT_DEADLINE_S,
                        misses: int = HEARTBEAT_MISSES) -> None:
        """Ask every live switch on a thread until `close` (the module's docstring); a switch that missed `misses`
        deadlines in a row is named hung (`hung`)."""
        self._heartbeat_stop.clear()

        def run() -> None:
            pause = interval_s
            while not self._heartbeat_stop.wait(pause):
                try:
                    self.heartbeat_round(deadline_s, misses)
                except Exception:  # the heartbeat goes on whatever one round met
                    log.exception("fabric heartbeat: a round failed")
                pause = 0.0 if any(self.missed.values()) else interval_s

        self._heartbeat = threading.Thread(target=run, name="fabric-heartbeat", daemon=True)
        self._heartbeat.start()

    def heartbeat_round(self, deadline_s: float = HEARTBEAT_DEADLINE_S, misses: int = HEARTBEAT_MISSES) -> list[str]:
        """One round: every live switch asked at once, each answer awaited at most deadline_s; returns the switches
        named hung in it."""
        started = time.monotonic()
        probes: dict[str, Any] = {}
        for name in self.switch_names():
            session = self.sessions.get(name)
            if session is None or getattr(session, "dead", False) or session.abandoned is not None:
                continue
            try:
                probes[name] = session.ping(deadline_s)
            except (SwitchError, ValueError):  # (closed meanwhile: a restore or the end)
                continue
        hung: list[str] = []
        for name, probe in probes.items():
            try:
                probe.result()
                self.missed[name] = 0
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:  # refused, cancelled: a crash's stream says so
                    self.missed[name] = 0
                    continue
                self.missed[name] = self.missed.get(name, 0) + 1
                log.warning("fabric heartbeat: %s did not answer within %.1f s (%d in a row)", name, deadline_s,
                            self.missed[name])
                if self.missed[name] >= misses and self.hung(name, started, misses, deadline_s):
                    hung.append(name)
        return hung

    def hung(self, switch: str, probed_at: float, misses: int = HEARTBEAT_MISSES,
             deadline_s: float = HEARTBEAT_DEADLINE_S) -> bool:
        """Name a switch hung (its last probe went out at probed_at, time.monotonic()): out as a dead one is, its
        session abandoned, the live switches rerouted around it. False: it was out already, or let go on after
        the probe went out."""
        with self._failover:
            if not self.is_up(switch) or self._released_at.get(switch, -1.0) >= probed_at:
                return False
            at = time.monotonic()
            self.outage = self.outage.with_switch(switch, True)
        self.missed[switch] = 0
        why = f"hung: no answer to {misses} heartbeats in a row, each within {deadline_s:g} s"
        session = self.sessions.get(switch)
        if session is not None:
            session.abandon(why)  # every call in flight to it ends now, every later one is refused at once
        with self._failover:
            self.health.publish(HealthKind.SWITCH_HUNG, switch, why, at=at)
            self._reroute_after(switch)
        return True

    def released(self, switch: str, timeout: float = 10.0) -> float | None:
        """A hung switch's process goes on again (SIGCONT): if the controller had named it hung, it is taken back as
        a restarted one is (`restore`, its pipeline pushed again: what it held is replaced by what the controller
        holds for it); returns the seconds that took (None: it had not been named hung, nothing to do)."""
        with self._failover:
            self._released_at[switch] = time.monotonic()
            if self.is_up(switch):
                return None
        for attempt in range(RELEASE_RETRIES):
            try:
                return self.restore(switch, timeout, force=True, drain=True)
            except SwitchUnavailable as e:
                if attempt == RELEASE_RETRIES - 1:
                    raise
                log.warning("switch %s let go on: taking it back failed (%s); again", switch, e)
                time.sleep(0.5)
        return None

    def balancing(self) -> Balancing:
        """How the ECMP groups balance (as the routes the controller wrote say; every switch is the same), or,
        while what is out leaves no ECMP route, as they last did or were last set to."""
        for name in self.switch_names():
            for entry in self.written[name].table(l3_forwarding.ROUTES):
                found = l3_forwarding.balancing_of(self.normalize(entry))
                if found is not None:
                    self._balancing = found
                    return found
        return self._balancing

    def set_balancing(self, balancing: Balancing) -> None:
        """What LoadBalancing.set chose: the routes written when something returns balance so."""
        self._balancing = balancing

    def reroute(self, cause: str) -> int:
        """Recompute the routes and ECMP groups of every live switch around what is out and write what changed
        (new members, then routes, then stale routes and members removed); publishes `rerouted`. Returns how
        many entries were written."""
        with self._failover:
            balancing, outage = self.balancing(), self.outage
            written = self._each(lambda n: self._rewrite_forwarding(n, balancing, outage), self.switch_names())
            total = sum(written.values())
            changed = sorted(n for n, count in written.items() if count)
            self.health.publish(HealthKind.REROUTED, cause, f"out: {outage.describe()}; {total} entries written on "
                                f"{', '.join(changed) or 'no switch'}")
            return total

    def _rewrite_forwarding(self, switch: str, balancing: Balancing, outage: Outage) -> int:
        wanted = l3_forwarding.forwarding_entries(self.topo, switch, balancing, outage)
        record = self.written[switch]
        count = 0
        for table in (l3_forwarding.ECMP_MEMBERS, l3_forwarding.ROUTES):
            held = {entity_key(self.p4info, e): e for e in record.table(table)}
            upserts: list[tuple[int, Entity]] = []
            for entry in (e for e in wanted if e.table == table):
                old = held.get(entity_key(self.p4info, entry))
                if old is None:
                    upserts.append((INSERT, entry))
                elif not same_entity(self.p4info, old, entry):
                    upserts.append((MODIFY, entry))
            self.session(switch).write(upserts)
            count += len(upserts)
        for table in (l3_forwarding.ROUTES, l3_forwarding.ECMP_MEMBERS):
            keep = {entity_key(self.p4info, e) for e in wanted if e.table == table}
            stale: list[tuple[int, Entity]] = [(DELETE, e) for e in record.table(table)
                                               if entity_key(self.p4info, e) not in keep]
            self.session(switch).write(stale)
            count += len(stale)
        return count

    def restore(self, switch: str, timeout: float = 10.0, force: bool = False, drain: bool = False) -> float:
        """A restarted switch (same ports and device id) taken back: a new session, its pipeline, every entry the
        controller held for it, then the routes of every switch through it again. Returns the seconds it took.
        force: the pipeline pushed even where the switch has it (a hung switch let go on: what it held is
        replaced). drain: before that, its pipeline of before goes through every packet it was sent while it was
        stopped (gradswitch/control/drain.py: a packet of before its hang is never taken as new by the pipeline
        pushed now)."""
        if switch not in self.addresses:
            raise SwitchError(switch, f"no such switch in this network ({', '.join(self.addresses)})")
        if self.is_up(switch):
            raise SwitchError(switch, "is up: only a switch that died is restored")
        start = time.monotonic()
        old = self.sessions.get(switch)
        if old is not None:
            old.close()
        session = self._open(switch, timeout)
        self.sessions[switch] = session
        drained = drain_backlog(session) if drain else None
        session.push_pipeline(force=force)
        session.write(self.written[switch].replay())
        if session.dead:
            raise SwitchUnavailable(switch, "died again while it was restored")
        self.drained[switch] = drained
        with self._failover:
            self.outage = self.outage.with_switch(switch, False)
            self.health.publish(HealthKind.SWITCH_UP, switch, f"{len(self.written[switch])} entries pushed again"
                                + ("" if drained is None else f"; {drained.describe()}"))
            self.reroute(switch)
        return time.monotonic() - start
