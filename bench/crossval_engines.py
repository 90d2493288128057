"""The same training pair on both engines of one backend: the training loop's iteration against the execution
graph's (bench.crossval, when a loop part and its graph part run in one invocation: `--only dlcp,dlcp-graph` or
`--only training,training-graph`), so that a re-measurement on the graph engine is set beside the loop's on the
same machine the same day.

A loop run's iteration is in the testbed's (dilated) seconds; a graph run's in the emulated cluster's, so it is
multiplied by the loop run's dilation. The two agree when their repetitions' ranges [min, max] (over the
repetitions that were not machine-bound), each widened by GRAPH_LOOP_SLACK of its median, overlap: the
simulator is deterministic, so its ranges are points, and two engines' points 0.1 % apart agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.crossval_collectives import Store
from gradswitch.experiment.crossval import median_time, time_range, usable
from gradswitch.experiment.summary_file import RunSummary, Summary

GRAPH_LOOP_SLACK = 0.01  # the ns-3 test (tests/ns3/test_dlcp_graph_sim.py) holds the two engines within 1 %
SIDES = ("bmv2", "ns3")


@dataclass(frozen=True)
class EngineAgreement:
    """One run on one backend: the loop's and the graph's median iteration (the testbed's seconds) and ranges."""

    run: str
    backend: str
    loop_s: float | None
    loop_range: tuple[float, float] | None
    graph_s: float | None
    graph_range: tuple[float, float] | None
    judged: bool  # both engines have the repetitions their judging asks for (BMv2: min_repetitions unbound)

    @property
    def ratio(self) -> float | None:
        """graph / loop."""
        return self.graph_s / self.loop_s if self.graph_s is not None and self.loop_s else None

    @property
    def agrees(self) -> bool | None:
        if not self.judged or self.loop_range is None or self.graph_range is None:
            return None
        (l_lo, l_hi), (g_lo, g_hi) = widened(self.loop_range), widened(self.graph_range)
        return l_lo <= g_hi and g_lo <= l_hi

    def row(self) -> dict[str, Any]:
        return {"run": self.run, "backend": self.backend, "loop_iteration_s": self.loop_s,
                "loop_range_s": self.loop_range, "graph_iteration_s": self.graph_s, "graph_range_s": self.graph_range,
                "graph_over_loop": self.ratio, "judged": self.judged, "agrees": self.agrees}

    def line(self) -> str:
        def num(v: float | None) -> str:
            return "-" if v is None else f"{v:.4f}"

        verdict = {None: "not judged", True: "agree", False: "DIFFER"}[self.agrees]
        ratio = "-" if self.ratio is None else f"{self.ratio:.3f}"
        return (f"{self.run} [{self.backend}]: loop {num(self.loop_s)} s, graph {num(self.graph_s)} s, "
                f"graph / loop {ratio}: {verdict}")


def widened(r: tuple[float, float]) -> tuple[float, float]:
    mid = (r[0] + r[1]) / 2
    return r[0] - GRAPH_LOOP_SLACK * mid, r[1] + GRAPH_LOOP_SLACK * mid


def _loop_side(s: RunSummary | None) -> tuple[float | None, tuple[float, float] | None, int, float]:
    """A loop run's median iteration, its range, its unbound repetitions and its dilation."""
    if not s:
        return None, None, 0, 1.0
    v = s.get("iteration_s")
    r = s.get("spread", {}).get("iteration_s")
    rng = (float(r["min"]), float(r["max"])) if r and r.get("min") is not None and r.get("max") is not None else None
    dilation = s.get("dilation")
    return (float(v) if isinstance(v, int | float) else None, rng, int(s.get("headline_repetitions", 0)),
            float(dilation) if isinstance(dilation, int | float) and dilation else 1.0)


def compare_engines(loop: Summary, graph: Store, runs: Sequence[str], min_repetitions: int
                    ) -> list[EngineAgreement]:
    """Per run and backend, the loop's summary (loop[run], its simulated twin loop[run + "-ns3"]) against the graph
    store's repetitions of the same run."""
    out = []
    for run in runs:
        for side in SIDES:
            loop_s, loop_range, loop_n, dilation = _loop_side(loop.get(run if side == "bmv2" else f"{run}-ns3"))
            reps = graph.runs.get(run, {}).get(side, [])
            g = median_time(reps)
            g_range = time_range(reps)
            need = min_repetitions if side == "bmv2" else 1
            out.append(EngineAgreement(
                run, side, loop_s, loop_range, None if g is None else g * dilation,
                None if g_range is None else (g_range[0] * dilation, g_range[1] * dilation),
                loop_n >= need and len(usable(reps)) >= need))
    return out
