"""The cross-validation's judging: whether the ns-3 simulator and the BMv2 testbed agree (docs/simulator.md).

A figure (an iteration, a collective's time, a ratio of two runs) has a value on each backend; the two agree when
ns-3's is within TOLERANCE (10 %) of BMv2's. BMv2's value is the median over its repetitions that were exact and
not machine-bound (gradswitch/experiment/bottleneck.py), and a figure is judged only when BMv2 kept
MIN_REPETITIONS such repetitions (and ns-3 one): a figure of a machine-bound testbed says nothing of the model.
Per (topology, N) the algorithms' ranking, fastest first, must also agree, up to ties (two algorithms within
TOLERANCE of each other on both backends may come in either order).

bench/crossval.py and its parts run the pairs and write bench/results/crossval*.json; this module decides.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from gradswitch.experiment.graph_run import GraphRunReport
from gradswitch.experiment.stats import spread
from gradswitch.workload.job import Algorithm

TOLERANCE = 0.10  # |ns-3 / BMv2 - 1| at most this, per figure
MIN_REPETITIONS = 3  # BMv2 repetitions that were not machine-bound, at least, for a judged pair
ALGOS = (Algorithm.RING, Algorithm.NETREDUCE, Algorithm.PS)  # the all-reduce pairs' algorithms, ranked
# The collectives part's patterns (bench/crossval_collectives.py): a collective of the hosts' graph engines by name,
# or with one of these suffixes the same collective run by the switches or by one parameter server.
IN_SWITCHES = "-netreduce"  # a pattern's suffix: the collective run by the switches (algo = netreduce)
ON_SERVERS = "-ps"  # a pattern's suffix: the all-reduce run by one parameter server (algo = ps)


def host_pattern(pattern: str) -> str:
    """The pattern the hosts run for the same collective (itself for a host pattern)."""
    return pattern.removesuffix(IN_SWITCHES).removesuffix(ON_SERVERS)


@dataclass(frozen=True)
class Figure:
    what: str
    bmv2: float | None
    ns3: float | None
    usable: bool  # the BMv2 side has MIN_REPETITIONS repetitions that were not machine-bound

    @property
    def error(self) -> float | None:
        return self.ns3 / self.bmv2 - 1 if self.bmv2 and self.ns3 is not None else None

    @property
    def within(self) -> bool | None:
        """Within TOLERANCE (None: not judged)."""
        return None if self.error is None or not self.usable else abs(self.error) <= TOLERANCE

    def row(self) -> dict[str, Any]:
        return {"what": self.what, "bmv2": self.bmv2, "ns3": self.ns3, "error": self.error, "usable": self.usable,
                "within": self.within}


def quotient(a: float | None, b: float | None) -> float | None:
    """a / b, or None where either is missing (or b is 0): the ratio figures of every part."""
    return a / b if a is not None and b else None


# ---- graph runs: each repetition's own figures ----


@dataclass(frozen=True)
class Repetition:
    """One run of one graph on one backend: what judging needs of its GraphRunReport, and what limited it."""
    seed: int
    job_s: float
    checked: bool
    machine_bound: bool | None
    reason: str | None
    busiest_link: str | None = None
    busiest_link_load: float | None = None
    cpu_idle: float | None = None  # None on ns-3: a simulated run's clock is the model's
    ideal_link_load: float | None = None  # what a link-paced run keeps where its paths make it under 1 (placed_load)
    resent_packets: int | None = None  # packets the ranks sent again (None: a repetition kept before it was)
    link_drops: int | None = None  # packets the links' queues dropped (None: not measured, or kept before it was)

    @staticmethod
    def of(seed: int, report: GraphRunReport) -> Repetition:
        return Repetition(seed, report.job_s, report.checked, report.machine_bound, report.machine_bound_reason,
                          report.busiest_link, report.busiest_link_load, report.cpu_idle, report.ideal_link_load,
                          report.resent_packets, report.link_drops)

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "job_s": self.job_s, "checked": self.checked, "machine_bound": self.machine_bound,
                "reason": self.reason, "busiest_link": self.busiest_link, "busiest_link_load": self.busiest_link_load,
                "cpu_idle": self.cpu_idle, "ideal_link_load": self.ideal_link_load,
                "resent_packets": self.resent_packets, "link_drops": self.link_drops}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Repetition:
        return Repetition(int(d["seed"]), float(d["job_s"]), bool(d["checked"]), d.get("machine_bound"),
                          d.get("reason"), d.get("busiest_link"), d.get("busiest_link_load"), d.get("cpu_idle"),
                          d.get("ideal_link_load"), d.get("resent_packets"), d.get("link_drops"))


def usable(reps: Sequence[Repetition]) -> list[Repetition]:
    """The repetitions whose time says something: exact, and not limited by the machine."""
    return [r for r in reps if r.checked and not r.machine_bound]


def median_time(reps: Sequence[Repetition]) -> float | None:
    good = usable(reps)
    return statistics.median(r.job_s for r in good) if good else None


def time_range(reps: Sequence[Repetition]) -> tuple[float, float] | None:
    """The usable repetitions' fastest and slowest time (None: none is usable)."""
    good = usable(reps)
    if not good:
        return None
    s = spread(r.job_s for r in good)
    return s["min"], s["max"]


def judged_times(sides: Mapping[str, Sequence[Repetition]], min_repetitions: int = MIN_REPETITIONS
                 ) -> tuple[float | None, float | None, bool]:
    """A run's median time on BMv2 and on ns-3, and whether it is judged (enough usable BMv2 runs, one on ns-3)."""
    bmv2, ns3 = sides.get("bmv2", []), sides.get("ns3", [])
    return median_time(bmv2), median_time(ns3), len(usable(bmv2)) >= min_repetitions and bool(usable(ns3))


# ---- compare summaries: each run's medians over its repetitions (summary.json's runs) ----


def summary_usable(*summaries: Mapping[str, Any]) -> bool:
    """Every run kept MIN_REPETITIONS repetitions in its medians (not machine-bound, not failed)."""
    return all(s.get("headline_repetitions", 0) >= MIN_REPETITIONS for s in summaries)


def figure_value(s: Mapping[str, Any], key: str) -> float | None:
    v = s.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def judge_allreduce(summary: Mapping[str, Mapping[str, Any]], topos: Sequence[str], workers: Sequence[int]
                    ) -> tuple[list[Figure], list[dict[str, Any]]]:
    """Per run (`TOPO-nN-ALGO`, its twin `...-ns3`) its median iteration; per (topology, N) ring / NetReduce,
    PS / NetReduce and the ranking."""
    figures, rankings = [], []
    for topo in topos:
        for n in workers:
            times: dict[str, dict[str, float | None]] = {"bmv2": {}, "ns3": {}}
            judged = True
            for algo in ALGOS:
                b = summary.get(f"{topo}-n{n}-{algo}", {})
                s = summary.get(f"{topo}-n{n}-{algo}-ns3", {})
                ok = summary_usable(b)
                judged = judged and ok
                times["bmv2"][str(algo)] = figure_value(b, "median_s")
                times["ns3"][str(algo)] = figure_value(s, "median_s")
                figures.append(Figure(f"{topo} N={n} {algo}: median iteration (s)", times["bmv2"][str(algo)],
                                      times["ns3"][str(algo)], ok))
            for other in (Algorithm.RING, Algorithm.PS):
                figures.append(Figure(f"{topo} N={n} {other} / netreduce", quotient(times["bmv2"][str(other)],
                                      times["bmv2"]["netreduce"]), quotient(times["ns3"][str(other)],
                                      times["ns3"]["netreduce"]), judged))
            order = {side: fastest_first(t) for side, t in times.items()}
            complete = all(t is not None for side in times.values() for t in side.values())
            rankings.append({"what": f"{topo} N={n}", "bmv2": order["bmv2"], "ns3": order["ns3"], "usable": judged,
                             "ties": ties(times["bmv2"], times["ns3"]),
                             "same": same_ranking(times["bmv2"], times["ns3"]) if judged and complete else None})
    return figures, rankings


def fastest_first(times: Mapping[str, float | None]) -> list[str]:
    return sorted(times, key=lambda algo: times[algo] or float("inf"))


def tied(times: Mapping[str, float | None], a: str, b: str) -> bool:
    """Two algorithms' times within TOLERANCE of each other: an order between them means nothing."""
    ta, tb = times.get(a), times.get(b)
    return ta is not None and tb is not None and tb > 0 and abs(ta / tb - 1) <= TOLERANCE


def ties(bmv2: Mapping[str, float | None], ns3: Mapping[str, float | None]) -> list[list[str]]:
    """Pairs of algorithms tied (within TOLERANCE) on both backends."""
    return [[a, b] for a, b in combinations(sorted(bmv2), 2) if tied(bmv2, a, b) and tied(ns3, a, b)]


def same_ranking(bmv2: Mapping[str, float | None], ns3: Mapping[str, float | None]) -> bool:
    """The same order of the algorithms, fastest first, up to ties: two algorithms within TOLERANCE of each other
    on both backends may come in either order (ring and NetReduce at N = 2 move the same bytes: 0.99 against 1.01
    is no ranking). Every other pair in the same order on both; a missing time ranks nowhere."""
    for a, b in combinations(sorted(bmv2), 2):
        ba, bb, sa, sb = bmv2.get(a), bmv2.get(b), ns3.get(a), ns3.get(b)
        if ba is None or bb is None or sa is None or sb is None:
            return False
        if (ba < bb) != (sa < sb) and not (tied(bmv2, a, b) and tied(ns3, a, b)):
            return False
    return True


def judge_pair(summary: Mapping[str, Mapping[str, Any]], what: str, run: str, base: str) -> list[Figure]:
    """Two training runs: each one's steady-state iteration (and, with bulk TCP beside them, its goodput: the
    DLCP pair's streams leave from the simulator's ports, `background_fixed_ports`, so both backends put them on
    the same paths), and run / base in samples/s, named `what`."""
    out = []
    for name in (base, run):
        b, s = summary.get(name, {}), summary.get(f"{name}-ns3", {})
        out.append(Figure(f"{name}: training iteration (s)", figure_value(b, "iteration_s"),
                          figure_value(s, "iteration_s"), summary_usable(b)))
        if figure_value(b, "background_goodput_mbps") is not None:
            out.append(Figure(f"{name}: bulk TCP goodput (Mb/s)", figure_value(b, "background_goodput_mbps"),
                              figure_value(s, "background_goodput_mbps"), summary_usable(b)))
    rb, bb = summary.get(run, {}), summary.get(base, {})
    rs, bs = summary.get(f"{run}-ns3", {}), summary.get(f"{base}-ns3", {})
    out.append(Figure(what, quotient(figure_value(rb, "samples_per_s_real"), figure_value(bb, "samples_per_s_real")),
                      quotient(figure_value(rs, "samples_per_s_real"), figure_value(bs, "samples_per_s_real")),
                      summary_usable(rb, bb)))
    return out
