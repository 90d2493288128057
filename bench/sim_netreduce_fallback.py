"""NetReduce's fallback to ring and its return, on the simulator, against BMv2 (docs/faults.md, "On the simulator").

The scenario of bench/netreduce_fallback.py (a 2x2 leaf-spine, 4 workers, 256 KiB, spine1 killed 3 s into the run
and restarted 4 s later), read from the BMv2 results it wrote (bench/results/netreduce-fallback-{5,20}mbps.json:
the same size, rate, iterations and fault), simulated once per ECMP seed. Per run: when the workers agreed on ring
and on the switch again (after the control plane noticed the crash, and after the restart), the median iteration
before the crash, wholly on ring, and back on the switch, and every sum's check. Each figure's ratio to BMv2's
median is in the JSON; the BMv2 run at 20 Mb/s is machine-bound (its in-network iteration is the switches' and
hosts' per-packet cost), so only the 5 Mb/s one is a cross-validation.

What rests on assumptions: the simulated control plane notices the crash after a fixed delay (gradswitch/sim/faults.py
SWITCH_DETECT_S, BMv2's measured median) and the workers' agreement, on ring and back, takes one round trip of
their queue pairs (gs-fault-schedule's FallbackAgreementDelay at zero); on BMv2 the agreement goes through files
the workers poll a few times a second.

Each run is the setup's spec run on the simulator's graph engine through the package's pipeline
(gradswitch/experiment/simulated_graph.py simulate_spec). The graph's all-reduces are a NetReduce switch job of their
own, aggregated on the spine of the graph's job id, the loop's job 1's (spine1 on this fabric): the BMv2 run's crash
of its job's aggregating spine is the graph's too (graph_fault checks it; each run's `fault` names it).

    python -m bench.sim_netreduce_fallback [--seeds 3] [--name sim-netreduce-fallback]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.common import RESULTS, Limits, save
from gradswitch.control.controls import netreduce as nr
from gradswitch.experiment.graph_as_loop import training_graph_jobs
from gradswitch.experiment.graph_run import aggregation_spine_of
from gradswitch.experiment.report import busiest_link_load
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.simulated import link_usage
from gradswitch.experiment.simulated_graph import simulate_spec
from gradswitch.experiment.spec import Engine, ExperimentError, ExperimentSpec, spec_from_dict
from gradswitch.experiment.stats import spread
from gradswitch.experiment.tables.reading import load
from gradswitch.protocol.netreduce import JobLayout
from gradswitch.sim.faults import SimFault
from gradswitch.topology.faults import Fault, parse_fault
from gradswitch.version import code_version
from gradswitch.workload.graph import CollectiveKind

BMV2_RESULTS = ("netreduce-fallback-5mbps.json", "netreduce-fallback-20mbps.json")
FIGURES = ("fallback_s", "return_s", "before_s", "during_s", "after_s")


def graph_fault(spec: ExperimentSpec, fault: Fault) -> Fault:
    """The BMv2 run's crash, of the loop's aggregation spine (its job 1's), checked to be the spine that aggregates
    the graph engine's all-reduces too (their switch job aggregates on the spine of the graph's own job id, the
    loop's: gradswitch/experiment/graph_run.py aggregation_spine_of): the same fault of the job's aggregation switch
    on the engine that runs it."""
    plan = plan_run(spec)
    [tg] = training_graph_jobs(spec, plan.topology)
    loop_job = plan.first
    loop_spine = nr.plan_job(plan.topology, JobLayout(loop_job.job_id, len(loop_job.workers), loop_job.credits),
                             tuple(n.host for n in loop_job.workers)).aggregation_switch
    if fault.target != loop_spine:
        raise SystemExit(f"error: the BMv2 run's fault {fault.label} is not of its job's aggregation switch "
                         f"({loop_spine}): this benchmark re-runs a crash of the aggregating spine")
    graph_spine = aggregation_spine_of(plan.topology, tg.job, CollectiveKind.ALL_REDUCE)
    if graph_spine != loop_spine:
        raise SystemExit(f"error: the graph's all-reduces aggregate on {graph_spine}, the loop's job on {loop_spine}: "
                         "the benchmark compares a crash of the same aggregating spine")
    return fault


def one_run(setup: dict[str, Any], seed: int, out: Path) -> dict[str, Any]:
    """The BMv2 run's setup on the simulator's graph engine (the package's pipeline, simulate_spec) with ECMP seed
    `seed`, its crash of the aggregating spine, the graph's too (graph_fault): its figures as
    bench.netreduce_fallback names them (fallback_s: from the control plane's notice to the agreement on ring;
    return_s: from the restart to the agreement on the switch)."""
    spec = spec_from_dict({"algo": "netreduce", "workers": setup["workers"], "topo": "leafspine",
                           "size_bytes": setup["size_bytes"], "bw_mbps": setup["bw_mbps"],
                           "iterations": setup["iterations"], "backend": "ns3", "ecmp_seed": seed, "seed": seed})
    fault = graph_fault(spec, parse_fault(setup["fault"]))
    spec = spec.but(faults=(fault,))
    spec.validate()
    try:
        simulated = simulate_spec(spec, out, progress=False)
    except ExperimentError as e:
        raise SystemExit(f"error: {e}") from None
    topo, cfg, result = simulated.network, simulated.jobs[0], simulated.result
    nodes = result.nodes[cfg.job_id]
    [m] = result.faults
    assert isinstance(m, SimFault)
    if None in (m.detected_s, m.fallback_s, m.returned_s, m.switch_recovered_s):
        raise RuntimeError(f"{out}: the job did not fall back and return: {m}")
    assert m.detected_s is not None and m.fallback_s is not None and m.returned_s is not None
    assert m.switch_recovered_s is not None
    times = [(it["start"], it["end"]) for it in nodes[0]["iterations"]]
    up = fault.at_s + (fault.restart_s or 0.0)
    return {"seed": seed, "fault": fault.label,
            "exact": all(n["ok"] and all(it["correct"] for it in n["iterations"]) for n in nodes.values()),
            "iterations": len(times), "detect_s": m.detected_s - fault.at_s,
            "fallback_s": m.fallback_s - m.detected_s, "return_s": m.returned_s - up,
            "before_s": statistics.median([e - s for s, e in times if e <= fault.at_s][1:]),
            "during_s": statistics.median([e - s for s, e in times if s >= m.fallback_s and e < m.switch_recovered_s]),
            "after_s": statistics.median([e - s for s, e in times if s >= m.switch_recovered_s]),
            "busiest_link_load": busiest_link_load(link_usage(topo, result))}


def compare(bmv2: dict[str, Any], seeds: int, out: Path) -> dict[str, Any]:
    runs = [one_run(bmv2["setup"], seed, out / f"s{seed}") for seed in range(seeds)]
    ours = {k: spread([r[k] for r in runs]) for k in ("detect_s", *FIGURES)}
    ratio = {k: ours[k]["median"] / bmv2["summary"][k]["median"] for k in FIGURES}
    return {"setup": bmv2["setup"], "bmv2_machine_bound": bmv2["machine_bound"], "runs": runs,
            "all_exact": all(r["exact"] for r in runs), "ns3": ours,
            "bmv2": {k: bmv2["summary"][k] for k in ("detect_s", *FIGURES)}, "ns3_over_bmv2": ratio,
            "ring_over_netreduce": {"ns3": ours["during_s"]["median"] / ours["before_s"]["median"],
                                    "bmv2": bmv2["summary"]["during_s"]["median"]
                                    / bmv2["summary"]["before_s"]["median"]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="ECMP (and run) seeds 0..N-1 (default 3)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gradswitch-sim-netreduce-fallback"))
    parser.add_argument("--name", default="sim-netreduce-fallback", help="bench/results/NAME.json")
    args = parser.parse_args()
    version = code_version()  # the code the runs start from (an edit while they run does not change them)
    cases = {}
    for name in BMV2_RESULTS:
        bmv2 = load(RESULTS, name)
        case = compare(bmv2, args.seeds, args.out / name.removesuffix(".json"))
        cases[name.removesuffix(".json")] = case
        ns3, r = case["ns3"], case["ns3_over_bmv2"]
        print(f"{name}: {case['setup']['bw_mbps']:g} Mb/s, exact {case['all_exact']}, ns-3 / BMv2: "
              + ", ".join(f"{k} {ns3[k]['median']:.3f} s ({r[k]:.2f}x)" for k in FIGURES)
              + (" [BMv2 machine-bound: not a cross-validation]" if case["bmv2_machine_bound"] else ""))
    loads = [r["busiest_link_load"] for c in cases.values() for r in c["runs"]]
    figures = Limits.simulated_figures(max(loads))
    path = save(args.name, {"code_version": version, "seeds": args.seeds, "cases": cases, **figures},
                engines=(Engine.GRAPH,))  # every run went through simulate_spec: the graph engine
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
