"""The fault tables: the controller's detection and rerouting on the testbed (bench/results/switch-faults.json), a
fault's cost on the simulator (sim-faults.json) and NetReduce's fallback to ring and return on ns-3 against BMv2
(sim-netreduce-fallback.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradswitch.experiment.tables.cells import table
from gradswitch.experiment.tables.reading import load, machine_bound


def switch_faults_table(results: Path) -> str:
    """bench/switch_faults.py: the controller's detection and rerouting times, a switch's restart."""
    data = load(results, "switch-faults.json")
    s = data["summary"]
    mark = " (machine-bound)" if machine_bound(data) else ""

    def ms(key: str) -> str:
        return f"{s[key]['median'] * 1000:.0f} [{s[key]['min'] * 1000:.0f}-{s[key]['max'] * 1000:.0f}]"

    rows = [["spine1's process killed" + mark, ms("switch_detect_s"), ms("switch_reroute_s"), ms("switch_gap_s"),
             f"restarted, forwarding again: {ms('restart_s')}"],
            ["leaf1-spine1 cut (set_link, patched)" + mark, ms("link_detect_s"), ms("link_reroute_s"), ms("link_gap_s"),
             f"up: noticed {ms('link_up_detect_s')}, flow through spine1 {ms('link_back_s')}"]]
    return table([f"fault ({data['rounds']} rounds, ms: median [min-max])", "detected", "rerouted",
                  f"flow's longest gap ({data['flow']['rate_pps']:g} packets/s)", "back"], rows)


def sim_faults_table(results: Path) -> str:
    """bench/sim_faults.py: per fault on ns-3, detection (the assumed delay), recovery, iterations lost and the
    job's iterations/s before, during and after (medians [min-max] over the seeds)."""
    data = load(results, "sim-faults.json")

    def span(v: Any, scale: float = 1.0, digits: int = 0) -> str:
        if v is None:
            return "-"
        lo, mid, hi = (f"{v[k] * scale:.{digits}f}" for k in ("min", "median", "max"))
        return mid if lo == hi else f"{mid} [{lo}-{hi}]"

    rows = []
    for s in data["summary"].values():
        before, during, after = (span(s[f"throughput_{p}"], digits=2) for p in ("before", "during", "after"))
        rows.append([f"{s['fabric']} ({s['workers']} workers): {', '.join(s['faults'])}", "/".join(s["outcomes"]),
                     span(s["time_to_detect_s"], 1000), span(s["time_to_recover_s"], 1000),
                     span(s["recover_over_rto"], digits=2), span(s["iterations_lost"]), before, during, after,
                     span(s["during_over_clean"], digits=2), span(s["after_over_clean"], digits=2),
                     f"{s['exact']} of {s['runs']}" + ("" if "interrupted" not in s["outcomes"] else
                                                      f" ({s['completed']['median']:.0f} of "
                                                      f"{data['iterations'][s['fabric']]} iterations kept)")])
    return table([f"fault ({data['model']} x{data['scale']:g}, {data['algo']}, {data['rate_mbps'] / 1000:g} Gb/s, "
                  f"seeds {len(data['seeds'])}: median [min-max])", "outcome", "detected ms (assumed)",
                  "recovered ms", "recovered / RTO", "iterations lost", "it/s before", "it/s during",
                  "it/s after", "during / clean", "after / clean", "exact"], rows)


def sim_netreduce_fallback_table(results: Path) -> str:
    """bench/sim_netreduce_fallback.py: NetReduce's fallback and return on ns-3 against the BMv2 runs of the same
    scenario (medians [min-max] over the ECMP seeds; the ratio to BMv2's median)."""
    data = load(results, "sim-netreduce-fallback.json")

    def cell(case: dict[str, Any], key: str) -> str:
        v, ratio = case["ns3"][key], case["ns3_over_bmv2"][key]
        lo, mid, hi = (f"{v[k] * 1000:.0f}" if key in ("fallback_s", "return_s") else f"{v[k]:.3f}"
                       for k in ("min", "median", "max"))
        return (mid if lo == hi else f"{mid} [{lo}-{hi}]") + f" ({ratio:.2f}x)"

    rows = []
    for case in data["cases"].values():
        setup = case["setup"]
        rows.append([f"{setup['bw_mbps']:g} Mb/s" + (" (BMv2 machine-bound)" if case["bmv2_machine_bound"] else ""),
                     *(cell(case, k) for k in ("fallback_s", "return_s", "before_s", "during_s", "after_s")),
                     f"{case['ring_over_netreduce']['ns3']:.2f} / {case['ring_over_netreduce']['bmv2']:.2f}",
                     "yes" if case["all_exact"] else "NO"])
    return table([f"every link (ns-3, seeds {data['seeds']}; x: over BMv2's median)", "switch-down -> all on ring ms",
                  "switch-up -> all back ms", "iteration before s", "on ring s", "after s",
                  "ring / in-network ns-3 / BMv2", "exact"], rows)
