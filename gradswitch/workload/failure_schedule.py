"""Failures over a long training run, drawn from published rates: which GPU, switch or link fails when.

Every element of the job fails as a Poisson process of its own rate (per GPU-hour, per switch-hour, per
link-hour: `FailureRates`); `draw_schedule` draws, seeded, the faults of a run of H hours on a topology as
gradswitch/topology/faults.Fault values (worker-crash, switch-crash, link-down) that every backend reads. A switch or
link is repaired (back up) `repair_s` after it fails; a worker's GPU is not: a spare replaces it, or the job restarts.

The default rates (`FailureRates.llama3`) are the Llama 3 paper's: A. Dubey et al., "The Llama 3 Herd of
Models", arXiv:2407.21783, 2024, section 3.3.4 (Reliability and operational challenges) and its Table 5:
a 54-day snapshot of pre-training on 16,384 H100 GPUs had 466 job interruptions, 47 planned and 419 unexpected;
of the unexpected ones, 35 are attributed to network switches and cables. Derived here:
- per GPU-hour: the 384 unexpected interruptions that are not the network's (faulty GPU, HBM3, SRAM, GPU
  system processor, software bugs, host maintenance, NIC, ...: each one takes a worker out) over
  16,384 x 54 x 24 GPU-hours: 1.81e-5, one GPU in 55,300 hours;
- per switch-hour and per link-hour: the paper does not split its 35 network interruptions between switches
  and cables, nor give its fabric's element counts. Its network failures per GPU-hour (35 over the same GPU-hours)
  are kept for the topology a study runs on: spread evenly over that topology's switches and links (host links
  included), per job of `workers` GPUs. Every element then fails at the same rate, and a 1,024-worker job sees
  the network fail as often per GPU as Llama 3's did.
Every rate is a parameter (FailureRates(...)).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass

from gradswitch.protocol.choice import Choice
from gradswitch.topology.faults import Fault, FaultKind
from gradswitch.topology.model import Topology, TopologyError

SOURCE_LLAMA3 = ('A. Dubey et al., "The Llama 3 Herd of Models", arXiv:2407.21783 (2024), section 3.3.4 and '
                 'Table 5: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs, 35 of them network '
                 'switch/cable')
LLAMA3_GPUS = 16_384
LLAMA3_DAYS = 54
LLAMA3_UNEXPECTED = 419  # unexpected job interruptions in the snapshot (466 with the 47 planned)
LLAMA3_NETWORK = 35  # of them: network switch/cable
LLAMA3_GPU_HOURS = LLAMA3_GPUS * LLAMA3_DAYS * 24.0

HOUR_S = 3600.0
DEFAULT_REPAIR_S = 4 * HOUR_S  # a failed switch or cable replaced by hand: an assumption (no published figure used)


class ElementKind(Choice):
    GPU = "gpu"  # a worker: its GPU, its host, its software (anything that takes that one worker out)
    SWITCH = "switch"
    LINK = "link"


FAULT_OF = {ElementKind.GPU: FaultKind.WORKER_CRASH, ElementKind.SWITCH: FaultKind.SWITCH_CRASH,
            ElementKind.LINK: FaultKind.LINK_DOWN}


class ScheduleError(ValueError):
    """Rates or a run that cannot be drawn: one line naming the value, what is allowed and what to do."""


@dataclass(frozen=True)
class FailureRates:
    """Failures per element-hour of each kind, and where the figures come from."""

    per_gpu_hour: float
    per_switch_hour: float
    per_link_hour: float
    source: str

    @classmethod
    def llama3(cls, topo: Topology, workers: int) -> FailureRates:
        """The Llama 3 paper's rates (module docstring), the network's spread over this topology's elements."""
        if workers < 1:
            raise ScheduleError(f"workers = {workers}: give 1 or more")
        per_gpu = (LLAMA3_UNEXPECTED - LLAMA3_NETWORK) / LLAMA3_GPU_HOURS
        network_per_job_hour = LLAMA3_NETWORK / LLAMA3_GPU_HOURS * workers
        elements = len(topo.switches) + len(topo.links)
        per_element = network_per_job_hour / elements
        return cls(per_gpu, per_element, per_element,
                   f"{SOURCE_LLAMA3}; per GPU-hour: the {LLAMA3_UNEXPECTED - LLAMA3_NETWORK} others over "
                   f"{LLAMA3_GPU_HOURS:.0f} GPU-hours; per switch- and link-hour: the network's {LLAMA3_NETWORK} "
                   f"per GPU-hour x {workers} GPUs over the {len(topo.switches)} switches and {len(topo.links)} "
                   f"links of {topo.name}")

    def problems(self) -> list[str]:
        out = []
        for name in ("per_gpu_hour", "per_switch_hour", "per_link_hour"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                out.append(f"failure rate {name} = {value}: failures per element-hour, 0 or more")
        return out

    def per_hour(self, kind: ElementKind) -> float:
        return {ElementKind.GPU: self.per_gpu_hour, ElementKind.SWITCH: self.per_switch_hour,
                ElementKind.LINK: self.per_link_hour}[kind]

    def job_per_hour(self, topo: Topology, workers: int) -> float:
        """Failures per hour of the whole job: its workers, the topology's switches and links."""
        return (workers * self.per_gpu_hour + len(topo.switches) * self.per_switch_hour
                + len(topo.links) * self.per_link_hour)

    def to_dict(self) -> dict[str, object]:
        return {"per_gpu_hour": self.per_gpu_hour, "per_switch_hour": self.per_switch_hour,
                "per_link_hour": self.per_link_hour, "source": self.source}


@dataclass(frozen=True)
class FailureSchedule:
    """The faults of one run of `hours`, drawn with `seed`, in time order."""

    hours: float
    seed: int
    workers: int
    rates: FailureRates
    faults: tuple[Fault, ...]

    def counts(self) -> dict[ElementKind, int]:
        kinds = Counter(f.kind for f in self.faults)
        return {k: kinds.get(FAULT_OF[k], 0) for k in ElementKind}


def elements(topo: Topology, workers: int) -> dict[ElementKind, list[str]]:
    """The targets of each kind, as gradswitch/topology/faults.Fault names them: the workers by rank, switches by name,
    links as A-B."""
    if not 1 <= workers <= len(topo.hosts):
        raise ScheduleError(f"workers = {workers}: {topo.name} has {len(topo.hosts)} hosts; give 1..{len(topo.hosts)}")
    return {ElementKind.GPU: [str(r) for r in range(workers)],
            ElementKind.SWITCH: [s.name for s in topo.switches],
            ElementKind.LINK: [f"{lk.a}-{lk.b}" for lk in topo.links]}


def draw_schedule(rates: FailureRates, topo: Topology, workers: int, hours: float, seed: int,
                  repair_s: float = DEFAULT_REPAIR_S) -> FailureSchedule:
    """Every element's failures over `hours` (Poisson, the element's rate), seeded: the same seed draws the
    same schedule. Per kind, the superposed process of its elements (rate x count) gives the times, and each
    failure falls on one of them at random; a switch comes back (restart_s) and a link up (down_s) `repair_s`
    after it failed. A worker fails with worker-crash, its rank as target."""
    problems = rates.problems()
    if not (math.isfinite(hours) and hours > 0):
        problems.append(f"hours = {hours}: a run of more than 0 hours")
    if not (math.isfinite(repair_s) and repair_s > 0):
        problems.append(f"repair_s = {repair_s}: seconds above 0 until a failed switch or link is back")
    if problems:
        raise ScheduleError(problems[0])
    rng = random.Random(seed)
    horizon = hours * HOUR_S
    out: list[Fault] = []
    for kind, targets in elements(topo, workers).items():
        rate_per_s = rates.per_hour(kind) * len(targets) / HOUR_S
        if rate_per_s <= 0 or not targets:
            continue
        t = rng.expovariate(rate_per_s)
        while t < horizon:
            target = targets[rng.randrange(len(targets))]
            if kind == ElementKind.GPU:
                out.append(Fault(FaultKind.WORKER_CRASH, target, t))
            elif kind == ElementKind.SWITCH:
                out.append(Fault(FaultKind.SWITCH_CRASH, target, t, restart_s=repair_s))
            else:
                out.append(Fault(FaultKind.LINK_DOWN, target, t, down_s=repair_s))
            t += rng.expovariate(rate_per_s)
    return FailureSchedule(hours, seed, workers, rates, tuple(sorted(out, key=lambda f: (f.at_s, f.target))))


def without(topo: Topology, kind: ElementKind | None, element: str) -> Topology:
    """The topology with a switch (and every link it has) or a link gone: the fabric a controller routes
    around once it failed. kind None: the topology as it is."""
    if kind is None:
        return topo
    if kind == ElementKind.SWITCH:
        if not topo.is_switch(element):
            raise TopologyError(f"{topo.name}: no switch {element!r} to take out")
        return Topology(f"{topo.name}-without-{element}", topo.hosts,
                        tuple(s for s in topo.switches if s.name != element),
                        tuple(lk for lk in topo.links if element not in (lk.a, lk.b)), topo.params)
    if kind == ElementKind.LINK:
        a, _, b = element.partition("-")
        kept = tuple(lk for lk in topo.links if {lk.a, lk.b} != {a, b})
        if len(kept) == len(topo.links):
            raise TopologyError(f"{topo.name}: no link {element!r} to take out (a link is A-B)")
        return Topology(f"{topo.name}-without-{element}", topo.hosts, topo.switches, kept, topo.params)
    raise TopologyError(f"{kind}: take out a switch or a link; a worker is replaced, not taken out of the fabric")


def element_class(topo: Topology, fault: Fault) -> str:
    """What kind of element a fault hits, for the costs of its loss: `gpu`, `switch:<role>` or
    `link:<role>-<role>` (roles in the order the link's ends have them; a host's role is `host`)."""
    if fault.kind in (FaultKind.WORKER_CRASH, FaultKind.SLOW_WORKER):
        return str(ElementKind.GPU)
    if fault.kind in (FaultKind.SWITCH_CRASH, FaultKind.SWITCH_HANG):
        return f"switch:{topo.switch(fault.target).role}"
    a, b = fault.link_ends()
    link = next((lk for lk in topo.links if {lk.a, lk.b} == {a, b}), None)
    if link is None:
        raise TopologyError(f"{topo.name}: no link {fault.target!r}")

    def role(node: str) -> str:
        return "host" if topo.is_host(node) else topo.switch(node).role

    return f"link:{role(link.a)}-{role(link.b)}"


def workers_cut_off(topo: Topology, hosts: list[str], fault: Fault) -> list[int]:
    """The ranks (hosts[rank]) a switch or link failure disconnects: the hosts of an edge switch that failed,
    or the host whose own link did. No reroute reaches them: they are replaced like a failed worker."""
    if fault.kind in (FaultKind.SWITCH_CRASH, FaultKind.SWITCH_HANG):
        attached = {h.name for h, _ in topo.hosts_of(fault.target)}
        return [r for r, h in enumerate(hosts) if h in attached]
    if fault.kind in (FaultKind.LINK_DOWN, FaultKind.LINK_FLAP):
        ends = set(fault.link_ends())
        return [r for r, h in enumerate(hosts) if h in ends]
    return []
