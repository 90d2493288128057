"""The controller of a whole topology: one P4Runtime session per switch, all driven at once.

`Fabric` holds the sessions and the generic switch API: entries, counters, ports, drops,
packet I/O, fault injection. Features with state of their own build on it
(controller/netreduce_jobs.py, controller/dlcp_settings.py); controller/control_plane.py
puts them together for the REPL, in process (inside `gradswitch net`) or through the control
socket of a running network (`gradswitch repl`, controller/control_socket.py): every write to
a switch goes through the one primary session this object holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from controller.controls import all_base_entries, fault_injection, port_counters
from controller.controls.port_counters import PortStats
from controller.p4rt import (
    CONTROLLER_ELECTION_ID,
    CounterValue,
    Entity,
    MulticastGroup,
    P4Info,
    PacketIn,
    SwitchAddress,
    SwitchError,
    SwitchSession,
    TableEntry,
)
from controller.p4rt.entities import format_entry, normalize
from controller.p4rt.session import DELETE, INSERT, MODIFY, ElectionId
from mininet_topos.bmv2 import GRPC_BASE_PORT, THRIFT_BASE_PORT, switch_ports
from protocol.paths import BMV2_JSON, P4INFO
from topology.model import Topology

log = logging.getLogger(__name__)
T = TypeVar("T")

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

    # ---- life cycle ----

    def _each(self, fn: Callable[[str], T], names: Iterable[str] | None = None) -> dict[str, T]:
        """Run fn for every switch in parallel; the first failure is raised with its switch named."""
        names = list(names if names is not None else self.addresses)
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(names)))) as pool:
            futures = {name: pool.submit(fn, name) for name in names}
            return {name: fut.result() for name, fut in futures.items()}

    def connect(self, timeout: float = 10.0) -> None:
        def open_one(name: str) -> SwitchSession:
            return SwitchSession(self.addresses[name], self.p4info, self.election_id, timeout=timeout)

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
        for s in self.sessions.values():
            s.close()
        self.sessions = {}

    def __enter__(self) -> Fabric:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the API of the REPL and of the control socket ----

    def switch_names(self) -> list[str]:
        return list(self.addresses)

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
                "primary": bool(sess and sess.is_primary),
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
        stale = [
            e
            for table in {r.table for r in rules}
            for e in sess.read_table(table)
            if (e.table, frozenset(e.match.items())) in keys
        ]
        sess.delete(stale)
        if fraction == 0:
            return []
        sess.insert(rules)
        return rules
