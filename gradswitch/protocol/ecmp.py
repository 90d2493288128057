"""How an ECMP group picks a packet's member: what the switch program, its control plane and the simulator agree on.

An ECMP group's member is chosen per flow by a seeded hash of the 5-tuple (`ecmp`), or per flowlet at random
(LetFlow: `flowlet`, a new member after an idle gap). The seed becomes the route action's multiplier
(`hash_multiplier`; gradswitch/p4src/include/controls/l3_forwarding.p4 and the simulator's switch model use the same
one).
"""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.protocol.choice import Choice
from gradswitch.protocol.p4_constants import CONFIG

# Flowlet switching's default idle gap (docs/dlcp.md, "Load balancing", says why): above the time between a
# sending flow's packets on a shared 5 Mb/s link, below a shaped port's ~100 ms queue.
DEFAULT_FLOWLET_GAP_US = 50_000
MAX_FLOWLET_GAP_US = (1 << 32) - 1  # set_flowlet_group's gap_us is 32 bits of microseconds
MAX_ECMP_SEED = (1 << 31) - 1  # hash_multiplier keeps 32 bits of 2 x seed + 1
# Odd, so that multiplying by it is a bijection of 32-bit numbers: a seed comes back from its multiplier.
_SEED_SPREAD = 0x9E3779B1
_SEED_UNSPREAD = pow(_SEED_SPREAD, -1, 1 << 32)


class LoadBalance(Choice):
    """How an ECMP group picks a packet's member."""

    ECMP = "ecmp"  # per flow: a seeded hash of the 5-tuple
    FLOWLET = "flowlet"  # per flowlet (LetFlow): a member at random after an idle gap of flowlet_gap_us


@dataclass(frozen=True)
class Balancing:
    """What every ECMP group of a network does (DLCP spraying overrides it for a spraying job's packets)."""

    mode: LoadBalance = LoadBalance.ECMP
    flowlet_gap_us: int = DEFAULT_FLOWLET_GAP_US  # flowlet: idle time after which a flow's next packet is redrawn
    seed: int = 0  # the ECMP hash's seed (0: the plain CRC-16 of the 5-tuple)

    def problems(self) -> list[str]:
        """Every value that cannot be installed, one line each."""
        out = []
        if not 0 <= self.seed <= MAX_ECMP_SEED:
            out.append(f"ecmp_seed = {self.seed}: a seed is 0..{MAX_ECMP_SEED} (0: the plain 5-tuple hash)")
        if not 1 <= self.flowlet_gap_us <= MAX_FLOWLET_GAP_US:
            out.append(f"flowlet_gap_us = {self.flowlet_gap_us}: an idle gap of 1..{MAX_FLOWLET_GAP_US} microseconds "
                       f"(default {DEFAULT_FLOWLET_GAP_US})")
        return out

    def describe(self) -> str:
        gap = f", gap {self.flowlet_gap_us} us" if self.mode == LoadBalance.FLOWLET else ""
        return f"{self.mode}{gap}, seed {self.seed}"


def hash_multiplier(seed: int) -> int:
    """The route action's multiplier for an ECMP seed (gradswitch/p4src/include/controls/l3_forwarding.p4, ECMP_MEMBER):
    ECMP_PLAIN_MULTIPLIER for seed 0 (member = CRC-16 of the 5-tuple mod the group's size), else the odd
    (2 seed + 1) x a fixed odd constant, mod 2^32: a different multiply-shift hash per seed."""
    if not 0 <= seed <= MAX_ECMP_SEED:
        raise ValueError(f"ECMP seed {seed}: give 0..{MAX_ECMP_SEED}")
    return CONFIG.ECMP_PLAIN_MULTIPLIER if seed == 0 else ((2 * seed + 1) * _SEED_SPREAD) & 0xFFFFFFFF


def seed_of(multiplier: int) -> int:
    """The seed a route's multiplier was made from (hash_multiplier's inverse)."""
    if multiplier == CONFIG.ECMP_PLAIN_MULTIPLIER:
        return 0
    odd = (multiplier * _SEED_UNSPREAD) & 0xFFFFFFFF
    if odd % 2 == 0:
        raise ValueError(f"ECMP multiplier {multiplier:#x} is not one hash_multiplier makes")
    return odd // 2
