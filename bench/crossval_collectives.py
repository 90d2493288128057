"""bench.crossval's `collectives` part: every collective of the graph engines, BMv2 against ns-3.

One graph per collective (gradswitch.workload.generators: ring all-reduce as the reference, ring reduce-scatter and
all-gather, pairwise all-to-all, pipelined broadcast, send/recv to the next rank; and NetReduce's, in the
switches, of every collective both backends' switches run: `all_reduce-netreduce`, ...; and the all-reduce through
one parameter server, `all_reduce-ps`, on a network with a host more for it) at N = 4 and 8 on the rack and the
2x2 leaf-spine, each run on BMv2 (the hosts' graph engine, one network per topology and N) and on ns-3
(the simulator's graph engine) through gradswitch.experiment.graph_experiment.run_graph_spec with the same
job, the simulator given the testbed's costs exactly as bench.crossval.simulated sets them. Each BMv2 run is
repeated (seed, seed + 1, ...); its figure is the median of the repetitions that were not machine-bound (a
pair with fewer than MIN_REPETITIONS is not judged, and the table says so); the simulator runs the same seeds.
Per pair: the graph's time (its makespan), and each collective's time over ring all-reduce's on the same fabric
and backend (NetReduce's and the parameter server's: over the ring's of the same collective), within TOLERANCE.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gradswitch.experiment import results_file
from gradswitch.experiment.crossval import (
    IN_SWITCHES,
    ON_SERVERS,
    Figure,
    Repetition,
    host_pattern,
    judged_times,
    median_time,
    quotient,
    time_range,
    usable,
)
from gradswitch.experiment.graph_run import RESULTS
from gradswitch.experiment.spec import ExperimentSpec, Topo
from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT
from gradswitch.formats import check_format
from gradswitch.workload.generators import SEND_RECV, collective_graph, send_recv_graph
from gradswitch.workload.graph import IN_NETWORK, CollectiveKind, JobGraph
from gradswitch.workload.job import Algorithm

REFERENCE = CollectiveKind.ALL_REDUCE.value
# What the graph engines run, the reference first (send/recv: each rank to the next one, both at once).
PATTERNS: tuple[str, ...] = (REFERENCE, CollectiveKind.REDUCE_SCATTER.value, CollectiveKind.ALL_GATHER.value,
                             CollectiveKind.ALL_TO_ALL.value, CollectiveKind.BROADCAST.value, SEND_RECV)
# The buffer S: 1 MiB at 8 Mb/s is 0.8-1.9 s at the bound per collective (tests/mininet/test_graph_bmv2.py's
# size: at 256 KiB fixed costs left the links 70 % loaded). All-gather's nbytes is a rank's shard, S / N.
DEFAULT_NBYTES = 1 << 20


def in_network_patterns() -> tuple[str, ...]:
    """The collectives both backends' switches run, as patterns (`all_reduce-netreduce`, ...)."""
    return tuple(f"{k.value}{IN_SWITCHES}" for k in IN_NETWORK)


def server_patterns() -> tuple[str, ...]:
    """The collectives the parameter servers run (the graph engines' world all-reduces), as patterns."""
    return (f"{REFERENCE}{ON_SERVERS}",)


def every_pattern() -> tuple[str, ...]:
    return PATTERNS + in_network_patterns() + server_patterns()


def pattern_algo(pattern: str) -> Algorithm:
    if pattern.endswith(ON_SERVERS):
        return Algorithm.PS
    return Algorithm.NETREDUCE if pattern.endswith(IN_SWITCHES) else Algorithm.RING


def pattern_graph(pattern: str, ranks: int, nbytes: int) -> JobGraph:
    """One collective (or send/recv) on `ranks`, of the buffer `nbytes` (all-gather: output `nbytes`)."""
    pattern = host_pattern(pattern)
    if pattern == SEND_RECV:
        return send_recv_graph(ranks, nbytes, name=f"{SEND_RECV}-n{ranks}")
    kind = CollectiveKind(pattern)
    size = max(1, nbytes // ranks) if kind == CollectiveKind.ALL_GATHER else nbytes
    return collective_graph(kind, ranks, size, name=f"{pattern}-n{ranks}")


def run_name(topo: str, ranks: int, pattern: str) -> str:
    return f"{topo}-n{ranks}-{pattern}"


def judge(runs: dict[str, dict[str, list[Repetition]]], topos: Sequence[str], workers: Sequence[int],
          min_repetitions: int) -> list[Figure]:
    """Per (topology, N, pattern) the graph's median time on both backends, then per non-reference pattern its
    time over ring all-reduce's. runs[name]["bmv2" | "ns3"]: the repetitions. A BMv2 side with fewer than
    `min_repetitions` usable repetitions is not judged (a ratio: either of its two)."""
    figures = []
    for topo in topos:
        for n in workers:
            times: dict[str, tuple[float | None, float | None, bool]] = {}
            for pattern in PATTERNS:
                times[pattern] = judged_times(runs.get(run_name(topo, n, pattern), {}), min_repetitions)
                figures.append(Figure(f"{topo} N={n} {pattern} (s)", *times[pattern]))
            rb, rs, rok = times[REFERENCE]
            for pattern in PATTERNS[1:]:
                b, s, ok = times[pattern]
                figures.append(Figure(f"{topo} N={n} {pattern} / {REFERENCE}", quotient(b, rb), quotient(s, rs),
                                      ok and rok))
            for pattern in in_network_patterns() + server_patterns():
                sides = runs.get(run_name(topo, n, pattern), {})
                if not sides:
                    continue  # not measured (a store from before the switches or the servers ran it)
                b, s, ok = judged_times(sides, min_repetitions)
                figures.append(Figure(f"{topo} N={n} {pattern} (s)", b, s, ok))
                hb, hs, hok = times[host_pattern(pattern)]
                figures.append(Figure(f"{topo} N={n} {pattern} / {host_pattern(pattern)}", quotient(b, hb),
                                      quotient(s, hs), ok and hok))
    return figures


# ---- running ----


def bmv2_spec(topo: str, ranks: int, bw_mbps: float, seed: int) -> ExperimentSpec:
    return ExperimentSpec.of(name=f"{topo}-n{ranks}", workers=ranks, topo=Topo(topo), bw_mbps=bw_mbps, seed=seed,
                             iterations=1)


class Store:
    """The repetitions measured so far, in out/repetitions.json (run again with the same out, it resumes): its
    `format` (BENCHMARK_FORMAT; a file from before it had one reads as 1) beside the runs."""

    def __init__(self, out: Path) -> None:
        self.path = out / "repetitions.json"
        kept = (check_format(json.loads(self.path.read_text()), self.path, "cross-validation's repetitions",
                             BENCHMARK_FORMAT, missing_is=1) if self.path.exists() else {})
        raw: dict[str, dict[str, list[dict[str, Any]]]] = {k: v for k, v in kept.items() if k != "format"}
        self.runs = {name: {side: [self._complete(out, name, side, Repetition.from_dict(r)) for r in reps]
                            for side, reps in sides.items()}
                     for name, sides in raw.items()}

    @staticmethod
    def _complete(out: Path, name: str, side: str, rep: Repetition) -> Repetition:
        """A repetition kept before its busiest link, idle CPU or the links' drops were: those from its run's own
        report, where it says."""
        path = out / name / f"{side}-{rep.seed}" / RESULTS
        if (rep.busiest_link is not None and rep.link_drops is not None) or not path.exists():
            return rep
        try:
            results = results_file.read(path)
        except results_file.ResultsFileError:
            return rep  # not a run's results this code reads: kept as it was
        graph = results.get("graph")
        if graph is None:
            return rep
        if rep.busiest_link is None:
            rep = replace(rep, busiest_link=graph["busiest_link"], busiest_link_load=graph["busiest_link_load"],
                          cpu_idle=results["headline_extra"].get("cpu_idle"))
        return replace(rep, link_drops=graph["link_drops"])

    def has(self, name: str, side: str, seed: int) -> bool:
        return any(r.seed == seed for r in self.runs.get(name, {}).get(side, []))

    def add(self, name: str, side: str, rep: Repetition) -> None:
        self.runs.setdefault(name, {}).setdefault(side, []).append(rep)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"format": BENCHMARK_FORMAT, **self.as_dict()}, indent=1))

    def as_dict(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        return {name: {side: [r.to_dict() for r in reps] for side, reps in sides.items()}
                for name, sides in self.runs.items()}


Simulate = Callable[[ExperimentSpec, dict[str, float]], ExperimentSpec]


@dataclass(frozen=True)
class Plan:
    """How bench.crossval runs this part: its settings, the simulator's spec from the testbed's."""
    bw_mbps: float
    nbytes: int
    repeat: int
    min_repetitions: int
    extra: int  # runs again, at most, of a pattern whose BMv2 runs were machine-bound
    costs: dict[str, float]
    simulated: Simulate


def run_all(plan: Plan, topos: Sequence[str], workers: Sequence[int], out: Path,
            log: Callable[[str], None] = print) -> Store:
    """Every pattern `repeat` times on BMv2 (one network per topology and N, the runs on it one after another)
    and on ns-3 with the same seeds; a pattern with fewer than `min_repetitions` BMv2 runs that were not
    machine-bound runs again (seeds repeat + 1 ...), `extra` times at most. Every run is kept and reported."""
    store = Store(out)
    for topo in topos:
        for n in workers:
            run_fabric(plan, topo, n, store, out, log)
    return store


def run_fabric(plan: Plan, topo: str, n: int, store: Store, out: Path, log: Callable[[str], None]) -> None:
    from gradswitch.experiment.graph_experiment import run_graph_spec

    patterns = every_pattern()
    graphs = {p: pattern_graph(p, n, plan.nbytes) for p in patterns}
    base = bmv2_spec(topo, n, plan.bw_mbps, 1)
    seeds = range(1, plan.repeat + 1)

    def simulate(pattern: str, seed: int) -> None:
        name = run_name(topo, n, pattern)
        if not store.has(name, "ns3", seed):
            spec = base.but(seed=seed, algo=pattern_algo(pattern))
            report = run_graph_spec(plan.simulated(spec, plan.costs), graphs[pattern], out / name / f"ns3-{seed}")
            store.add(name, "ns3", Repetition.of(seed, report))
            log(f"[ns3] {name} seed {seed}: {report.job_s:.3f} s, exact {report.checked}")

    def short(pattern: str) -> bool:
        return len(usable(store.runs.get(run_name(topo, n, pattern), {}).get("bmv2", []))) < plan.min_repetitions

    for pattern in patterns:
        for seed in seeds:
            simulate(pattern, seed)
    todo = [(p, s) for p in patterns for s in seeds if not store.has(run_name(topo, n, p), "bmv2", s)]
    # one network for the hosts' and the switches' patterns, one with a host more for the parameter server's
    for network in ([p for p in patterns if pattern_algo(p) != Algorithm.PS],
                    [p for p in patterns if pattern_algo(p) == Algorithm.PS]):
        if any(p in network for p, _ in todo) or any(short(p) for p in network):
            network_runs(plan, base.but(algo=pattern_algo(network[0])), network, graphs, todo, store, out,
                         log, short, simulate)


def network_runs(plan: Plan, spec: ExperimentSpec, patterns: list[str], graphs: dict[str, JobGraph],
                 todo: list[tuple[str, int]], store: Store, out: Path, log: Callable[[str], None],
                 short: Callable[[str], bool], simulate: Callable[[str, int], None]) -> None:
    """The BMv2 runs of these patterns still to do, on one network made for `spec` (its topology and hosts)."""
    from gradswitch.experiment.graph_experiment import run_workload_on
    from gradswitch.experiment.placement import topology_for
    from gradswitch.experiment.testbed import Testbed
    from gradswitch.net.network import NetworkOptions

    topo, n = str(spec.network.topo), spec.network.workers
    suffix = "" if spec.algorithm.algo != Algorithm.PS else "-ps"
    with Testbed(topology_for(spec), NetworkOptions(run_dir=(out / f"net-{topo}-n{n}{suffix}").resolve())) as net:
        def once(pattern: str, seed: int) -> None:
            name = run_name(topo, n, pattern)
            report = run_workload_on(net, spec.but(seed=seed, algo=pattern_algo(pattern)), graphs[pattern],
                                     out / name / f"bmv2-{seed}")
            store.add(name, "bmv2", Repetition.of(seed, report))
            log(f"[bmv2] {name} seed {seed}: {report.job_s:.3f} s, exact {report.checked}, "
                f"machine-bound {report.machine_bound} ({report.machine_bound_reason})")
            simulate(pattern, seed)

        for seed in range(1, plan.repeat + 1):  # seeds outermost: a pattern's repetitions spread over the network
            for pattern in patterns:
                if (pattern, seed) in todo:
                    once(pattern, seed)
        for seed in range(plan.repeat + 1, plan.repeat + plan.extra + 1):
            for pattern in patterns:
                if short(pattern) and not store.has(run_name(topo, n, pattern), "bmv2", seed):
                    once(pattern, seed)


def rows(store: Store, topos: Sequence[str], workers: Sequence[int]) -> list[dict[str, Any]]:
    """Per run its repetitions' spread on both backends (what the JSON keeps beside the figures)."""
    out = []
    for topo in topos:
        for n in workers:
            for pattern in every_pattern():
                name = run_name(topo, n, pattern)
                sides = store.runs.get(name, {})
                if pattern not in PATTERNS and not sides:
                    continue  # not measured (a store from before the switches or the servers ran it)
                out.append({"run": name, "topo": topo, "workers": n, "pattern": pattern,
                            **{side: {"median_s": median_time(sides.get(side, [])),
                                      "spread_s": time_range(sides.get(side, [])),
                                      "usable": len(usable(sides.get(side, []))),
                                      "repetitions": [r.to_dict() for r in sides.get(side, [])]}
                               for side in ("bmv2", "ns3")}})
    return out
