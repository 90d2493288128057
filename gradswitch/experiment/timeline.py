"""The timeline of one steady-state training iteration per worker: a Chrome trace and a plot.

The trace is the Chrome trace event format (`{"traceEvents": [...]}` with complete events,
`ph: "X"`, times in microseconds), which the PyTorch profiler and Horovod's timeline write and
Perfetto (ui.perfetto.dev) and chrome://tracing open: one process per worker, one thread for
its computation (forward and backward per layer) and one per in-flight slot of its reductions.
Times are from the earliest worker's start of that iteration, in testbed seconds; `args` give
the real-equivalent duration (divided by the dilation).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gradswitch.workload.worker_result import WorkerResult

COMPUTE_TID = 0
COLORS = {"forward": "tab:blue", "backward": "tab:orange", "op": "tab:green"}


def _events(results: Mapping[int, WorkerResult], iteration: int) -> dict[str, list[dict[str, Any]]]:
    """Per worker host, its timeline events of `iteration` (computation of that iteration's forward and
    backward, and that iteration's reductions)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(results.values(), key=lambda r: int(r["node_id"])):
        if r.get("role") != "worker" or "timeline" not in r:
            continue
        out[f"{r['host']} (rank {r['node_id']})"] = [e for e in r["timeline"] if e["iteration"] == iteration]
    return out


def chrome_trace(results: Mapping[int, WorkerResult], iteration: int, dilation: float) -> dict[str, Any]:
    per_worker = _events(results, iteration)
    starts = [e["start"] for evs in per_worker.values() for e in evs]
    t0 = min(starts) if starts else 0.0
    trace: list[dict[str, Any]] = []
    for pid, (worker, evs) in enumerate(per_worker.items()):
        trace.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": worker}})
        trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": COMPUTE_TID, "args": {"name": "compute"}})
        lanes = sorted({e["lane"] for e in evs if e["kind"] == "op"})
        for lane in lanes:
            trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 1 + lane,
                          "args": {"name": f"reduction slot {lane}"}})
        for e in evs:
            dur = e["end"] - e["start"]
            trace.append({"ph": "X", "name": f"{e['kind']} {e['name']}" if e["kind"] != "op" else e["name"],
                          "cat": e["kind"], "pid": pid, "tid": COMPUTE_TID if e["kind"] != "op" else 1 + e["lane"],
                          "ts": round((e["start"] - t0) * 1e6, 1), "dur": round(dur * 1e6, 1),
                          "args": {"testbed_s": round(dur, 6), "real_s": round(dur / dilation, 9)}})
    return {"format": TIMELINE_FORMAT, "traceEvents": trace, "displayTimeUnit": "ms",
            "otherData": {"iteration": iteration, "dilation": dilation, "clock": "testbed seconds"}}


# timeline.json's and graph-timeline.json's `format` (the Chrome trace format keeps a top-level key other than its own
# as the trace's metadata: Perfetto and chrome://tracing open the file as before); gradswitch writes them, never
# reads them
TIMELINE_FORMAT = 1
PLOTTED_WORKERS = 8  # a plot shows the first workers (timeline.json has every one: open it in Perfetto)


def plot_timeline(trace: dict[str, Any], path: Path, title: str, colors: Mapping[str, str] | None = None,
                  legend: Mapping[str, str] | None = None, x_label: str = "testbed seconds from the iteration's "
                  "first forward start", what: str = "workers") -> None:
    """A Chrome trace drawn as bars: one row per (process, thread), named by the trace's metadata, a colour per
    event category (`colors`; grey for others), a legend entry per category present (`legend`: its words)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colors = COLORS if colors is None else colors
    legend = dict(zip(COLORS, ["forward", "backward", "reduction (bucket/partition)"], strict=True)) \
        if legend is None else legend
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    shown = sorted(names)[:PLOTTED_WORKERS]
    if len(names) > len(shown):
        title += f" ({len(shown)} of {len(names)} {what}; the trace's JSON has all)"
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] in shown]
    rows: list[tuple[int, int]] = sorted({(e["pid"], e["tid"]) for e in spans})
    fig, ax = plt.subplots(figsize=(11, 0.45 * max(4, len(rows)) + 1.2))
    y = {row: len(rows) - 1 - i for i, row in enumerate(rows)}
    # one collection per row and kind (a call per span costs matplotlib a rescale each: minutes at scale)
    bars: dict[tuple[tuple[int, int], str], list[tuple[float, float]]] = {}
    for e in spans:
        bars.setdefault(((e["pid"], e["tid"]), e["cat"]), []).append((e["ts"] / 1e6, max(e["dur"] / 1e6, 1e-5)))
    for (row, kind), xs in bars.items():
        ax.broken_barh(xs, (y[row] - 0.4, 0.8), facecolors=colors.get(kind, "grey"), edgecolors="white",
                       linewidth=0.3)
    ax.set_yticks([y[r] for r in rows], [f"{names.get(r[0], r[0])}: {threads.get(r, r[1])}" for r in rows],
                  fontsize=7)
    ax.set_xlabel(x_label)
    present = {kind for _, kind in bars}
    ax.legend(handles=[Patch(color=colors.get(k, "grey"), label=legend.get(k, k)) for k in colors if k in present],
              loc="upper right", fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_timeline(results: Mapping[int, WorkerResult], iteration: int, dilation: float, out_dir: Path,
                   title: str) -> list[str]:
    """timeline.json and timeline.png of one iteration of every worker; the files written."""
    trace = chrome_trace(results, iteration, dilation)
    if not any(e["ph"] == "X" for e in trace["traceEvents"]):
        return []
    (out_dir / "timeline.json").write_text(json.dumps(trace))
    plot_timeline(trace, out_dir / "timeline.png", title)
    return ["timeline.json", "timeline.png"]
