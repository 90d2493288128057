"""What limited a measurement: the busiest link's load and the machine's idle CPU (a benchmark's, a study's).

Every measurement reports `Limits.line()`: the busiest link's load (near 1: the links limited it) and the
machine's idle CPU (near 0: the machine did), so that a figure is read as a property of the links only when the
links were the bottleneck. bench/ and the package's studies (gradswitch.experiment.goodput_study) share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gradswitch.experiment.bottleneck import Bottleneck, judge

SIMULATED = "simulated (ns-3): the machine's load does not change simulated time"


@dataclass(frozen=True)
class Limits:
    """What limited a measurement: the busiest link's load and the machine's idle CPU share.

    Machine-bound as an experiment's results.json says it (gradswitch/experiment/bottleneck.py:
    CPU under 10 % idle, or the busiest link under 0.8 of the load a link-bound run keeps)."""

    busiest_link_load: float | None  # bytes the link carried over what it carries in the time; None: no shaped link
    cpu_idle: float | None  # idle share of every core together during the measurement
    links: str = ""  # what the links were when there is no load to give ("unshaped veths")
    switch_cores: float | None = None  # CPU the switch process used, in cores (one ingress thread: at most ~1)
    ideal_link_load: float | None = None  # the busiest link's load a link-bound run keeps (None: 1, all transfers)

    def bottleneck(self) -> Bottleneck:
        return judge(self.cpu_idle, self.busiest_link_load, self.ideal_link_load)

    def line(self) -> str:
        link = (f"busiest link {self.busiest_link_load:.0%} loaded" if self.busiest_link_load is not None
                else f"links: {self.links or 'not shaped'}")
        parts = [link, f"CPU {self.cpu_idle:.0%} idle" if self.cpu_idle is not None else "CPU idle unknown"]
        if self.switch_cores is not None:
            parts.append(f"switch process {self.switch_cores:.2f} cores")
        return ", ".join(parts) + f": {self.verdict()}"

    def verdict(self) -> str:
        judged = self.bottleneck()
        if judged.machine_bound:
            return f"machine-bound ({judged.reason}): a figure of this machine's load, not of the links"
        full = 1.0 if self.ideal_link_load is None else self.ideal_link_load
        if self.busiest_link_load is not None and self.busiest_link_load >= 0.9 * full:
            return "link-bound"
        if self.switch_cores is not None and self.switch_cores >= 0.9:
            return "switch-bound (its busiest thread had a core to itself)"
        return "neither the links nor the CPU saturated"

    def figures(self) -> dict[str, Any]:
        return {"busiest_link_load": self.busiest_link_load, "cpu_idle": self.cpu_idle,
                "ideal_link_load": self.ideal_link_load, "switch_cores": self.switch_cores,
                **self.bottleneck().fields(), "limited_by": self.verdict()}

    @staticmethod
    def simulated_figures(busiest_link_load: float | None) -> dict[str, Any]:
        """figures() of a simulated run: its busiest link's load; never machine-bound (its clock is the model's)."""
        return {**Limits(busiest_link_load, None, SIMULATED).figures(), "machine_bound": False,
                "machine_bound_reason": None, "limited_by": SIMULATED}

    @classmethod
    def of_figures(cls, figures: Mapping[str, Any], links: str = "") -> Limits:
        """Back from figures() (or a dict with the same keys), as a benchmark's rows keep them."""
        return cls(figures.get("busiest_link_load"), figures.get("cpu_idle"), links, figures.get("switch_cores"),
                   figures.get("ideal_link_load"))

    @classmethod
    def of_report(cls, report: Mapping[str, Any]) -> Limits:
        """An experiment's (gradswitch/experiment/runner.py: headline_extra; a training run's ideal load)."""
        figures = dict(report.get("headline_extra", report))
        ideal = (report.get("training") or {}).get("ideal_link_load", figures.get("ideal_link_load"))
        return cls.of_figures({**figures, "ideal_link_load": ideal}, "not shaped")
