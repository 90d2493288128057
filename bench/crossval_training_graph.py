"""bench.crossval's `training-graph` and `dlcp-graph` parts: the training and DLCP parts' pairs on the graph
engines, BMv2 against ns-3.

The training part (bench.crossval.training_specs: ResNet-50 at scale 0.008 on a rack of 4 at 20 Mb/s, emulated
V100s, layer sync, 25 MB DDP buckets; ring and NetReduce) runs the hosts' and the simulator's training loops.
Here the same jobs are execution graphs (gradswitch/experiment/training_graph.py: a forward and a backward node
per layer, an all-reduce per bucket), run by the hosts' graph engine on BMv2 (computation dilated by the spec's
D, one network for every run) and by the simulator's graph engine on ns-3 with the testbed's costs exactly as
bench.crossval.simulated sets them, its computation dilated by the same D (graph_experiment's sim_dilation), so
that both runs see the same links against the same computation. Each BMv2 run is repeated (seeds 1..R); a run's
figure is its median iteration (after the warm-up, the emulated cluster's seconds) over the repetitions that were
not machine-bound (a side with fewer than MIN_REPETITIONS is not judged); then NetReduce's speed-up over ring,
ring's iteration over NetReduce's (samples/s), each within bench.crossval's tolerance. The DLCP pair
(bench.crossval.dlcp_specs: VGG-16 priority partitions under bulk TCP on the leaf-spine, baseline-class against
DLCP priority) runs the same way, each partition's all-reduce in the layer class the loop's writes carry.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.crossval_collectives import Simulate, Store
from gradswitch.experiment import bottleneck
from gradswitch.experiment.crossval import Figure, Repetition, judged_times, median_time, quotient, time_range, usable
from gradswitch.experiment.graph_run import GraphRunReport
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.training_graph import ideal_link_load, spec_training_graph
from gradswitch.workload.generators import iteration_times
from gradswitch.workload.graph import JobGraph


def repetition(seed: int, report: GraphRunReport, graph: JobGraph, warmup: int, ideal_load: float | None = None
               ) -> Repetition:
    """A run's repetition, its time the median iteration after the warm-up (the emulated cluster's seconds). With
    the job's ideal link load (a BMv2 run), judged as the training loop's runs are: idle CPU, and the busiest link
    against the ideal's load (a graph report alone judges a graph with computation by its CPU)."""
    times = iteration_times(graph, report.run)
    if len(times) <= warmup:
        raise ValueError(f"{graph.name}: {len(times)} iterations, none after the {warmup} of warm-up")
    rep = replace(Repetition.of(seed, report), job_s=statistics.median(times[warmup:]))
    if ideal_load is None:
        return rep
    judged = bottleneck.judge(report.cpu_idle, report.busiest_link_load, ideal_load)
    return replace(rep, machine_bound=judged.machine_bound, reason=judged.reason)


def run_all(specs: Sequence[ExperimentSpec], simulated: Simulate, costs: dict[str, float], repeat: int,
            min_repetitions: int, extra: int, out: Path, log: Callable[[str], None] = print) -> Store:
    """Every spec's training graph `repeat` times on BMv2 (one rack network, seeds outermost) and on ns-3 with
    the same seeds; a run with fewer than `min_repetitions` BMv2 repetitions that were not machine-bound runs
    again (seeds repeat + 1, ...), `extra` times at most. Resumes from out/repetitions.json."""
    from gradswitch.experiment.graph_experiment import run_graph_spec, run_workload_on
    from gradswitch.experiment.placement import topology_for
    from gradswitch.experiment.testbed import Testbed
    from gradswitch.net.network import NetworkOptions

    store = Store(out)
    plans = {s.label: spec_training_graph(s, s.measurement.iterations) for s in specs}
    seeds = range(1, repeat + 1)

    def simulate(spec: ExperimentSpec, seed: int) -> None:
        run_spec, graph, dilation = plans[spec.label]
        if not store.has(spec.label, "ns3", seed):
            report = run_graph_spec(simulated(run_spec.but(seed=seed), costs), graph,
                                    out / spec.label / f"ns3-{seed}", sim_dilation=dilation)
            store.add(spec.label, "ns3", repetition(seed, report, graph, spec.measurement.warmup))
            log(f"[ns3] {spec.label} seed {seed}: iteration {store.runs[spec.label]['ns3'][-1].job_s:.4f} s, "
                f"exact {report.checked}")

    def short(spec: ExperimentSpec) -> bool:
        return len(usable(store.runs.get(spec.label, {}).get("bmv2", []))) < min_repetitions

    for spec in specs:
        for seed in seeds:
            simulate(spec, seed)
    todo = [(s, seed) for seed in seeds for s in specs if not store.has(s.label, "bmv2", seed)]
    if not todo and not any(short(s) for s in specs):
        return store
    with Testbed(topology_for(specs[0]), NetworkOptions(run_dir=(out / "net").resolve())) as net:
        def once(spec: ExperimentSpec, seed: int) -> None:
            run_spec, graph, dilation = plans[spec.label]
            report = run_workload_on(net, run_spec.but(seed=seed), graph, out / spec.label / f"bmv2-{seed}",
                                     dilation=dilation)
            rep = repetition(seed, report, graph, spec.measurement.warmup, ideal_link_load(spec, net.topo))
            store.add(spec.label, "bmv2", rep)
            log(f"[bmv2] {spec.label} seed {seed}: iteration {rep.job_s:.4f} s, exact {report.checked}, "
                f"machine-bound {rep.machine_bound} ({rep.reason})")
            simulate(spec, seed)

        for spec, seed in todo:
            once(spec, seed)
        for seed in range(repeat + 1, repeat + extra + 1):
            for spec in specs:
                if short(spec) and not store.has(spec.label, "bmv2", seed):
                    once(spec, seed)
    return store


def judge(store: Store, ring: str, netreduce: str, min_repetitions: int,
          ratio: str = "training graph speed-up: NetReduce / ring (samples/s)") -> list[Figure]:
    """Each run's median iteration on both backends, then the second run's speed-up over the first (samples/s),
    named `ratio` (the DLCP pair: priority over baseline-class)."""
    figures = []
    times = {}
    for label in (ring, netreduce):
        times[label] = judged_times(store.runs.get(label, {}), min_repetitions)
        figures.append(Figure(f"training graph {label}: iteration (s)", *times[label]))
    (rb, rs, rok), (nb, ns, nok) = times[ring], times[netreduce]
    figures.append(Figure(ratio, quotient(rb, nb), quotient(rs, ns), rok and nok))
    return figures


def rows(store: Store, labels: Sequence[str]) -> list[dict[str, Any]]:
    """Per run its repetitions' spread on both backends (what the JSON keeps beside the figures)."""
    return [{"run": label, **{side: {"median_iteration_s": median_time(reps), "spread_s": time_range(reps),
                                     "usable": len(usable(reps)), "repetitions": [r.to_dict() for r in reps]}
                              for side in ("bmv2", "ns3")
                              for reps in [store.runs.get(label, {}).get(side, [])]}}
            for label in labels]
