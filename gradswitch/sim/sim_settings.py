"""What a simulated run sets besides its topology and jobs: link and host costs, queue sizes, the
switches' features (load balancing, the RoCE class, DLCP, loss), background traffic, TensorLights, and
which check the packets carry. These defaults are the only ones: gradswitch/sim/sim_config.py writes every value
into the configuration and gradswitch-sim has none of its own (it refuses a configuration that lacks one)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gradswitch.protocol.choice import Choice
from gradswitch.protocol.ecmp import DEFAULT_FLOWLET_GAP_US
from gradswitch.protocol.ecmp import LoadBalance as LoadBalance  # the switches' choice, re-exported
from gradswitch.sim.faults import LINK_DETECT_S, SWITCH_DETECT_S
from gradswitch.topology.faults import Fault


class CheckMode(Choice):
    """What the simulated packets carry and what every result is checked against (docs/simulator.md)."""

    AUTO = "auto"  # exact while the values fit the machine's memory and time (EXACT_LIMIT), else digest
    EXACT = "exact"  # int32 values, every sum checked element by element
    DIGEST = "digest"  # sizes plus a 64-bit linear digest per contribution: each held exactly once
    NONE = "none"  # sizes only, nothing checked


class EventList(Choice):
    """ns-3's event list (scheduler) the simulator runs on; the results do not depend on it, the wall time does
    (bench.ns3_profile times them)."""

    MAP = "map"
    HEAP = "heap"
    CALENDAR = "calendar"
    PRIORITY_QUEUE = "priority-queue"  # the fastest here


# AUTO chooses exact values while every worker's check (a sum over N workers per element) stays below this
# many generated values per iteration: workers x workers x elements.
EXACT_LIMIT = 1 << 26


@dataclass(frozen=True)
class DlcpSwitch:
    """The switches' DLCP features for every job that has a host policy (gradswitch/experiment/spec.py
    DlcpOptions' switch fields)."""

    priority: bool = False
    drop: bool = False  # selective drop: switches trim droppable packets (docs/dlcp.md)
    spray: bool = False
    threshold_bytes: int | None = None  # every priority's drop threshold; None: default_thresholds per switch


@dataclass(frozen=True)
class Background:
    """Bulk TCP between two hosts (iperf3 -P flows -M mss on the testbed). The simulator's flows leave from the
    client ports gradswitch.protocol.background_tcp.CLIENT_PORT_BASE + 0, 1, ... (gs-tcp.cc kClientPortBase), so ECMP
    puts them on the same paths in every run; the testbed's iperf3 takes ephemeral ports, new paths every run, unless
    the spec's `background_fixed_ports` gives it these."""

    sender: str
    receiver: str
    flows: int = 1
    mss: int = 1024
    rwnd_bytes: int = 6 << 20  # the receiver's window (Linux's default maximum of tcp_rmem, 6 MB)
    min_rto_s: float = 0.2  # Linux's TCP_RTO_MIN


@dataclass(frozen=True)
class TensorLightsSetting:
    host: str  # the colocated servers' host
    servers: tuple[tuple[int, int], ...]  # (job, node id) of each server, favoured first
    rotate_s: float = 0.0


@dataclass(frozen=True)
class SimSettings:
    """Everything of a simulated run that is neither the topology nor a job."""

    link_delay_s: float = 1e-6  # propagation delay of every link
    switch_delay_s: float = 0.0  # per packet in a switch before its egress queue (the testbed's BMv2 cost)
    shaped_links: bool = False  # links as the testbed's HTB shapers: a packet reaches the peer as it leaves
    host_message_delay_s: float = 0.0  # per received message before the application sees it (Python hosts)
    queue_bytes: int | None = None  # each priority queue of a port; None: the testbed's shaped buffer per rate
    unshaped_mbps: float = 10_000.0  # the rate of links the topology leaves unshaped
    framing_bytes: int = 0  # per frame on the link besides its size (0: as HTB counts; 20: preamble and gap)
    check: CheckMode = CheckMode.AUTO
    ecmp_seed: int = 0  # the switches' ECMP hash: gradswitch/protocol/ecmp.py hash_multiplier(seed), as on BMv2
    load_balance: LoadBalance = LoadBalance.ECMP  # gradswitch/protocol/ecmp.py's: per flow, or per flowlet (LetFlow)
    flowlet_gap_us: float = DEFAULT_FLOWLET_GAP_US  # the P4 program's default (docs/dlcp.md says why)
    roce_class: bool = False  # every RoCE packet in one strict-priority class above bulk traffic
    dlcp: DlcpSwitch = field(default_factory=DlcpSwitch)
    loss_pct: float = 0.0  # RoCE packets dropped at every worker's switch port, both ways
    background: Background | None = None
    tensorlights: TensorLightsSetting | None = None
    seed: int = 1
    scheduler: EventList = EventList.PRIORITY_QUEUE  # ns-3's event list
    time_limit_s: float | None = None  # simulated seconds at most (None: from the jobs' iteration timeouts)
    progress_s: float = 0.0  # wall seconds between progress lines on stderr (0: none)
    wall_limit_s: float | None = None  # kill the simulator after this many wall seconds
    # failures during the run (gradswitch/sim/faults.py; worker targets in the first job)
    faults: tuple[Fault, ...] = ()
    switch_detect_s: float = SWITCH_DETECT_S  # a dead switch noticed and routed around after this long
    link_detect_s: float = LINK_DETECT_S  # a link's change noticed and routed around (or back) after this long
    # A graph's NetReduce all-gathers (docs/netreduce.md, "All-gather"): the ranks send the messages other ranks
    # own as placeholders (headers alone), not as zeros whole (gradswitch/hosts/netreduce_gather.py's `placeholders`);
    # and the what-if of switches that can grow a placeholder into the owner's values, which BMv2 cannot (without it a
    # placeholder that would complete its cell is held until resent whole, as netreduce.p4 does).
    gather_placeholders: bool = False
    grow_placeholders: bool = False
