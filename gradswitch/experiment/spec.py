"""What an experiment runs, as one typed value, checked before anything starts.

`ExperimentSpec` is what `gradswitch experiment` builds from its options (or from a TOML file of
one run's keys, `--spec`: `load_experiment`) and what every run of `gradswitch compare` builds
from its TOML file (`spec_from_dict`). `problems()` lists every value that cannot run, one line
each naming the value, what is allowed and what to do; the command line and the compare loader
stop on them before any switch starts.

A spec is its name and six sections, one frozen dataclass each, as a spec file groups its keys: NetworkSpec
([network]), WorkloadSpec, AlgorithmSpec, TransportSpec, FaultsSpec, MeasurementSpec; code reads
`spec.network.workers`, `spec.algorithm.algo`. Their fields are the one definition of which key goes where
(SECTIONS lists them); a section checks its own values (its `problems()`), ExperimentSpec what concerns several.
A key's name is unique across the sections, so code builds and changes a spec by the keys' flat names as well:
`ExperimentSpec.of(algo=..., workers=8)`, `spec.but(workers=8)`. A spec file gives a run's keys in their sections
or flat, as before sections; flat_spec reads both and says where a misplaced key belongs. Files keep a spec flat
(spec_dict: every key at its top, the layout from before sections).

A spec runs on BMv2 and Mininet (`backend = "bmv2"`, the testbed) or on the ns-3 simulator
(`backend = "ns3"`, docs/simulator.md): the same fields mean the same on both. The limits of the
P4 program and of the testbed's QP numbers (a ring of 128, 8-bit node ids, 32 NetReduce members,
the jobs and credits the switch holds) are BMv2's; the simulator has wider fields and lifts them.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import sys
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from gradswitch.hosts.ring import MAX_WORKERS as RING_MAX_WORKERS
from gradswitch.protocol.choice import Choice
from gradswitch.protocol.ecmp import DEFAULT_FLOWLET_GAP_US, Balancing, LoadBalance
from gradswitch.protocol.netreduce import DEFAULT_CREDITS, MAX_DEADLINE_US, MAX_K_OF_N_WORKERS
from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import MAX_NODES
from gradswitch.roce.qp import VALID_MTUS, Mode, QpConfig
from gradswitch.topology.faults import (
    WORKER_FAULTS,
    Fault,
    FaultError,
    fault_from_dict,
    fault_problems,
    parse_fault,
)
from gradswitch.topology.generators import build_topology
from gradswitch.topology.model import Topology, TopologyError
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.gradients import compute_profile, workload, workload_names
from gradswitch.workload.job import (
    MAX_IN_FLIGHT,
    Algorithm,
    Crash,
    DType,
    Emulation,
    FloatMode,
    Scheduling,
    Sync,
    dilation,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Ubuntu 22.04's Python 3.10
    import tomli as tomllib


class ExperimentError(RuntimeError):
    """The run failed: names the node and shows the tail of its log."""


class SpecError(ValueError):
    """Values an experiment cannot run with: one line per value, saying what is allowed."""


# `gradswitch experiment` options whose name is not the field's (the others are --<field> with '-' for '_').
CLI_OPTIONS = {"size_bytes": "size", "bw_mbps": "bw", "loss_pct": "loss", "ps_key_bytes": "ps-key", "faults": "fault"}
# `sim` fields and their options (`--check digest`)
SIM_OPTIONS = {"check": "check", "link_delay_us": "link-delay-us", "switch_delay_us": "switch-delay-us",
               "host_delay_us": "host-delay-us", "queue_bytes": "queue-bytes", "shaped_links": "shaped-links"}
# `emulate` fields and their options (`--emulate-link 25 --device v100 --batch 64`)
EMULATE_OPTIONS = {"link_gbps": "emulate-link", "device": "device", "precision": "precision", "batch": "batch",
                   "compute_scale": "compute-scale"}


def named(field_name: str) -> str:
    """How a message names a spec field: as in a TOML spec, with the command-line option if it differs."""
    option = CLI_OPTIONS.get(field_name)
    return f"{field_name} (--{option})" if option else field_name


class Backend(Choice):
    """What runs a spec's jobs."""

    BMV2 = "bmv2"  # the testbed: BMv2 switches and Python hosts in Mininet
    NS3 = "ns3"  # the ns-3 simulator (docs/simulator.md): the same jobs at cluster scale


class Engine(Choice):
    """What runs a job's iterations on the hosts."""

    LOOP = "loop"  # the iteration loop of each algorithm (gradswitch/hosts/main.py)
    GRAPH = "graph"  # the job as an execution graph, on the graph engine (gradswitch/hosts/graph_main.py; train-digits)


class Topo(Choice):
    RACK = "rack"  # one switch, every host on it
    LEAFSPINE = "leafspine"  # leaves and spines, hosts dealt over the leaves
    DUMBBELL = "dumbbell"  # two switches, one link between them
    FATTREE = "fattree"  # ns3: a k-ary fat tree, hosts spread over the pods
    LEAFSPINE3 = "leafspine3"  # ns3: three tiers, pods of leaves and spines under super-spines


SIMULATED_TOPOS = (Topo.FATTREE, Topo.LEAFSPINE3)  # too many switches for BMv2 on one machine
MAX_SIM_JOBS = 1000  # jobs of one simulated run (ids fit the model's 16-bit job field)
MAX_SIM_CREDITS = 4096  # NetReduce credits on the simulator (the P4 program's AGG_MAX_CREDITS is BMv2's)


class Check(Choice):
    """What a simulated run's packets carry and how every result is checked (gradswitch.sim CheckMode)."""

    AUTO = "auto"  # exact while the values fit (gradswitch.sim.sim_settings.EXACT_LIMIT), else digest
    EXACT = "exact"
    DIGEST = "digest"
    NONE = "none"


@dataclass(frozen=True)
class SimOptions:
    """What only the simulator has (backend = ns3; BMv2 runs ignore it, so one table serves a spec run on
    both): the testbed's own costs for cross-validation, the link delay, the queues, the check. In a TOML
    spec `sim = { switch_delay_us = 30, check = "digest" }`."""

    check: Check = Check.AUTO
    link_delay_us: float = 1.0  # propagation delay of every link
    switch_delay_us: float = 0.0  # per packet in a switch (BMv2's cost; bench/testbed_costs.py measures it)
    host_delay_us: float = 0.0  # per received message on a host (the Python hosts'; measured likewise)
    queue_bytes: int | None = None  # every priority queue of a port (None: the testbed's shaped buffer per rate)
    # links as the testbed shapes its veths (an HTB token bucket: a packet reaches the far end as it leaves the
    # shaper, the link then busy for its time), not wires that serialize a packet before the next hop has it
    shaped_links: bool = False

    def problems(self) -> list[str]:
        out = []
        for name in ("link_delay_us", "switch_delay_us", "host_delay_us"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 <= value <= 1e6):
                out.append(f"sim {name} = {value}: 0 to 1000000 microseconds")
        if self.queue_bytes is not None and self.queue_bytes < 1:
            out.append(f"sim queue_bytes = {self.queue_bytes}: at least 1 byte (leave it out: the testbed's buffer)")
        return out


class RingOrder(Choice):
    """Where a ring's neighbours are on a fabric of several edge switches."""

    LEAVES = "leaves"  # neighbours share a leaf where they can: one hop per leaf crosses the fabric (NCCL)
    ALTERNATE = "alternate"  # consecutive ranks on different leaves: every hop crosses the fabric
    RANDOM = "random"  # ranks on hosts drawn at random (seeded by the spec's seed): a scheduler's placement


@dataclass(frozen=True)
class DlcpOptions:
    """DLCP for every job of a run: the switches' features and the hosts' policy.

    In a TOML spec, `dlcp = { priority = true, drop = true, loss_budget = 0.1 }`: the keys are
    this class's switch fields and gradswitch.workload.dlcp.DlcpPolicy's host fields, side by side.
    """

    priority: bool = False  # switches: strict priority by layer class (front layers first)
    drop: bool = False  # hosts mark droppable packets; switches trim them over the threshold, receivers zero-fill
    spray: bool = False  # switches spread a job's packets over every equal-cost path
    threshold_bytes: int | None = None  # selective drop at or over this virtual-queue depth (default: per rate)
    hosts: DlcpPolicy = field(default_factory=DlcpPolicy)  # loss budget, which layers and magnitudes may go

    @property
    def enabled(self) -> bool:
        return self != DlcpOptions()

    @property
    def reorders(self) -> bool:
        """Packets of a job may arrive out of order (priority queues, spraying)."""
        return self.priority or self.spray

    @property
    def lossy(self) -> bool:
        """Receivers may zero-fill droppable packets (trimmed by the switches)."""
        return self.drop

    def host_policy(self) -> DlcpPolicy | None:
        """What the workers do (None: DLCP off)."""
        if not self.enabled:
            return None
        return replace(self.hosts, drop=self.lossy, reorder=self.reorders)


def _failing(*checks: tuple[bool, str]) -> list[str]:
    """The lines of the checks that fail (`(ok, what)` each), in order."""
    return [what for ok, what in checks if not ok]


# ---- a run's sections: one class each ([network], [workload], ...); their fields are the section's keys ----


@dataclass(frozen=True)
class NetworkSpec:
    """[network]: the fabric, its hosts and what runs it."""

    # What runs it: the testbed (BMv2, Mininet) or the ns-3 simulator; the simulator's own settings
    backend: Backend = Backend.BMV2
    topo: Topo = Topo.RACK
    workers: int = 4
    leaves: int = 2  # leafspine
    spines: int = 2
    k: int | None = None  # fattree: its k (None: the smallest even k with k^3/4 >= the hosts)
    pods: int = 2  # leafspine3: pods (leaves and spines per pod: `leaves`, `spines`)
    superspines: int = 2  # leafspine3: super-spines, each linked to every spine
    bw_mbps: float | None = None  # every link shaped to this rate (None: unshaped)
    ring_order: RingOrder = RingOrder.LEAVES  # ranks: neighbours on one leaf, every hop across the fabric, or random
    colocate_servers: bool = False  # every job's parameter servers on one host (TensorLights' setting)
    # How ECMP groups pick a member (per flow by a seeded hash, or per flowlet at random after an idle gap: LetFlow);
    # DLCP spraying overrides both for a spraying job.
    load_balance: LoadBalance = LoadBalance.ECMP
    flowlet_gap_us: int = DEFAULT_FLOWLET_GAP_US
    ecmp_seed: int = 0  # 0: the plain hash of the 5-tuple
    sim: SimOptions = field(default_factory=SimOptions)
    ranks: int = 1  # ns3: MPI ranks the simulator runs on
    hostfile: str | None = None  # ns3 on more than one rank: mpirun's --hostfile (a cluster's machines)

    @property
    def simulated(self) -> bool:
        return self.backend == Backend.NS3

    @property
    def balancing(self) -> Balancing:
        """How the switches' ECMP groups balance during the run."""
        return Balancing(self.load_balance, self.flowlet_gap_us, self.ecmp_seed)

    def topology(self, hosts: int) -> Topology:
        """The topology of this kind with at least `hosts` hosts (TopologyError names a value that cannot build
        one)."""
        if self.topo == Topo.RACK:
            return build_topology("rack", hosts=hosts, bw_mbps=self.bw_mbps)
        if self.topo == Topo.LEAFSPINE:
            return build_topology("leafspine", leaves=self.leaves, spines=self.spines,
                                  hosts_per_leaf=math.ceil(hosts / self.leaves), bw_mbps=self.bw_mbps)
        if self.topo == Topo.FATTREE:
            return build_topology("fattree", hosts=hosts, k=self.k, bw_mbps=self.bw_mbps)
        if self.topo == Topo.LEAFSPINE3:
            return build_topology("leafspine3", pods=self.pods, leaves_per_pod=self.leaves,
                                  spines_per_pod=self.spines, superspines=self.superspines,
                                  hosts_per_leaf=math.ceil(hosts / (self.pods * self.leaves)), bw_mbps=self.bw_mbps)
        return build_topology("dumbbell", hosts_per_side=math.ceil(hosts / 2), bw_mbps=self.bw_mbps)

    def problems(self) -> list[str]:
        """This section's values that cannot run, one line each."""
        sim = self.simulated
        out = _failing(
            (self.workers >= 1, f"workers = {self.workers}: give at least 1 worker"),
            (self.bw_mbps is None or (math.isfinite(self.bw_mbps) and 0 < self.bw_mbps <= 100_000),
             f"{named('bw_mbps')} = {self.bw_mbps} Mb/s: a link rate is above 0 and at most 100000 Mb/s "
             "(leave it out: unshaped)"),
            (self.leaves >= 1 and self.spines >= 1,
             f"leaves = {self.leaves}, spines = {self.spines}: a leaf-spine needs at least 1 of each"),
        )
        out += self.balancing.problems()
        out += _failing(
            (sim or self.topo not in SIMULATED_TOPOS,
             f"topo = {self.topo}: too many switches for BMv2 on one machine; run it on the simulator "
             "(backend = ns3, --backend ns3) or use rack, leafspine or dumbbell"),
            (self.k is None or self.topo == Topo.FATTREE, f"k = {self.k}: only a fat tree has a k (topo = fattree)"),
        )
        out += self.sim.problems()
        out += _failing(
            (self.ranks >= 1, f"ranks = {self.ranks}: at least 1 (one process)"),
            (self.ranks <= 1 or sim, f"ranks = {self.ranks}: MPI ranks are the simulator's (backend = ns3)"),
            (self.hostfile is None or self.ranks > 1,
             f"hostfile = {self.hostfile}: only for a run on more than one MPI rank (give ranks)"),
        )
        return out


@dataclass(frozen=True)
class WorkloadSpec:
    """[workload]: what the jobs exchange or train, how many jobs, and the traffic beside them."""

    workload: str = "synthetic"
    size_bytes: int = 8 << 20  # synthetic workload: bytes of the gradient tensor
    scale: float = 1.0  # model profiles: fraction of every layer's size kept
    dtype: DType = DType.INT32
    float_mode: FloatMode = FloatMode.FIXED  # float32 on the wire: a fixed scale or a shared exponent per block
    # A workload given as Chakra execution traces (DIR/PREFIX: files PREFIX.{rank}.et, docs/workloads.md): its
    # graphs run instead of algo/size/workload; workers = its ranks
    workload_et: str | None = None
    jobs: int = 1  # identical jobs run at once, ids 1..jobs, on their own hosts
    # Training (docs/training.md): the emulated cluster (None: all-reduce every tensor in a row, no computation)
    emulate: Emulation | None = None
    background_flows: int = 0  # bulk TCP streams between two extra hosts on two switches
    # the testbed's streams leave from the simulator's client ports (gradswitch.protocol.background_tcp, + k), so ECMP
    # puts them on the same paths every run and on both backends; false: iperf3's ephemeral ports, new paths every run
    background_fixed_ports: bool = False

    def problems(self) -> list[str]:
        """This section's values that cannot run, one line each."""
        out = _failing(
            (self.size_bytes >= 4,
             f"{named('size_bytes')} = {self.size_bytes} bytes: give at least 4 bytes (one int32), e.g. 8MiB"),
            (self.workload in workload_names(),
             f"workload = {self.workload!r}: not one of {', '.join(workload_names())}"),
            (0.0 < self.scale <= 1.0, f"scale = {self.scale}: a layer-size fraction is 0 < scale <= 1"),
            (self.background_flows >= 0, f"background_flows = {self.background_flows}: 0 or more TCP streams"),
            (not (self.workload == "train-digits" and self.dtype != DType.FLOAT32),
             "workload = 'train-digits' trains a float model: set dtype = float32"),
        )
        if self.workload == "train-digits":
            from gradswitch.workload.digits import DIGITS_EXTRA, digits_available

            out += _failing((digits_available(), f"workload = 'train-digits': {DIGITS_EXTRA}"))
        return out


@dataclass(frozen=True)
class AlgorithmSpec:
    """[algorithm]: how a job reduces its gradients and schedules them."""

    algo: Algorithm = Algorithm.RING
    # What runs the iterations: the graph engine (the job as an execution graph: docs/training.md), or each
    # algorithm's loop (engine = loop; kept until every published figure is re-measured on the graph)
    engine: Engine = Engine.GRAPH
    servers: int = 1  # parameter servers per job (ps only)
    ps_key_bytes: int = 64 << 10  # ps: bytes per key; a step of K keys overlaps key k's pull with k+1's push
    credits: int = DEFAULT_CREDITS  # NetReduce: messages in flight per worker
    # NetReduce k of N: a sum leaves the switch once k workers are in (None: all N; docs/faults.md, "Stragglers")
    netreduce_k: int | None = None
    # ... or once this long has passed since a cell's first contribution, on a member's next packet (None: no deadline)
    netreduce_deadline_ms: float | None = None
    sync: Sync = Sync.ITERATION  # the next forward waits for every gradient, or layer by layer
    scheduling: Scheduling = Scheduling.FIFO  # buckets in backward's order, or front layers first
    bucket_mb: float = 25.0  # fifo: real MiB per bucket (DDP's bucket_cap_mb), times `scale` on the testbed
    partition_mb: float = 4.0  # priority: real MiB per partition, times `scale` on the testbed
    in_flight: int = 4  # reductions a worker has started and not finished, at most
    tensorlights: bool = False  # HTB priorities among the colocated servers at their host's NIC
    tensorlights_rotate_s: float = 0.0  # rotate the favoured server this often (0: fixed)

    @property
    def netreduce_deadline_us(self) -> int:
        """The k-of-N deadline in the switch's microseconds (0: none)."""
        return 0 if self.netreduce_deadline_ms is None else round(self.netreduce_deadline_ms * 1000)

    @property
    def servers_per_job(self) -> int:
        return self.servers if self.algo == Algorithm.PS else 0

    @property
    def k_of_n(self) -> str | None:
        """How a message names the k-of-N setting (None: every sum waits for all N)."""
        if self.netreduce_deadline_ms is not None:
            return f"netreduce_deadline_ms = {self.netreduce_deadline_ms}"
        return None if self.netreduce_k is None else f"netreduce_k = {self.netreduce_k}"

    def problems(self) -> list[str]:
        """This section's values that cannot run, one line each."""
        out = _failing(
            (self.servers >= 1, f"servers = {self.servers}: a parameter-server job needs at least 1 server"),
            (self.ps_key_bytes >= 4 and self.ps_key_bytes % 4 == 0,
             f"{named('ps_key_bytes')} = {self.ps_key_bytes}: a key is a positive multiple of 4 bytes (int32 values)"),
        )
        if self.netreduce_deadline_ms is not None:
            out += _failing((0 < self.netreduce_deadline_ms * 1000 <= MAX_DEADLINE_US,
                             f"netreduce_deadline_ms = {self.netreduce_deadline_ms}: a deadline above 0 and at most "
                             f"{MAX_DEADLINE_US / 1000:g} ms"))
        if self.k_of_n is not None:
            out += _failing((self.algo == Algorithm.NETREDUCE,
                             f"{self.k_of_n}: k of N is NetReduce's (set algo = netreduce)"))
        out += _failing((self.tensorlights_rotate_s >= 0,
                         f"tensorlights_rotate_s = {self.tensorlights_rotate_s}: 0 (fixed) or more seconds"))
        return out

    def training_problems(self) -> list[str]:
        """The training fields' own problems (checked when a run emulates a cluster), one line each."""
        return _failing(
            (math.isfinite(self.bucket_mb) and self.bucket_mb > 0,
             f"{named('bucket_mb')} = {self.bucket_mb}: a bucket of more than 0 MiB (DDP's default is 25)"),
            (math.isfinite(self.partition_mb) and self.partition_mb > 0,
             f"{named('partition_mb')} = {self.partition_mb}: a partition of more than 0 MiB"),
            (1 <= self.in_flight <= MAX_IN_FLIGHT,
             f"{named('in_flight')} = {self.in_flight}: 1 to {MAX_IN_FLIGHT} reductions at once"),
        )


@dataclass(frozen=True)
class TransportSpec:
    """[transport]: how the packets go: RoCE's recovery, packets and windows, their traffic class, DLCP."""

    transport: Mode = Mode.GBN
    # RoCE MTU of ring and PS; by default NetReduce's packet size (it uses nothing else), so that the
    # algorithms are compared on equal terms: the same headers per byte, the same packets per byte for
    # the switches and the Python hosts to handle.
    mtu: int = NETREDUCE_MTU
    window: int = 32  # packets in flight per QP
    # the smallest retransmission timeout, ms (the RTT estimate may raise it); None: from the path
    # (placement.min_rto: a full queue's time and the windows on the link, at least 50 ms)
    min_rto_ms: float | None = None
    # The switches (docs/dlcp.md): every RoCE v2 packet in one strict-priority class above bulk traffic (how RoCE
    # is deployed: the baseline-class run)
    roce_class: bool = False
    dlcp: DlcpOptions = field(default_factory=DlcpOptions)

    def problems(self) -> list[str]:
        """This section's values that cannot run, one line each."""
        rto_max_ms = QpConfig.rto_max * 1000
        return _failing(
            (self.mtu in VALID_MTUS, f"mtu = {self.mtu}: RoCE MTUs are {', '.join(map(str, VALID_MTUS))}"),
            (self.window >= 1, f"window = {self.window}: at least 1 packet in flight"),
            (self.min_rto_ms is None or 0 < self.min_rto_ms <= rto_max_ms,
             f"{named('min_rto_ms')} = {self.min_rto_ms}: a timeout above 0 and at most {rto_max_ms:g} ms (where "
             "timeouts stop doubling); leave it out to have it from the path's queues and windows"),
            (not (self.dlcp.lossy or self.dlcp.spray) or self.transport == Mode.SR,
             "dlcp drop and spray need packets accepted in any order: set transport = sr"),
            (0.0 <= self.dlcp.hosts.loss_budget < 1.0,
             f"dlcp loss_budget = {self.dlcp.hosts.loss_budget}: a fraction 0 <= x < 1"),
            (self.dlcp.threshold_bytes is None or self.dlcp.threshold_bytes >= 0,
             f"dlcp threshold_bytes = {self.dlcp.threshold_bytes}: 0 or more bytes"),
        )


@dataclass(frozen=True)
class FaultsSpec:
    """[faults]: what goes wrong on purpose."""

    # Failures during the run (gradswitch/topology/faults.py, docs/faults.md): a switch, a link or a worker, at a time
    faults: tuple[Fault, ...] = ()
    crash: Crash | None = None  # fault injection: a node dies after an iteration
    loss_pct: float = 0.0  # RoCE packets dropped by the switches on every worker link, both ways

    def problems(self) -> list[str]:
        """This section's values that cannot run, one line each."""
        return _failing((0.0 <= self.loss_pct < 100.0,
                         f"{named('loss_pct')} = {self.loss_pct}: a loss rate is 0 <= percent < 100"))


@dataclass(frozen=True)
class MeasurementSpec:
    """[measurement]: what is measured, and the seed a repetition draws anew."""

    iterations: int = 10
    warmup: int = 1  # iterations left out of the steady-state figures
    seed: int = 1

    def problems(self) -> list[str]:
        """This section's values that cannot run, one line each."""
        return _failing((self.iterations >= 1, f"iterations = {self.iterations}: run at least 1 iteration"))


@dataclass(frozen=True)
class ExperimentSpec:
    """One run: its name and its six sections (SECTIONS: their keys). `ExperimentSpec.of(workers=8, algo=...)` and
    `spec.but(workers=8)` build and change one by its keys' flat names, each placed in its section."""

    name: str = ""
    network: NetworkSpec = field(default_factory=NetworkSpec)
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    algorithm: AlgorithmSpec = field(default_factory=AlgorithmSpec)
    transport: TransportSpec = field(default_factory=TransportSpec)
    faults: FaultsSpec = field(default_factory=FaultsSpec)
    measurement: MeasurementSpec = field(default_factory=MeasurementSpec)

    @classmethod
    def of(cls, **keys: Any) -> ExperimentSpec:
        """A spec from keys by their flat names (`ExperimentSpec.of(algo=Algorithm.PS, workers=8)`), the defaults
        for the rest; TypeError names an unknown key and the nearest known one. The values are taken as given
        (a TOML table's are read and checked by spec_from_dict)."""
        return cls().but(**keys)

    def but(self, **keys: Any) -> ExperimentSpec:
        """This spec with keys by their flat names replaced (`spec.but(workers=8, bw_mbps=20)`), each in its
        section (SECTION_OF); a section's class replaces the section (`spec.but(network=NetworkSpec(...))`).
        TypeError names an unknown key and the nearest known one."""
        own: dict[str, Any] = {}
        by_section: dict[str, dict[str, Any]] = {}
        for key, value in keys.items():
            if key in SECTIONS and isinstance(value, SECTION_CLASSES[key]):
                own[key] = value
            elif key in SECTION_OF:
                by_section.setdefault(SECTION_OF[key], {})[key] = value
            elif key in RUN_KEYS:
                own[key] = value
            else:
                close = nearest_key(key, [*SECTION_OF, *RUN_KEYS], CLI_OPTIONS)
                raise TypeError(f"ExperimentSpec: {key}: no such key" + (f"; did you mean {close}?" if close else ""))
        for section, values in by_section.items():
            own[section] = replace(own.get(section, getattr(self, section)), **values)
        return replace(self, **own)

    def get(self, key: str) -> Any:
        """A key's value by its flat name (a compare spec names keys so: matrix, repeat_varies, baselines_within)."""
        if key in RUN_KEYS:
            return getattr(self, key)
        if key not in SECTION_OF:
            close = nearest_key(key, [*SECTION_OF, *RUN_KEYS], CLI_OPTIONS)
            raise TypeError(f"ExperimentSpec: {key}: no such key" + (f"; did you mean {close}?" if close else ""))
        return getattr(getattr(self, SECTION_OF[key]), key)

    @property
    def label(self) -> str:
        return self.name or f"{self.algorithm.algo}-n{self.network.workers}-{self.network.topo}"

    def hosts_needed(self) -> int:
        net, algorithm, load = self.network, self.algorithm, self.workload
        per_job = algorithm.servers_per_job
        server_hosts = (1 if net.colocate_servers else load.jobs * per_job) if per_job else 0
        return load.jobs * net.workers + server_hosts + (2 if load.background_flows else 0)

    def topology(self) -> Topology:
        """The topology of the spec's kind with enough hosts for everything it runs (TopologyError names a
        value that cannot build one)."""
        return self.network.topology(self.hosts_needed())

    def problems(self) -> list[str]:
        """Every value this spec cannot run with, one line each (empty: it can run): each section's own, then
        what concerns several."""
        net, load, algorithm = self.network, self.workload, self.algorithm
        sim = net.simulated
        on_ns3 = " (the simulator has no such limit: backend = ns3)"
        out = net.problems() + load.problems() + algorithm.problems() + self.transport.problems()
        out += self.faults.problems() + self.measurement.problems()
        per_job = algorithm.servers_per_job
        algo, workers = algorithm.algo, net.workers
        last_job = CONFIG.AGG_MAX_JOBS - 1 if algo == Algorithm.NETREDUCE else CONFIG.DLCP_MAX_JOBS - 1
        if sim:
            last_job = MAX_SIM_JOBS
        most_credits = MAX_SIM_CREDITS if sim else CONFIG.AGG_MAX_CREDITS
        out += _failing(
            (sim or workers <= MAX_NODES - per_job,
             f"workers = {workers}: at most {MAX_NODES - per_job} nodes fit a job's QP numbers" + on_ns3),
            (sim or algo != Algorithm.RING or workers <= RING_MAX_WORKERS,
             f"workers = {workers}: a ring has at most {RING_MAX_WORKERS} workers (its step tags)" + on_ns3),
            (algo != Algorithm.NETREDUCE or workers >= 2, f"workers = {workers}: NetReduce needs at least 2 workers"),
            (sim or algo != Algorithm.NETREDUCE or workers <= CONFIG.AGG_MAX_MEMBERS,
             f"workers = {workers}: NetReduce on BMv2 has at most {CONFIG.AGG_MAX_MEMBERS} workers "
             "(AGG_MAX_MEMBERS)" + on_ns3),
            (self.name == "" or ("/" not in self.name and self.name not in (".", "..")),
             f"name = {self.name!r}: a run name is a directory name (no '/')"),
            (1 <= load.jobs <= last_job, f"jobs = {load.jobs}: give 1..{last_job} jobs"
             + ("" if sim else " (the switch's job tables; the simulator runs more: backend = ns3)")),
            (1 <= algorithm.credits <= most_credits,
             f"credits = {algorithm.credits}: NetReduce credits are 1..{most_credits}"
             + ("" if sim else " (AGG_MAX_CREDITS; the simulator takes more: backend = ns3)")),
        )
        if algorithm.netreduce_k is not None:
            out += _failing((1 <= algorithm.netreduce_k <= workers,
                             f"netreduce_k = {algorithm.netreduce_k}: k is 1..{workers} (the workers)"))
        if (k_of_n := algorithm.k_of_n) is not None:
            out += _failing(
                (workers <= MAX_K_OF_N_WORKERS, f"{k_of_n}: a k-of-N job has at most {MAX_K_OF_N_WORKERS} "
                 f"workers (its results name their contributors in 16 bits), not {workers}"),
                (not sim and net.topo == Topo.RACK, f"{k_of_n}: k of N runs on BMv2 with every worker on one switch "
                 "(backend = bmv2, topo = rack): a leaf cannot tell which k of the job's N are in"),
                (load.workload == "train-digits" and load.float_mode == FloatMode.FIXED,
                 f"{k_of_n}: k of N is for workload = 'train-digits' in fixed point (its loop divides each sum by "
                 "the workers it holds and checks it against exactly those; other loops check against all N)"),
            )
        out += _failing((not algorithm.tensorlights or (algo == Algorithm.PS and net.colocate_servers),
                         "tensorlights = true: TensorLights applies to parameter servers colocated on one host "
                         "(set algo = ps and colocate_servers = true)"))
        out += self.training_problems()
        out += self.engine_problems()
        crash = self.faults.crash
        out += _failing((crash is None or crash.node < workers + per_job,
                         f"crash node {crash.node if crash else ''}: no such node in a job"))
        out += self.backend_problems()
        return out

    def backend_problems(self) -> list[str]:
        """What one backend runs and the other does not, and the topology's own limits, one line each (the
        network section's own: NetworkSpec.problems)."""
        net, load, faults = self.network, self.workload, self.faults.faults
        sim = net.simulated
        out = _failing((not sim or load.workload != "train-digits",
                        "workload = 'train-digits' computes its gradients in Python: it runs on BMv2 only (backend = "
                        "bmv2); on ns-3 its graph runs for timing only, synthetic data in its place (gradswitch "
                        "export-et --workload train-digits, then --workload-et)"))
        if not out and not net.problems() and (sim or net.topo in SIMULATED_TOPOS):
            try:
                self.topology()
            except TopologyError as e:
                out.append(f"topo = {net.topo} for {self.hosts_needed()} hosts: {e}")
        if faults and not out and not net.problems():
            out += fault_problems(faults, self.topology(), net.workers)
        netreduce = self.algorithm.algo == Algorithm.NETREDUCE
        if faults and sim:
            from gradswitch.sim.faults import sim_fault_problems

            out += sim_fault_problems(faults, netreduce, net.ranks, load.workload_et is not None)
        if load.workload_et is not None and not sim:
            for f in faults:
                out += _failing(
                    (f.kind not in WORKER_FAULTS,
                     f"fault {f.label}: an execution-graph run (workload_et) on BMv2 runs switch and link faults, "
                     "not a worker's: leave it out, or run it with the loop or a training workload"),
                    (not netreduce,
                     f"fault {f.label}: an execution-graph run's in-network collectives (algo = netreduce) on BMv2 "
                     "run no faults yet: leave it out, or run the trace with algo = ring"),
                )
        return out

    def engine_problems(self) -> list[str]:
        """What the chosen engine does not run, one line each: the graph engine (the default) runs every workload;
        the loop (engine = loop) does not run a trace."""
        load, algorithm = self.workload, self.algorithm
        if algorithm.engine == Engine.GRAPH:
            return []
        return _failing(
            (load.workload_et is None, "engine = loop with workload_et: a trace always runs on the graph engine; "
             "leave engine out"),
        )

    def training_problems(self) -> list[str]:
        """The training fields' problems, one line each."""
        load, algorithm, measured = self.workload, self.algorithm, self.measurement
        e = load.emulate
        if e is None:
            return _failing((algorithm.sync == Sync.ITERATION and algorithm.scheduling == Scheduling.FIFO,
                             f"sync = {algorithm.sync}, scheduling = {algorithm.scheduling}: these shape a training "
                             "iteration; give emulate = { link_gbps = 25, device = \"v100\", batch = 64 } "
                             "(--emulate-link 25 ...) as well"))
        out: list[str] = []
        compute = compute_profile(load.workload)
        emulated = [m for m in workload_names() if (c := compute_profile(m)) is not None and c.calibrations]
        out += _failing((compute is not None and bool(compute.calibrations),
                         f"workload = {load.workload!r}: no compute model to emulate; use one of "
                         f"{', '.join(emulated)}"))
        if compute is not None and compute.calibrations:
            have = ", ".join(f"{c.device} {c.precision}" for c in compute.calibrations)
            out += _failing((compute.calibration(e.device, e.precision) is not None,
                             f"emulate device = {e.device}, precision = {e.precision}: {load.workload} is calibrated "
                             f"for {have}"))
        out += _failing(
            (self.network.bw_mbps is not None, f"{named('bw_mbps')} = unshaped: emulating a cluster needs shaped "
             "testbed links (the dilation is scale x link_gbps / bw); give bw_mbps"),
            (math.isfinite(e.link_gbps) and 0 < e.link_gbps <= 10_000,
             f"emulate link_gbps = {e.link_gbps} (--emulate-link): a link rate in Gb/s, above 0 and at most 10000"),
            (1 <= e.batch <= 1 << 16, f"emulate batch = {e.batch} (--batch): samples per GPU, 1 to 65536"),
            (math.isfinite(e.compute_scale) and e.compute_scale >= 0,
             f"emulate compute_scale = {e.compute_scale}: 0 (communication only) or more, 1 = the model"),
            (0 <= measured.warmup < measured.iterations,
             f"warmup = {measured.warmup}: 0 to iterations - 1 = {measured.iterations - 1} (some iteration must be "
             "measured)"),
        )
        out += algorithm.training_problems()
        out += _failing((load.workload != "train-digits", "workload = 'train-digits' trains a real model: emulate "
                         "applies to model profiles"))
        return out

    @property
    def dilation(self) -> float | None:
        """D of an emulated cluster (gradswitch.workload.job.dilation), None without one."""
        emulate, bw_mbps = self.workload.emulate, self.network.bw_mbps
        if emulate is None or not bw_mbps:
            return None
        return dilation(self.workload.scale, emulate.link_gbps, bw_mbps)

    def validate(self) -> None:
        """Raise SpecError listing every problem (see `problems`)."""
        problems = self.problems()
        if problems:
            raise SpecError("\n".join(problems))


def step_bytes(spec: ExperimentSpec) -> int:
    """Bytes of gradients one iteration all-reduces."""
    load = spec.workload
    return 4 * workload(load.workload, load.size_bytes, load.scale).elements


# ---- from TOML / dicts ----


def _convert(value: Any, hint: Any, where: str) -> Any:
    """`value` as the type `hint`, or SpecError naming `where`, the value and what is allowed."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        (inner,) = [o for o in options if o is not type(None)]
        return _convert(value, inner, where)
    if hint == tuple[Fault, ...]:
        if not isinstance(value, list | tuple):
            raise SpecError(f"{where} = {value!r}: a list of faults, e.g. [{{ kind = \"switch-crash\", "
                            "target = \"spine1\", at_s = 3 }]")
        try:
            return tuple(v if isinstance(v, Fault) else fault_from_dict(v, f"{where}[{i}]") if isinstance(v, dict)
                         else parse_fault(v) if isinstance(v, str) else fault_from_dict({}, f"{where}[{i}]")
                         for i, v in enumerate(value))
        except FaultError as e:
            raise SpecError(str(e)) from None
    if isinstance(hint, type) and issubclass(hint, Choice):
        if isinstance(value, hint):
            return value
        if isinstance(value, str) and value in hint.names():
            return hint(value)
        raise SpecError(f"{where} = {value!r}: one of {', '.join(hint.names())}")
    if isinstance(hint, type) and is_dataclass(hint):
        if isinstance(value, hint):
            return value
        if not isinstance(value, dict):
            raise SpecError(f"{where} = {value!r}: a table of {', '.join(f.name for f in fields(hint))}")
        return dataclass_from_dict(hint, value, f"{where}.")
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise SpecError(f"{where} = {value!r}: true or false")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise SpecError(f"{where} = {value!r}: a whole number")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise SpecError(f"{where} = {value!r}: a number")
    if hint is str:
        if isinstance(value, str):
            return value
        raise SpecError(f"{where} = {value!r}: a string")
    raise SpecError(f"{where}: cannot read a value of type {hint}")  # pragma: no cover - a new field type


def dataclass_from_dict(cls: Any, raw: dict[str, Any], where: str = "", base: Any = None) -> Any:
    """An instance of dataclass `cls` from a TOML table, `base`'s values for what it leaves out.

    DlcpOptions takes DlcpPolicy's fields flat beside its own (`dlcp = { drop = true, loss_budget = 0.1 }`).
    """
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    raw = dict(raw)
    if cls is DlcpOptions:
        host_fields = {f.name for f in fields(DlcpPolicy)} - {"drop", "reorder"}  # those two follow the features
        flat = {k: raw.pop(k) for k in list(raw) if k in host_fields}
        if flat:
            current = base.hosts if base is not None else DlcpPolicy()
            raw["hosts"] = dataclass_from_dict(DlcpPolicy, flat, where, current)
    unknown = sorted(set(raw) - set(names))
    if unknown:
        known = table_keys(cls)
        lines = []
        for u in unknown:
            close = nearest_key(u, known)
            lines.append(f"{where}{u}: no such key; " + (f"did you mean {close}?" if close else
                                                          f"{where.rstrip('.') or 'a run'} has {', '.join(known)}"))
        raise SpecError("\n".join(lines))
    values = {k: _convert(v, DlcpPolicy, f"{where}{k}") if k == "hosts" and cls is DlcpOptions
              else _convert(v, hints[k], f"{where}{k}") for k, v in raw.items()}  # hosts: a saved spec's (spec_dict)
    if base is not None:
        return replace(base, **values)
    missing = [f.name for f in fields(cls) if f.name not in values and f.default is MISSING
               and f.default_factory is MISSING]
    if missing:
        raise SpecError(f"{where.rstrip('.')}: give {', '.join(missing)}")
    return cls(**values)


def table_keys(cls: Any) -> list[str]:
    """The keys a TOML table of dataclass `cls` takes (DlcpOptions: its own and DlcpPolicy's host fields, flat)."""
    names = [f.name for f in fields(cls)]
    if cls is DlcpOptions:
        return [n for n in names if n != "hosts"] + sorted({f.name for f in fields(DlcpPolicy)} - {"drop", "reorder"})
    return names


# ---- sections: where each key of a run goes ----

# A run's keys, section by section: a spec file gives them under [network], [workload], ... (a compare spec under
# [defaults.network], [[runs]] `network.workers = 8`, ...) or flat, at the top of the run, as before sections (the
# same names). The one definition of which key goes where is ExperimentSpec's: each of its sections is a field
# (NetworkSpec, WorkloadSpec, ...) whose class's fields are that section's keys; the parser, its error lines,
# ExperimentSpec.of/but and docs/specs.md's tables follow it (tests/unit/test_specs_doc.py). A table's keys (sim,
# dlcp, emulate, crash) stay in their table, inside its section.
_RUN_HINTS = typing.get_type_hints(ExperimentSpec)
SECTION_CLASSES: dict[str, type[Any]] = {f.name: _RUN_HINTS[f.name] for f in fields(ExperimentSpec)
                                         if is_dataclass(_RUN_HINTS[f.name])}
SECTIONS: dict[str, tuple[str, ...]] = {name: tuple(f.name for f in fields(cls))
                                        for name, cls in SECTION_CLASSES.items()}
RUN_KEYS = tuple(f.name for f in fields(ExperimentSpec) if f.name not in SECTIONS)  # a run's own: at its top
SECTION_OF = {key: section for section, keys in SECTIONS.items() for key in keys}
# The tables a run's key may hold, and their classes (their keys: table_keys)
TABLES: dict[str, Any] = {"sim": SimOptions, "dlcp": DlcpOptions, "emulate": Emulation, "crash": Crash}
# The top-level keys of a compare spec (gradswitch/experiment/compare.py) besides `name`: none is a run's
COMPARE_ONLY = ("notes", "figures", "repeat", "repeat_varies", "baselines", "baselines_within", "defaults", "matrix",
                "runs")
# Where flat_spec's `table` is, as a message names it
_PLACES = {"": "the top level", "defaults": "[defaults]", "matrix": "[matrix]", "runs": "a run ([[runs]])"}


def _is_section(key: str, value: Any) -> bool:
    """Whether a run's `key = value` is a section (a table named after one: `transport = "sr"` is the key
    transport, `[transport]` the section; `faults = [...]` the key, `[faults]` the section)."""
    return key in SECTIONS and isinstance(value, dict)


_UNITS = ("_bytes", "_mbps", "_gbps", "_pct", "_ms", "_us", "_mb", "_s")


def nearest_key(key: str, known: list[str], options: dict[str, str] | None = None) -> str | None:
    """The known key nearest `key`, by its name, its name without its unit (`bww`: bw_mbps) or its command-line
    option's (`size`: size_bytes); None when none is near."""
    names: dict[str, str] = {}
    for k in known:
        names.setdefault(k, k)
        names.setdefault(next((k[:-len(u)] for u in _UNITS if k.endswith(u)), k), k)
        names.setdefault((options or {}).get(k, k).replace("-", "_"), k)
    close = difflib.get_close_matches(key, list(names), n=1)
    return names[close[0]] if close else None


def _nearest(key: str, table: str, prefix: str = "") -> str:
    """`key: no such key` with the nearest known key and where it goes (a run's key, a table's, a section)."""
    homes: dict[str, str] = {}
    for known, section in SECTION_OF.items():
        homes[known] = f"under [{_dotted(table, section)}]"
    for name, cls in TABLES.items():
        for known in table_keys(cls):
            homes.setdefault(known, f"in {name} = {{ ... }} under [{_dotted(table, SECTION_OF[name])}]")
    for section in SECTIONS:
        homes.setdefault(section, f"a section: [{_dotted(table, section)}]")
    close = nearest_key(key, [*homes, *RUN_KEYS], CLI_OPTIONS)
    where = _dotted(prefix, key)
    if close is None:
        return f"{where}: no such key (a run's keys, section by section: docs/specs.md)"
    return f"{where}: no such key; did you mean {close}" + (f" ({homes[close]})" if close in homes else "") + "?"


def _dotted(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def _misplaced(key: str, table: str, place: str) -> str | None:
    """Where `key`, found at `place` (a section's [..] or the run's top), belongs, if it is a key elsewhere: None
    for a key known nowhere."""
    if key in SECTION_OF:
        return f"{key} belongs under [{_dotted(table, SECTION_OF[key])}], not {place}"
    if key in RUN_KEYS:
        return f"{key} belongs at the top of the run, not {place}"
    if key in COMPARE_ONLY:
        if table:
            return f"{key} belongs at the top level of a compare spec (it applies to every run), not {place}"
        return f"{key} is a compare spec's key (gradswitch compare), not an experiment's"
    tables = [name for name, cls in TABLES.items() if key in table_keys(cls)]
    if tables:
        name = tables[0]
        return (f"{key} belongs in {name} = {{ {key} = ... }} under [{_dotted(table, SECTION_OF[name])}], "
                f"not {place}")
    return None


def flat_spec(raw: dict[str, Any], table: str = "") -> dict[str, Any]:
    """A run's keys as ExperimentSpec's fields, from a TOML table of a run in sections ([network], ...), flat (the
    form before sections) or both; `table` is where the run's table is in its file: "" (an experiment file, or
    a table built in code), "defaults", "matrix" or "runs" (a compare spec's). SpecError, one line per key:
    an unknown key with the nearest known one and where it goes, a key in the wrong section (or in none) with
    where it belongs, a key given both flat and in its section."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    place = _PLACES.get(table, f"[{table}]")
    for key, value in raw.items():
        if not _is_section(key, value):
            if key in SECTION_OF or key in RUN_KEYS:
                out[key] = value
            else:
                problems.append(_misplaced(key, table, place) or _nearest(key, table))
            continue
        if key == "faults" and "kind" in value:
            problems.append(f"faults = {{ kind = ... }}: faults is a list, faults = [{{ kind = ..., target = ..., "
                            f"at_s = ... }}] (a table named faults is the section [{_dotted(table, 'faults')}])")
            continue
        section = f"[{_dotted(table, key)}]"
        for inner, v in value.items():
            if SECTION_OF.get(inner) != key:
                if _is_section(inner, v):
                    problems.append(f"[{_dotted(table, key, inner)}]: sections do not nest; give "
                                    f"[{_dotted(table, inner)}] beside {section}")
                else:
                    problems.append(_misplaced(inner, table, section) or _nearest(inner, table, key))
            elif inner in raw and not _is_section(inner, raw[inner]):
                problems.append(f"{inner} is given twice, at {place} and under {section}: keep one")
            else:
                out[inner] = v
    if problems:
        raise SpecError("\n".join(problems))
    return out


def spec_from_dict(raw: dict[str, Any], base: ExperimentSpec | None = None, table: str = "") -> ExperimentSpec:
    """A spec from a TOML table of a run, sectioned or flat (flat_spec; `table`: where it is in its file), `base`'s
    values for what it leaves out; SpecError names a bad key or value.

    On the simulator an `emulate` table without `link_gbps` emulates the simulated links themselves
    (link_gbps = bw_mbps / 1000: dilation `scale`, 1 at full size): ns-3 runs computation at real speed."""
    base = base or ExperimentSpec()
    raw = flat_spec(raw, table)
    own = {k: _convert(v, str, k) for k, v in raw.items() if k in RUN_KEYS}
    for section, cls in SECTION_CLASSES.items():
        given = {k: v for k, v in raw.items() if SECTION_OF.get(k) == section}
        if given:
            own[section] = dataclass_from_dict(cls, given, "", getattr(base, section))
    spec = replace(base, **own)
    emulate, load, bw_mbps = raw.get("emulate"), spec.workload, spec.network.bw_mbps
    if (spec.network.simulated and load.emulate is not None and bw_mbps and isinstance(emulate, dict)
            and "link_gbps" not in emulate):
        spec = spec.but(emulate=replace(load.emulate, link_gbps=bw_mbps / 1000.0))
    return spec


def spec_dict(spec: ExperimentSpec) -> dict[str, Any]:
    """The spec as a file keeps it (results.json, summary.json, a trace run's record): flat, every key by its
    name at the top (the layout before sections; a reader takes both alike, and spec_from_dict reads it back),
    its tables as tables."""
    flat = {key: getattr(spec, key) for key in RUN_KEYS}
    for section in SECTIONS:
        flat.update(asdict(getattr(spec, section)))
    return flat


def spec_json(spec: ExperimentSpec) -> Any:
    """The spec as a file keeps it (spec_dict's, as JSON values: choices as strings, tuples as lists)."""
    return json.loads(json.dumps(spec_dict(spec)))


def _with_defaults(saved: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`saved` with every field it lacks (at any depth of its tables) taken from `defaults`."""
    out = {k: v for k, v in defaults.items() if k not in saved}
    for k, v in saved.items():
        d = defaults.get(k)
        out[k] = _with_defaults(v, d) if isinstance(v, dict) and isinstance(d, dict) else v
    return out


# The engine a saved spec without `engine` ran on: the loop, the default until the graph engine became it
SAVED_WITHOUT_ENGINE = Engine.LOOP


def same_spec(saved: object, spec: ExperimentSpec) -> bool:
    """Whether a spec a run saved (spec_json's, e.g. results.json's `spec`) is `spec`. A field the saved spec lacks
    is newer than its run, which ran with the field's default then (e.g. `backend`, or `sim.shaped_links` inside a
    table): today's default, but for `engine` (SAVED_WITHOUT_ENGINE)."""
    then = spec_json(ExperimentSpec().but(engine=SAVED_WITHOUT_ENGINE))
    return isinstance(saved, dict) and _with_defaults(saved, then) == spec_json(spec)


def resolve_path(value: str, folder: Path) -> str:
    """A path a spec file gives (workload_et), as the file means it: a relative one from the file's folder, `~`
    expanded; absolute either way."""
    return os.path.abspath(folder / Path(value).expanduser())


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's top table (an experiment or a compare spec); SpecError naming the file and what is wrong."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from None


def load_experiment(path: Path, overrides: dict[str, Any] | None = None) -> ExperimentSpec:
    """One experiment from a TOML file (`gradswitch experiment --spec FILE.toml`), `overrides` over its values.

    The file holds the keys of one run of a compare spec (ExperimentSpec's fields) in their sections
    (SECTIONS: `[algorithm] algo = "ring"`, `[workload] size_bytes = 1048576`, `[network.sim] check = "digest"`)
    or flat, as before sections (`algo = "ring"`; flat_spec). `overrides` are the command line's options
    given beside it, as spec_from_dict reads them: they win over the file's values, a table's keys one by
    one (`--device a100` keeps the file's `emulate.batch`). SpecError names the file for every key or
    value of the file at fault (a value the command line gave is named without it), what is allowed,
    and, for an unknown key, the nearest known one. The file's `workload_et`, if relative, is from the file's
    folder (a --workload-et beside it, from the working directory)."""
    raw = read_toml(path)
    try:
        if {"defaults", "matrix", "runs"} & set(raw) and not set(raw) - set(COMPARE_ONLY) - {"name"}:
            raise SpecError("this is a compare spec (defaults, matrix, runs): run it with `gradswitch compare "
                            f"{path}`, or give one run's keys at the top level")
        raw = flat_spec(raw)
        if isinstance(raw.get("workload_et"), str):  # the traces are where the file says, from its folder
            raw["workload_et"] = resolve_path(raw["workload_et"], path.parent)
        from_file = spec_from_dict(raw)
    except SpecError as e:
        raise SpecError("\n".join(f"{path}: {line}" for line in str(e).splitlines())) from None
    merged = dict(raw)
    for key, value in (overrides or {}).items():
        table = merged.get(key)
        merged[key] = {**table, **value} if isinstance(value, dict) and isinstance(table, dict) else value
    spec = spec_from_dict(merged)
    in_file = set(from_file.problems())
    problems = [f"{path}: {line}" if line in in_file else line for line in spec.problems()]
    if problems:
        raise SpecError("\n".join(problems))
    return spec
