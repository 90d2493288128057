"""The tables of one switch and of the collectives on the testbed: the transport through BMv2, the instructions
and the packet rate of the switch program, ring and parameter-server all-reduce against their link-rate bounds,
NetReduce against both, and the switch's aggregation rate (bench/results/transport.json, instructions*.json,
forwarding*.json, allreduce-*.json, netreduce-*.json, netreduce-switch-*.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradswitch.experiment.tables.cells import idle, marked, mib, num, pct, ratio, table
from gradswitch.experiment.tables.reading import Json, build, load, machine_bound


def transport_table(results: Path) -> str:
    d = load(results, "transport.json")
    names = {"gbn": "go-back-N", "sr": "selective repeat"}
    rows = [[names.get(mode, mode), num(m["switch"]["goodput_mbps"], 0), num(m["direct"]["goodput_mbps"], 0),
             num(m["ratio"]), f"{m['switch']['retransmitted']}, {m['direct']['retransmitted']}", build(d)]
            for mode, m in d["modes"].items()]
    return table([f"transport: {mib(d['bytes'])} RoCE WRITE, MTU {d['mtu']}, one run", "through one BMv2 Mb/s",
                  "bare veth Mb/s", "BMv2 / veth", "resent (BMv2, veth)", "BMv2"], rows)


BEFORE_HEADERS = "before NetReduce's state became a header"
INSTRUCTION_FILES = (("first version", "-before"), (BEFORE_HEADERS, "-128fields"), ("now", ""))


def instructions_table(results: Path) -> str:
    rows = []
    for logging in ("-nolog", ""):
        for label, tag in INSTRUCTION_FILES:
            name = f"instructions{logging}{tag}.json"
            d = load(results, name)
            ours, base = d["per_packet"]["gradswitch"], d["per_packet"].get("one-table")
            rows.append(_instruction_row(build(d), f"gradswitch.p4, {label}", ours, base, name))
        rows.append(_instruction_row(build(d), "one-table program", base, None, name))
    return table(["BMv2", "program", "instructions per packet", "receive thread (zeroing metadata)",
                  "ingress thread", "egress thread", "transmit", "/ the one-table program's total in the same JSON",
                  "JSON"], rows)


def _instruction_row(bmv2: str, label: str, per: Json, base: Json | None, name: str) -> list[str]:
    return [bmv2, label, num(per["total"], 0), f"{num(per['receive'], 0)} ({num(per['reset_metadata'], 0)})",
            num(per["ingress"], 0), num(per["egress"], 0), num(per["transmit"], 0),
            num(per["total"] / base["total"]) if base else "-", name]


def forwarding_table(results: Path) -> str:
    rows = []
    for logging in ("-nolog", ""):
        for label, tag in ((BEFORE_HEADERS, "-before"), ("now", "")):
            name = f"forwarding{logging}{tag}.json"
            rows.append(_forwarding_row(load(results, name), label, name))
    return table(["BMv2", "gradswitch.p4", "packets/s, gradswitch.p4 vs one-table (the median run)",
                  "gradswitch.p4 / one-table, median [min, max] over runs", "runs", "machine-bound runs",
                  "CPU idle, gradswitch.p4 (median run)", "JSON"], rows)


def _forwarding_row(d: Json, label: str, name: str) -> list[str]:
    runs = d["runs"]
    median = next((r for r in runs if r["ratio"] == d["ratio"]), None)
    bound = [r for r in runs if machine_bound(r["gradswitch_limits"]) or machine_bound(r["minimal_limits"])]
    ratios = [r["ratio"] for r in runs]
    rates = f"{num(median['gradswitch_pps'] / 1e3, 0)} k vs {num(median['minimal_pps'] / 1e3, 0)} k" if median else "-"
    return [build(d), label, rates, ratio(d["ratio"], min(ratios), max(ratios)), str(len(runs)),
            f"{len(bound)} of {len(runs)}", idle(median["gradswitch_limits"]["cpu_idle"]) if median else "-", name]


# ---- collectives: all-reduce, NetReduce, the switch's aggregation rate ----


def allreduce_table(results: Path) -> str:
    rows = []
    for name in ("allreduce-5mbps.json", "allreduce-20mbps.json"):
        d = load(results, name)
        where = f"{d['bw_mbps']:g} Mb/s, {mib(d['size_bytes'])}, {build(d)}"
        for algo in ("ring", "ps"):
            rows += [[where, algo, str(r["workers"]), num(r["median_s"], 3), num(r["lower_bound_s"], 3),
                      marked(num(r["ratio_to_bound"]), machine_bound(r)), str(r["retransmissions"]),
                      pct(r["busiest_link_load"]), idle(r["cpu_idle"]), name]
                     for r in d["rows"] if r["algo"] == algo]
    return table(["links, tensor, BMv2", "algorithm", "N", "median s", "link-rate bound s", "time / bound", "resent",
                  "busiest link", "CPU idle", "JSON"], rows)


NETREDUCE_FILES = ("netreduce-10mbps.json", "netreduce-20mbps-nolog.json", "netreduce-50mbps-nolog.json",
                   "netreduce-5mbps.json")


def netreduce_table(results: Path) -> str:
    rows = []
    for name in NETREDUCE_FILES:
        d = load(results, name)
        where = f"{d['bw_mbps']:g} Mb/s, {mib(d['size_bytes'])}, {build(d)}"
        for r in d["rows"]:
            rows.append(_netreduce_row(r, where, d.get("iterations"), name))
    return table(["topology, N", "links, tensor, BMv2", "iterations", "NetReduce s", "NetReduce / its bound",
                  "ring / NetReduce (ratio of median times)", "ideal", "PS / NetReduce", "ideal",
                  "resent: NetReduce, ring, PS", "busiest link: NetReduce, ring, PS", "CPU idle: NetReduce, ring, PS",
                  "JSON"], rows)


def _netreduce_row(r: Json, where: str, iterations: Any, name: str) -> list[str]:
    algos = ("netreduce", "ring", "ps")
    lim, sent = r["limits"], r["retransmissions"]
    bound = {a: machine_bound(lim[a]) for a in algos}
    ring = marked(num(r["ring_over_netreduce"]), bound["netreduce"] or bound["ring"])
    ps = marked(num(r["ps_over_netreduce"]), bound["netreduce"] or bound["ps"])
    return [f"{r['topo']}, {r['workers']}", where, str(iterations), num(r["netreduce_s"], 3),
            num(r["netreduce_ratio_to_bound"]), ring, num(r["ideal_ring"]), ps,
            num(r["ideal_ps"]), ", ".join(str(sent[a]) for a in algos),
            ", ".join(pct(lim[a]["busiest_link_load"]) for a in algos),
            ", ".join(idle(lim[a]["cpu_idle"]) for a in algos), name]


def netreduce_switch_table(results: Path) -> str:
    rows = []
    for label, tag in (("now", "after"), ("before", "before")):
        for logging in ("log", "nolog"):
            name = f"netreduce-switch-{tag}-{logging}.json"
            d = load(results, name)
            bound = machine_bound({"cpu_idle": d["machine_cpu_idle"]})
            rows.append([label, build(d), str(d["elements_per_packet"]),
                         marked(num(d["contributions_per_s"], 0), bound), f"{num(d['values_per_s'] / 1e6)} M",
                         str(d["wrong_results"]), num(d["switch_busiest_thread_cpu"]), idle(d["machine_cpu_idle"]),
                         name])
    return table(["gradswitch.p4", "BMv2", "values per packet", "contributions/s", "values/s", "wrong results",
                  "switch's busiest thread, cores", "CPU idle", "JSON"], rows)
