"""How every switch of a fabric balances its ECMP groups, changed at run time: ECMP or flowlets, the
flowlet gap, the hash seed.

The setting is a parameter of the ECMP routes' action (gradswitch/control/controls/l3_forwarding.py), so
changing it rewrites those routes on every switch (a P4Runtime MODIFY of each: the same key, another
action or parameters) and leaves every other entry alone. What the REPL's `balance` command and
the experiment runner (a spec's load_balance, flowlet_gap_us, ecmp_seed) use.
"""

from __future__ import annotations

from gradswitch.control.controls import l3_forwarding
from gradswitch.control.fabric import Fabric
from gradswitch.protocol.ecmp import Balancing, LoadBalance


class BalancingError(ValueError):
    """A load-balancing setting the switches cannot take (one line per value)."""


class LoadBalancing:
    """The load-balancing setting of every switch of one fabric."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric

    def set(self, mode: LoadBalance | None = None, flowlet_gap_us: int | None = None, seed: int | None = None
            ) -> Balancing:
        """Change what is given (the rest stays as installed) on every switch; returns the setting now.
        BalancingError names a bad value before any switch is written."""
        current = self.current()
        wanted = Balancing(current.mode if mode is None else mode,
                           current.flowlet_gap_us if flowlet_gap_us is None else flowlet_gap_us,
                           current.seed if seed is None else seed)
        problems = wanted.problems()
        if problems:
            raise BalancingError("; ".join(problems))
        if wanted != current:
            self.fabric.set_balancing(wanted)
            for name in self.fabric.switch_names():
                ecmp = [e for e in l3_forwarding.route_entries(self.fabric.topo, name, wanted, self.fabric.outage)
                        if l3_forwarding.balancing_of(e) is not None]
                if ecmp:
                    self.fabric.modify(name, ecmp)
        return wanted

    def reset(self) -> Balancing:
        """Back to what a network starts with: ECMP, the plain hash (seed 0), the default flowlet gap."""
        default = Balancing()
        return self.set(default.mode, default.flowlet_gap_us, default.seed)

    def current(self) -> Balancing:
        """The setting the switches hold (read from the first ECMP route found; `set` keeps every switch the
        same). A fabric without ECMP groups holds the default."""
        for name in self.fabric.switch_names():
            for view in self.fabric.read_entries(name, l3_forwarding.ROUTES):
                found = l3_forwarding.balancing_of(view.entry)
                if found is not None:
                    return found
        return Balancing()
