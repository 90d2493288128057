"""The timeline of an execution-graph run: per rank, its computation, each process group's collectives and its
point-to-point transfers, as a Chrome trace (graph-timeline.json, which Perfetto and chrome://tracing open) and a
plot (graph-timeline.png). Both backends' runs draw the same way: they report one type (GraphRun)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gradswitch.experiment.timeline import TIMELINE_FORMAT, plot_timeline
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.graph_timing import GraphRun

TRACE_FILE, PLOT_FILE = "graph-timeline.json", "graph-timeline.png"
COMPUTE_TID = 0
KIND_COLORS = {"compute": "tab:blue", str(CollectiveKind.ALL_REDUCE): "tab:orange",
               str(CollectiveKind.REDUCE_SCATTER): "tab:green", str(CollectiveKind.ALL_GATHER): "tab:red",
               str(CollectiveKind.ALL_TO_ALL): "tab:purple", str(CollectiveKind.BROADCAST): "tab:brown",
               "send": "tab:pink", "recv": "tab:olive"}
KIND_WORDS = {k: k.replace("_", "-") for k in KIND_COLORS}
P2P_LANE = "send/recv"


def category(kind: str, collective: CollectiveKind | None) -> str:
    """A node's colour category: compute, its collective's kind, send or recv."""
    return str(collective) if kind == "collective" and collective is not None else kind


def graph_trace(run: GraphRun, hosts: tuple[str, ...] | list[str], clock: str) -> dict[str, Any]:
    """One process per rank; its threads: compute, one per process group its collectives ran on, and
    send/recv. Times in microseconds from the job's start (`clock` says whose seconds they are)."""
    lanes = {r: sorted({n.group or "" for n in run.nodes if n.rank == r and n.kind == "collective"})
             for r in sorted({n.rank for n in run.nodes})}
    trace: list[dict[str, Any]] = []
    for rank, groups in lanes.items():
        host = f" on {hosts[rank]}" if rank < len(hosts) else ""
        trace.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}{host}"}})
        names = ["compute", *(f"group {g}" for g in groups), P2P_LANE]
        trace += [{"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": name}}
                  for tid, name in enumerate(names)]
    for n in run.nodes:
        if n.kind == "compute":
            tid = COMPUTE_TID
        elif n.kind == "collective":
            tid = 1 + lanes[n.rank].index(n.group or "")
        else:
            tid = 1 + len(lanes[n.rank])
        cat = category(n.kind, n.collective)
        trace.append({"ph": "X", "name": f"{KIND_WORDS.get(cat, cat)} #{n.node_id}", "cat": cat, "pid": n.rank,
                      "tid": tid, "ts": round(n.start_s * 1e6, 3), "dur": round(n.duration_s * 1e6, 3),
                      "args": {"node": n.node_id, "bytes": n.nbytes, "group": n.group, "checked": n.checked}})
    return {"format": TIMELINE_FORMAT, "traceEvents": trace, "displayTimeUnit": "ms", "otherData": {"clock": clock}}


def write_graph_timeline(run: GraphRun, hosts: tuple[str, ...] | list[str], out_dir: Path, title: str,
                         clock: str = "seconds of the emulated cluster from the job's start") -> list[str]:
    """graph-timeline.json and graph-timeline.png in out_dir; the files written (none for an empty run)."""
    trace = graph_trace(run, hosts, clock)
    if not any(e["ph"] == "X" for e in trace["traceEvents"]):
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / TRACE_FILE).write_text(json.dumps(trace))
    plot_timeline(trace, out_dir / PLOT_FILE, title, colors=KIND_COLORS, legend=KIND_WORDS, x_label=clock,
                  what="ranks")
    return [TRACE_FILE, PLOT_FILE]
