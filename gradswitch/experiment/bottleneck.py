"""Was a run limited by its links, or by the machine emulating them?

Every switch and host of the testbed shares a few cores. A figure says something about the
network only when the links, not the machine, set it. A run is `machine_bound` when

- the machine's CPU was under MIN_CPU_IDLE idle during the jobs (it had nothing left), or
- its busiest link carried under MIN_LINK_SHARE of the load a link-bound run keeps: the ideal
  iteration's busiest-link load for a training run (`ideal_link_load`: its links idle while every
  GPU computes), 1.0 for an all-reduce run (nothing but transfers), or for a graph that only
  communicates what its flows' paths allow (gradswitch/experiment/placed_load.py), or
- (a graph run, where the report counts them) its transports sent packets again although no link
  dropped any and none was meant to be lost (no loss injected, no fault): the machine lost them
  (a BMv2 queue or a host's socket that overflowed) or held them past a timeout;

and `machine_bound_reason` says which. A machine-bound run is never used for a headline figure
(gradswitch/experiment/compare.py leaves it out and says so). Neither measured (no shaped link,
no CPU reading): not judged (None).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_CPU_IDLE = 0.10  # idle share of every core together below which the machine was the limit
MIN_LINK_SHARE = 0.8  # of the ideal's busiest-link load below which the links were not the limit
TARGET_CPU_IDLE = 0.20  # what an experiment's rates and sizes should leave idle (docs/performance.md)


@dataclass(frozen=True)
class Bottleneck:
    machine_bound: bool | None  # None: neither the CPU nor a shaped link was measured
    reason: str | None  # why it is machine-bound (None when it is not)

    def fields(self) -> dict[str, bool | str | None]:
        return {"machine_bound": self.machine_bound, "machine_bound_reason": self.reason}


def judge(cpu_idle: float | None, busiest_link_load: float | None, ideal_link_load: float | None = None,
          unexplained_resends: int = 0) -> Bottleneck:
    """Machine-bound or not, from the run's idle CPU, its busiest link's load, the ideal's busiest-link load
    (None: 1.0, an all-reduce run's) and the packets its transports sent again that no link dropped and no
    injected loss or fault explains."""
    if cpu_idle is None and busiest_link_load is None:
        return Bottleneck(None, None)
    reasons = []
    if unexplained_resends > 0:
        reasons.append(f"{unexplained_resends} packets sent again with none dropped by a link (the machine lost "
                       "or held them)")
    if cpu_idle is not None and cpu_idle < MIN_CPU_IDLE:
        reasons.append(f"CPU {cpu_idle:.0%} idle during the jobs (under {MIN_CPU_IDLE:.0%})")
    full = 1.0 if ideal_link_load is None else ideal_link_load
    if busiest_link_load is not None and busiest_link_load < MIN_LINK_SHARE * full:
        reasons.append(f"busiest link {busiest_link_load:.0%} loaded, under {MIN_LINK_SHARE:g} of the "
                       f"{full:.0%} a link-bound run keeps")
    return Bottleneck(bool(reasons), "; ".join(reasons) or None)
