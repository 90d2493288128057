"""NetReduce in the switch vs ring all-reduce vs a parameter server: one all-reduce of the same tensor.

For each topology (`rack`: one switch, flat aggregation; `leafspine`: hierarchical) and each
worker count N, the three algorithms run the same tensor on one network with every link
shaped to --bw; the ratios ring / NetReduce and PS / NetReduce of their median times are
printed next to the ideal ones, 2(N-1)/N and N (docs/architecture.md, "Link-rate bounds"), and next to the
ideal corrected for packet headers (NetReduce packets carry AGG_ELEMENTS_PER_PACKET x 4
bytes, the others the job's MTU). Next to each run it prints what limited it: the busiest
link's load (bytes the switches sent on their busiest port over what the link carries in the
run's time: about 1 when the links are the bottleneck) and the machine's idle CPU during the
iterations (the runner's `cpu_idle`; near 0 when the switches or the Python hosts are). --bmv2 runs every
switch on another simple_switch_grpc build (e.g. one without logging macros). Writes
bench/results/netreduce-<bw>mbps[-<tag>].json. Needs root, BMv2 and Mininet.

    python -m bench.netreduce [--workers 4,8] [--topos rack,leafspine] [--bw 1] [--size 64KiB] [--bmv2 PATH]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.common import Limits, bmv2_option, collective_args, save, spec_engines, use_bmv2
from gradswitch.experiment.shared_network import run_specs
from gradswitch.experiment.spec import ExperimentSpec, Topo
from gradswitch.net.bmv2 import one_switch_user_at_a_time
from gradswitch.protocol.netreduce import PACKET_BYTES
from gradswitch.roce.qp import Mode
from gradswitch.roce.wire import ROCE_OVERHEAD
from gradswitch.workload.job import Algorithm


def efficiency(payload: int) -> float:
    return payload / (payload + ROCE_OVERHEAD)


def main() -> None:
    parser = collective_args(__doc__, workers="4,8", bw=1.0, size="64KiB", iterations=3)
    parser.add_argument("--topos", default="rack,leafspine")
    bmv2_option(parser)
    parser.add_argument("--tag", default="", help="name suffix of the results file (e.g. nolog)")
    args = parser.parse_args()
    use_bmv2(args)
    mtu = ExperimentSpec().transport.mtu  # ring's and the PS's packets
    rows: list[dict[str, Any]] = []
    ran: list[ExperimentSpec] = []
    # The PS pipelines over its keys (key k's results go down while key k+1's pushes come
    # up): with one key per tensor it would take twice its bound, so every tensor has 8 keys.
    ps_key = max(4096, args.size // 8 // 4 * 4)
    header_factor = efficiency(PACKET_BYTES) / efficiency(mtu)  # NetReduce's packets vs the others'
    with tempfile.TemporaryDirectory() as tmp:
        for topo in args.topos.split(","):
            for n in (int(x) for x in args.workers.split(",")):
                print(f"{topo}, N = {n}", flush=True)
                specs = [ExperimentSpec.of(algo=Algorithm(algo), workers=n, size_bytes=args.size,
                                           iterations=args.iterations, topo=Topo(topo), bw_mbps=args.bw,
                                           transport=Mode(args.transport), name=f"{algo}-n{n}", ps_key_bytes=ps_key)
                         for algo in ("netreduce", "ring", "ps")]
                reports = run_specs(specs, Path(tmp) / f"{topo}-n{n}")
                ran += specs
                t: dict[str, float] = {}
                for s in specs:
                    median = reports[s.label]["summary"].get("median_s")
                    assert median is not None, f"{s.label}: no iteration finished"  # run_specs refuses a failed run
                    t[str(s.algorithm.algo)] = median
                limits = {str(s.algorithm.algo): Limits.of_report(reports[s.label]).figures() for s in specs}
                ideal_ring, ideal_ps = 2 * (n - 1) / n, float(n)
                rows.append({"topo": topo, "workers": n, "netreduce_s": t["netreduce"], "ring_s": t["ring"],
                             "ps_s": t["ps"], "ring_over_netreduce": t["ring"] / t["netreduce"],
                             "ps_over_netreduce": t["ps"] / t["netreduce"], "ideal_ring": ideal_ring,
                             "ideal_ps": ideal_ps, "ideal_ring_headers": ideal_ring * header_factor,
                             "ideal_ps_headers": ideal_ps * header_factor,
                             "netreduce_ratio_to_bound": reports[f"netreduce-n{n}"]["summary"]["ratio_to_bound"],
                             "retransmissions": {str(s.algorithm.algo): reports[s.label]["retransmissions"]
                                                 for s in specs},
                             "limits": limits})
    print(f"\n{'topology':<10}{'N':>3}{'NetReduce s':>13}{'ring s':>9}{'PS s':>9}"
          f"{'ring/NR':>9}{'ideal':>7}{'(hdr)':>7}{'PS/NR':>8}{'ideal':>7}{'(hdr)':>7}  resent NR/ring/PS")
    for r in rows:
        print(f"{r['topo']:<10}{r['workers']:>3}{r['netreduce_s']:>13.3f}{r['ring_s']:>9.3f}{r['ps_s']:>9.3f}"
              f"{r['ring_over_netreduce']:>9.2f}{r['ideal_ring']:>7.2f}{r['ideal_ring_headers']:>7.2f}"
              f"{r['ps_over_netreduce']:>8.2f}{r['ideal_ps']:>7.2f}{r['ideal_ps_headers']:>7.2f}"
          f"  {'/'.join(str(r['retransmissions'][a]) for a in ('netreduce', 'ring', 'ps'))}")
    print(f"\n{'topology':<10}{'N':>3}  busiest link load / CPU idle during the iterations")
    for r in rows:
        print(f"{r['topo']:<10}{r['workers']:>3}  " + "   ".join(
            f"{a} {_pct(r['limits'][a]['busiest_link_load'])} / {_pct(r['limits'][a]['cpu_idle'])}"
            + (" (machine-bound)" if r["limits"][a]["machine_bound"] else "") for a in ("netreduce", "ring", "ps")))
    print(f"links {args.bw:g} Mb/s, {args.size / 2**10:.0f} KiB per all-reduce, {args.transport}, "
          f"NetReduce {PACKET_BYTES} B per packet, others MTU {mtu}, "
          f"{args.iterations} iterations each, PS keys of {ps_key // 1024} KiB, medians, one run; "
          "(hdr): ideal with per-packet headers")
    figures = {"bw_mbps": args.bw, "size_bytes": args.size, "ps_key_bytes": ps_key, "transport": args.transport,
               "iterations": args.iterations, "netreduce_payload_bytes": PACKET_BYTES, "mtu": mtu, "rows": rows}
    name = "-".join(x for x in (f"netreduce-{args.bw:g}mbps", args.tag) if x)
    print(f"written {save(name, figures, engines=spec_engines(ran))}")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


if __name__ == "__main__":
    with one_switch_user_at_a_time():  # no test or other benchmark on the switches meanwhile
        main()
