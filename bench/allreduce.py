"""Ring all-reduce and the parameter server on rate-limited links, as ratios to their lower bounds.

For each worker count N, both algorithms run the same tensor on the same Mininet `rack`
(one BMv2 switch, every link shaped to --bw): the median iteration time divided by the
link-rate lower bound (ring 2(N-1)/N * S / B, PS with one server N * S / B; docs/architecture.md, "Link-rate bounds").
Prints the table, writes bench/results/allreduce.json. Needs root, BMv2 and Mininet.

    python -m bench.allreduce [--workers 2,4,8] [--bw 20] [--size 512KiB] [--iterations 5] [--bmv2 PATH]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.common import Limits, bmv2_option, collective_args, save, spec_engines, use_bmv2
from gradswitch.experiment.shared_network import run_specs
from gradswitch.experiment.spec import ExperimentSpec, Topo
from gradswitch.net.bmv2 import one_switch_user_at_a_time
from gradswitch.roce.qp import Mode
from gradswitch.workload.job import Algorithm


def main() -> None:
    parser = collective_args(__doc__, workers="2,4,8", bw=20.0, size="512KiB", iterations=5)
    bmv2_option(parser)
    args = parser.parse_args()
    use_bmv2(args)
    rows: list[dict[str, Any]] = []
    ran: list[ExperimentSpec] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.workers.split(",")):
            print(f"N = {n}", flush=True)
            specs = [ExperimentSpec.of(algo=Algorithm(algo), workers=n, size_bytes=args.size,
                                       iterations=args.iterations,
                                       topo=Topo.RACK, bw_mbps=args.bw, transport=Mode(args.transport),
                                       name=f"{algo}-n{n}")
                     for algo in ("ring", "ps")]
            reports = run_specs(specs, Path(tmp) / f"n{n}")
            ran += specs
            for spec in specs:
                s = reports[spec.label]["summary"]
                limits = Limits.of_report(reports[spec.label])
                rows.append({"algo": spec.algorithm.algo, "workers": n, "median_s": s["median_s"],
                             "lower_bound_s": s["lower_bound_s"], "ratio_to_bound": s["ratio_to_bound"],
                             "retransmissions": reports[spec.label]["retransmissions"], **limits.figures()})
    print(f"\n{'algo':<6}{'N':>3}{'median s':>11}{'bound s':>10}{'ratio':>8}  what limited it")
    for r in rows:
        limits = Limits.of_figures(r)
        print(f"{r['algo']:<6}{r['workers']:>3}{r['median_s']:>11.3f}{r['lower_bound_s']:>10.3f}"
              f"{r['ratio_to_bound']:>7.2f}x  {limits.line()}")
    print(f"rack, links {args.bw:g} Mb/s, {args.size / 2**10:.0f} KiB per all-reduce, {args.transport}, "
          f"{args.iterations} iterations each, one run")
    figures = {'bw_mbps': args.bw, 'size_bytes': args.size, 'rows': rows}
    print(f"written {save(f'allreduce-{args.bw:g}mbps', figures, engines=spec_engines(ran))}")


if __name__ == "__main__":
    with one_switch_user_at_a_time():  # no test or other benchmark on the switches meanwhile
        main()
