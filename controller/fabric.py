"""The controller of a whole topology: one P4Runtime session per switch, all driven at once.

`Fabric` is also the API the REPL uses, in process (inside `gradswitch net`) or through
the control socket of a running network (`gradswitch repl`, controller/control_socket.py):
every write to a switch goes through the one primary session this object holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from controller.controls import all_base_entries, dlcp, fault_injection, port_counters
from controller.controls.port_counters import PortStats
from controller.netreduce_jobs import JobManager
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
from mininet_topos.topology import Topology
from protocol.config import CONFIG
from protocol.netreduce import DEFAULT_CREDITS
from protocol.paths import BMV2_JSON, P4INFO

log = logging.getLogger(__name__)
T = TypeVar("T")

GRPC_BASE_PORT = 50051
THRIFT_BASE_PORT = 9090


def switch_addresses(topo: Topology, grpc_base: int = GRPC_BASE_PORT, thrift_base: int = THRIFT_BASE_PORT
                     ) -> dict[str, SwitchAddress]:
    """Loopback gRPC and Thrift ports of every switch, offset by its device id."""
    return {
        s.name: SwitchAddress(s.name, s.device_id, grpc_base + s.device_id, thrift_base + s.device_id)
        for s in topo.switches
    }


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
        self._jobs: JobManager | None = None

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

    # ---- DLCP (controller/controls/dlcp.py) ----

    def dlcp_set(self, job: int, priority: bool | None = None, drop: bool | None = None, spray: bool | None = None,
                 switches: list[str] | None = None) -> str:
        """Switch DLCP's features of a job on or off on every switch (a feature not given keeps its
        state; all off when nothing is given); installs the job's class mapping the first time.
        Returns what is now on."""
        names = switches or self.switch_names()
        current = self._dlcp_features(self.session(names[0]), job)
        if priority is None and drop is None and spray is None:
            features = dlcp.Features()
        else:
            features = dlcp.Features(current.priority if priority is None else priority,
                                     current.drop if drop is None else drop,
                                     current.spray if spray is None else spray)
        entry = dlcp.features_entry(job, features)
        for name in names:
            sess = self.session(name)
            if any(e.match.get("meta.dlcp.job") == job for e in sess.read_table(dlcp.JOBS)):
                sess.modify([entry])
            else:
                sess.insert([entry, *dlcp.default_classes(job)])
        return features.describe()

    def dlcp_thresholds(self, thresholds: dict[int, int] | None = None) -> dict[str, dict[int, int]]:
        """Set the selective-drop thresholds (priority -> virtual-queue bytes) on every switch with
        shaped ports; None restores the defaults for each switch's link rate. Returns what is set."""
        out: dict[str, dict[int, int]] = {}
        for name in self.switch_names():
            rate = dlcp.link_rate(self.topo, name)
            if rate is None:
                continue
            wanted = dlcp.default_thresholds(rate) if thresholds is None else thresholds
            sess = self.session(name)
            installed = {dlcp.threshold_priority(e): e for e in sess.read_table(dlcp.THRESHOLDS)}
            entries = dlcp.threshold_entries(wanted)
            for write, batch in ((sess.modify, [e for e in entries if dlcp.threshold_priority(e) in installed]),
                                 (sess.insert, [e for e in entries if dlcp.threshold_priority(e) not in installed]),
                                 (sess.delete, [e for p, e in installed.items() if p not in wanted])):
                if batch:
                    write(batch)
            out[name] = dict(wanted)
        return out

    def dlcp_thresholds_of(self, switch: str) -> dict[int, int]:
        """The selective-drop thresholds installed on a switch: priority -> bytes."""
        return {dlcp.threshold_priority(e): int(e.params["bytes"])
                for e in self.session(switch).read_table(dlcp.THRESHOLDS)}

    def dlcp_describe(self, job: int) -> str:
        return self._dlcp_features(self.session(self.switch_names()[0]), job).describe()

    def _dlcp_features(self, sess: SwitchSession, job: int) -> dlcp.Features:
        for e in sess.read_table(dlcp.JOBS):
            if e.match.get("meta.dlcp.job") == job:
                return dlcp.Features(*(bool(e.params[k]) for k in ("priority", "drop", "spray")))
        return dlcp.Features()

    def dlcp_events(self, switch: str, job: int) -> dict[str, int]:
        cells = self.read_counter(switch, dlcp.EVENTS)
        base = job * CONFIG.DLCP_EVENTS
        return {name: cells[base + i].packets for i, name in dlcp.event_names().items() if base + i in cells}

    # ---- NetReduce jobs (controller/netreduce_jobs.py) ----

    @property
    def netreduce(self) -> JobManager:
        if self._jobs is None:
            self._jobs = JobManager(self)
        return self._jobs

    def netreduce_create(self, job: int, workers: list[str], credits: int = DEFAULT_CREDITS, spine: str | None = None
                         ) -> dict[str, object]:
        return self.netreduce.create(job, workers, credits, spine)

    def netreduce_status(self, job: int) -> dict[str, object]:
        return self.netreduce.status(job)

    def netreduce_teardown(self, job: int) -> None:
        self.netreduce.teardown(job)

    def netreduce_jobs(self) -> list[dict[str, object]]:
        return [self.netreduce.describe(j) for j in sorted(self.netreduce.jobs)]
