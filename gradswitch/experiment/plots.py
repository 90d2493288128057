"""The plots of an experiment (iteration times) and of a comparison (times, figures, learning, links).

A comparison's plots show each run's median over its repetitions with a bar from the smallest to
the largest (gradswitch/experiment/compare.py: `spread`), and one line per repetition where
there are lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WIDTH_IN = 12.0  # a figure's plotting width in inches: at 110 dpi it stays under 1600 px, readable on a screen
PANEL_IN = 3.8  # one bar chart of a grid


def grid(panels: int, most: int = 3) -> tuple[int, int]:
    """Rows and columns for `panels` charts, at most `most` to a row and as square as that allows (4: 2 x 2)."""
    rows = -(-panels // most)
    return rows, -(-panels // rows)


def _errors(summary: dict[str, dict[str, Any]], names: list[str], key: str) -> list[list[float]]:
    """matplotlib's yerr for the medians of `key`: distance down to the min and up to the max."""
    down, up = [], []
    for n in names:
        s = summary[n].get("spread", {}).get(key)
        med = summary[n].get(key)
        if s and isinstance(med, int | float):
            down.append(max(0.0, med - s["min"]))
            up.append(max(0.0, s["max"] - med))
        else:
            down.append(0.0)
            up.append(0.0)
    return [down, up]


def plot_iterations(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    its = report["iterations"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    if its:
        colors = ["tab:red" if it.get("correct") is False else "tab:blue" for it in its]
        ax.bar([it["index"] for it in its], [it["time_s"] for it in its], color=colors)
    bound = report["summary"]["lower_bound_s"]
    if bound:
        ax.axhline(bound, color="black", linestyle="--", label=f"link-rate bound {bound:.3f} s")
        ax.legend(loc="upper right")
    ax.set_xlabel("iteration")
    ax.set_ylabel("time (s)")
    ax.set_title(f"{report['name']}: iteration time (red = wrong result)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_compare(summary: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(summary)
    med = [summary[n].get("median_s") or 0.0 for n in names]
    p99 = [summary[n].get("p99_s") or 0.0 for n in names]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(names)), 4))
    ax.bar(x - 0.2, med, 0.4, label="median", yerr=_errors(summary, names, "median_s"), capsize=3)
    ax.bar(x + 0.2, p99, 0.4, label="p99", yerr=_errors(summary, names, "p99_s"), capsize=3)
    for i, n in enumerate(names):
        bound = summary[n].get("lower_bound_s")
        if bound:
            ax.hlines(bound, i - 0.4, i + 0.4, colors="black", linestyles="--")
        if summary[n].get("correct") is False:
            ax.annotate("not exact", (i, max(med[i], p99[i])), ha="center", color="red")
        if summary[n].get("machine_bound"):
            ax.annotate("machine-bound", (i, 0), ha="center", va="bottom", color="grey", rotation=90, fontsize=7)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("iteration time (s)")
    ax.set_title("iteration time per run (median; bars: min to max; dashed: link-rate lower bound)", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_figures(summary: dict[str, dict[str, Any]], keys: list[str], path: Path) -> bool:
    """One bar chart per figure the spec names (drops, errors, JCT...); False if none has values."""
    keys = [k for k in keys if any(isinstance(h.get(k), int | float) and not isinstance(h.get(k), bool)
                                   for h in summary.values())]
    if not keys:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    rows, cols = grid(len(keys))
    fig, axes = plt.subplots(rows, cols, figsize=(max(5.0, PANEL_IN * cols), 3.6 * rows), squeeze=False)
    for i, key in enumerate(keys):
        ax = axes[i // cols][i % cols]
        values = [summary[n].get(key) for n in names]
        ax.bar(range(len(names)), [v if isinstance(v, int | float) else 0.0 for v in values], color="tab:green",
               yerr=_errors(summary, names, key), capsize=3)
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_title(key, fontsize=10)
    for ax in axes.flat[len(keys):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_learning(reports: dict[str, list[dict[str, Any]]], path: Path) -> bool:
    """Training runs: test accuracy against iterations and against wall time (the job's training time,
    `train_s`), and the gradient's relative error against the exact sum per iteration (where a check
    measured it), one line per repetition (a run's repetitions share its colour)."""
    runs = {n: [r["iterations"] for r in rs if r["iterations"] and "accuracy" in r["iterations"][0]]
            for n, rs in reports.items()}
    runs = {n: its for n, its in runs.items() if its}
    if not runs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_it, by_time, err) = plt.subplots(1, 3, figsize=(14, 3.8))
    for k, (name, repeated) in enumerate(runs.items()):
        color = f"C{k % 10}"
        for i, its in enumerate(repeated):
            acc = [it["accuracy"] for it in its]
            x = [it["index"] + 1 for it in its]
            by_it.plot(x, acc, color=color, alpha=0.8, label=name if i == 0 else None)
            t0 = its[0]["start"]
            by_time.plot([it["train_s"] if "train_s" in it else it["end"] - t0 for it in its], acc, color=color,
                         alpha=0.8)
            if all("relative_error" in it for it in its):
                err.plot(x, [it["relative_error"] for it in its], color=color, alpha=0.8)
    target = 0.9
    for ax in (by_it, by_time):
        ax.axhline(target, color="grey", lw=0.8, ls=":")
        ax.set_ylabel("test accuracy (worst worker)")
    by_it.set_xlabel("iteration")
    by_time.set_xlabel("training time (s, testbed)")
    err.set_xlabel("iteration")
    err.set_ylabel("gradient error (relative, vs exact sum)")
    by_it.legend(fontsize=8)
    fig.suptitle("learning: accuracy against iterations and time, and the gradient's error (one line per "
                 "repetition; dotted: 90 %)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_link_loads(reports: dict[str, list[dict[str, Any]]], path: Path) -> bool:
    """Load of every fabric link per run (grouped bars: the median over the repetitions, a bar from
    min to max): where ECMP put the flows, and what spraying changed. False when no run has
    switch-to-switch links."""
    import numpy as np

    runs = {n: [r["link_loads"] for r in rs if r.get("link_loads")] for n, rs in reports.items()}
    runs = {n: loads for n, loads in runs.items() if loads}
    if not runs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    links = sorted({link for repeated in runs.values() for loads in repeated for link in loads})
    width = 0.8 / len(runs)
    link_in = max(0.55, 0.12 * len(runs))  # a link's group of bars, one bar per run
    per_panel = max(1, min(len(links), int(WIDTH_IN // link_in)))
    panels = [links[k:k + per_panel] for k in range(0, len(links), per_panel)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(7.0, min(WIDTH_IN, link_in * per_panel) + 2.2),
                                                      0.6 + 3.2 * len(panels)), squeeze=False)
    for ax, shown in zip(axes[:, 0], panels, strict=True):
        x = np.arange(len(shown))
        for i, (name, repeated) in enumerate(runs.items()):
            per_link = [[loads.get(link, 0.0) for loads in repeated] for link in shown]
            med = np.array([float(np.median(v)) for v in per_link])
            err = [med - np.array([min(v) for v in per_link]), np.array([max(v) for v in per_link]) - med]
            ax.bar(x - 0.4 + width * (i + 0.5), med, width, label=name, color=f"C{i % 10}", yerr=err, capsize=2)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
        ax.set_xticks(x, shown, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, per_panel - 0.4)
        ax.set_ylabel("load / capacity", fontsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="center right")
    fig.suptitle("fabric links: load per direction over the run (bytes the shaper sent / link capacity; dashed: the "
                 "link's rate)", fontsize=10)
    fig.tight_layout(rect=(0.0, 0.0, 0.84, 1.0))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
