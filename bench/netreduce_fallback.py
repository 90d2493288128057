"""NetReduce's fallback to ring all-reduce and its return, measured on BMv2 (docs/faults.md, "NetReduce falls back
to ring").

A 2x2 leaf-spine fabric, 4 NetReduce workers (one reduction an iteration), links shaped to --bw; each round is one
run with `--fault switch-crash:spine1@AT,restart=R` (spine1 aggregates job 1's all-reduces, on either engine), on one
network for every round.
Per round, from the run's results.json, the watch's records (gradswitch/experiment/netreduce_watch.py) and the
workers' results (gradswitch/hosts/fallback.py):

- `detect_s`: the kill to the controller's switch-down event;
- `fallback_s`: that event to the last worker agreeing on ring (the time the job had no path);
- `return_s`: the controller's switch-up event (spine1 restarted, reprogrammed) to the last worker agreeing on
  the switch again;
- `before_s`, `during_s`, `after_s`: the median iteration time in-network before the crash, by ring while spine1
  was out, in-network again after it;
- every iteration exact, none lost.

Needs root and BMv2; writes bench/results/netreduce-fallback-<bw>mbps.json.

    python -m bench.netreduce_fallback [--rounds 3] [--iterations 50] [--bw 20] [--at 3] [--restart 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Limits, bmv2_option, save, spec_engines, use_bmv2
from gradswitch.experiment.netreduce_watch import RECORDS_FILE, read_records
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.runner import run_on
from gradswitch.experiment.spec import ExperimentSpec, spec_from_dict
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.version import code_version
from gradswitch.workload import worker_result

SIZE_BYTES = 256 << 10


def spec_of(iterations: int, bw: float, at: float, restart: float) -> ExperimentSpec:
    """The scenario on the default engine: spine1 aggregates job 1's NetReduce all-reduces (the loop's job 1; the
    graph engine's all-reduce switch job aggregates on its job's spine, the same), as bench.sim_netreduce_fallback
    simulates it."""
    return spec_from_dict({"algo": "netreduce", "workers": 4, "topo": "leafspine", "size_bytes": SIZE_BYTES,
                           "bw_mbps": bw, "iterations": iterations,
                           "faults": [f"switch-crash:spine1@{at:g},restart={restart:g}"]})


def one_round(net: Testbed, spec: ExperimentSpec, out: Path) -> dict[str, Any]:
    report = run_on(net, spec, out, progress=False)
    if not report["ok"]:
        raise RuntimeError(f"{out}: the run failed: {report['errors']}")
    job_dir = out / "run" / "job1"
    workers = [worker_result.read(job_dir, int(p.stem.removeprefix("result-")))
               for p in sorted(job_dir.glob("result-*.json"))]
    down, up = read_records(job_dir / RECORDS_FILE)
    changes = [w["fallback"]["changes"] for w in workers]
    ring_from, switch_from = changes[0][0]["from_reduction"], changes[0][1]["from_reduction"]
    times = [float(it["time_s"]) for it in report["iterations"]]
    (fault,) = report["faults"]
    extra = report["headline_extra"]
    return {"exact": all(it["correct"] and it["wrong_elements"] == 0 for it in report["iterations"]),
            "iterations": len(times), "iterations_lost": fault["iterations_lost"],
            "ring_iterations": switch_from - ring_from,
            "detect_s": fault["time_to_detect_s"],
            "fallback_s": max(c[0]["agreed_at"] for c in changes) - down["noticed_at"],
            "return_s": max(c[1]["agreed_at"] for c in changes) - up["noticed_at"],
            "before_s": statistics.median(times[1:ring_from]),  # (iteration 0 pays for the first window)
            "during_s": statistics.median(times[ring_from:switch_from]),
            "after_s": statistics.median(times[switch_from:]),
            "cpu_idle": extra.get("cpu_idle"), "busiest_link_load": extra.get("busiest_link_load")}


def summary(rounds: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    keys = ("detect_s", "fallback_s", "return_s", "before_s", "during_s", "after_s")
    return {k: {"median": statistics.median(r[k] for r in rounds), "min": min(r[k] for r in rounds),
                "max": max(r[k] for r in rounds)} for k in keys}


def measure(rounds: int, iterations: int, bw: float, at: float, restart: float) -> dict[str, Any]:
    spec = spec_of(iterations, bw, at, restart)
    with tempfile.TemporaryDirectory(prefix="gs-netreduce-fallback-") as tmp, \
            Testbed(topology_for(spec), NetworkOptions(run_dir=Path(tmp) / "net")) as net:
        samples = [one_round(net, spec, Path(tmp) / f"round{i}") for i in range(rounds)]
    idle = [s["cpu_idle"] for s in samples if s["cpu_idle"] is not None]
    loads = [s["busiest_link_load"] for s in samples if s["busiest_link_load"] is not None]
    limits = Limits(statistics.median(loads) if loads else None, statistics.median(idle) if idle else None)
    print(limits.line())
    return {"code_version": code_version(),
            "setup": {"topology": "leafspine 2x2, 2 hosts per leaf", "workers": 4, "algo": "netreduce",
                      "size_bytes": SIZE_BYTES, "bw_mbps": bw, "iterations": iterations,
                      "fault": spec.faults.faults[0].label},
            "rounds": rounds, "all_exact": all(s["exact"] for s in samples),
            "summary": summary(samples), "samples": samples, **limits.figures()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.netreduce_fallback", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs, each with one crash and restart (default 3)")
    parser.add_argument("--iterations", type=int, default=50, help="iterations of each run (default 50)")
    parser.add_argument("--bw", type=float, default=20.0, help="every link's rate, Mb/s (default 20)")
    parser.add_argument("--at", type=float, default=3.0, help="spine1 killed this long after the go, s (default 3)")
    parser.add_argument("--restart", type=float, default=4.0, help="and restarted this long after, s (default 4)")
    bmv2_option(parser)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.iterations < 10 or args.bw <= 0 or args.at <= 0 or args.restart <= 0:
        parser.error(f"--rounds {args.rounds} --iterations {args.iterations} --bw {args.bw} --at {args.at} "
                     f"--restart {args.restart}: give a round or more, 10 iterations or more, and times and a rate "
                     "above 0")
    use_bmv2(args)
    figures = measure(args.rounds, args.iterations, args.bw, args.at, args.restart)
    for key, s in figures["summary"].items():
        print(f"{key:12} median {s['median'] * 1000:8.1f} ms  [{s['min'] * 1000:.1f}-{s['max'] * 1000:.1f}]")
    print(save(f"netreduce-fallback-{args.bw:g}mbps", figures,
               engines=spec_engines([spec_of(args.iterations, args.bw, args.at, args.restart)])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
