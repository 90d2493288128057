"""The plots of an experiment (iteration times) and of a comparison (times, figures, learning)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_iterations(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    its = report["iterations"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    if its:
        colors = ["tab:blue" if it["correct"] else "tab:red" for it in its]
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
    ax.bar(x - 0.2, med, 0.4, label="median")
    ax.bar(x + 0.2, p99, 0.4, label="p99")
    for i, n in enumerate(names):
        bound = summary[n].get("lower_bound_s")
        if bound:
            ax.hlines(bound, i - 0.4, i + 0.4, colors="black", linestyles="--")
        if not summary[n].get("correct"):
            ax.annotate("not exact", (i, max(med[i], p99[i])), ha="center", color="red")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("iteration time (s)")
    ax.set_title("iteration time per run (dashed: link-rate lower bound)")
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
    fig, axes = plt.subplots(1, len(keys), figsize=(max(5, 3.2 * len(keys)), 3.6), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        values = [summary[n].get(key) for n in names]
        ax.bar(range(len(names)), [v if isinstance(v, int | float) else 0.0 for v in values], color="tab:green")
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_title(key, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_learning(reports: dict[str, dict[str, Any]], path: Path) -> bool:
    """Training runs: test accuracy against iterations and against wall time, one line per run."""
    runs = {n: r["iterations"] for n, r in reports.items() if r["iterations"] and "accuracy" in r["iterations"][0]}
    if not runs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_it, by_time) = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for name, its in runs.items():
        acc = [it["accuracy"] for it in its]
        t0 = its[0]["start"]
        by_it.plot([it["index"] + 1 for it in its], acc, label=name)
        by_time.plot([it["end"] - t0 for it in its], acc, label=name)
    by_it.set_xlabel("iteration")
    by_time.set_xlabel("wall time (s)")
    by_it.set_ylabel("test accuracy")
    by_it.legend()
    fig.suptitle("learning: accuracy against iterations and time")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_link_loads(reports: dict[str, dict[str, Any]], path: Path) -> bool:
    """Load of every fabric link per run (grouped bars): where ECMP put the flows, and what spraying
    changed. False when no run has switch-to-switch links."""
    runs = {n: r["link_loads"] for n, r in reports.items() if r.get("link_loads")}
    if not runs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    links = sorted({link for loads in runs.values() for link in loads})
    x = np.arange(len(links))
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(7, 0.55 * len(links) * max(1, len(runs) / 2)), 4))
    for i, (name, loads) in enumerate(runs.items()):
        ax.bar(x - 0.4 + width * (i + 0.5), [loads.get(link, 0.0) for link in links], width, label=name)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
    ax.set_xticks(x, links, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("load (bytes sent / link capacity)")
    ax.set_title("fabric links: load per direction over the run (dashed: the link's rate)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
