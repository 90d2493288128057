"""Every collective as a Chakra trace on the simulator, as `gradswitch experiment --backend ns3 --workload-et`
runs it: `gradswitch export-et`'s trace of one collective (8 ranks, 64 MiB, the rank's buffer; all-gather: its
shard), on the rack at 100 Gb/s; each one's time against its link-rate bound (gradswitch/workload/collective_bounds.py)
and its check. Writes bench/results/workload-et-ns3.json and prints the table (docs/workloads.md).

    python -m bench.workload_et [--workers 8] [--size 64MiB] [--out runs/bench-workload-et]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from bench.common import Limits, save
from gradswitch.cli.main import parse_size
from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.spec import Backend, Engine, ExperimentSpec, Topo
from gradswitch.workload.generators import collective_graph, send_recv_graph
from gradswitch.workload.graph import CollectiveKind

BW_MBPS = 100_000.0
KINDS = [k.value for k in CollectiveKind] + ["send_recv"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--size", type=parse_size, default=64 << 20)
    ap.add_argument("--out", type=Path, default=Path("runs/bench-workload-et"))
    args = ap.parse_args()
    base = ExperimentSpec.of(backend=Backend.NS3, topo=Topo.RACK, workers=args.workers, bw_mbps=BW_MBPS)
    rows = []
    print(f"{'collective':<16}{'time ms':>10}{'bound ms':>10}{'ratio':>8}  checked")
    for kind in KINDS:
        graph = (send_recv_graph(args.workers, args.size) if kind == "send_recv"
                 else collective_graph(CollectiveKind(kind), args.workers, args.size))
        report = run_graph_spec(replace(base, name=kind), graph, args.out / kind)
        (k,) = report.by_kind
        limits = Limits(report.busiest_link_load, None)  # simulated: the machine never sets the pace
        rows.append({"collective": kind, "workers": args.workers, "nbytes": args.size, "count": k.count,
                     "time_s": k.time_s, "bound_s": k.bound_s, "ratio": k.worst_ratio, "checked": report.checked,
                     **limits.figures()})
        print(f"{kind:<16}{k.time_s * 1e3:>10.3f}{k.bound_s * 1e3:>10.3f}{k.worst_ratio:>8.2f}  {report.checked}  "
              f"{limits.line()}")
    path = save("workload-et-ns3", {"what": "each collective as an exported Chakra trace on ns-3, rack, "
                                            f"{BW_MBPS:g} Mb/s", "bottleneck": "the links (simulated)", "rows": rows},
                engines=[Engine.GRAPH])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
