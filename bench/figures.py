"""Redraw the comparisons' figure plots under bench/results/ from the JSON the benchmarks stored.

bench.training copies each compare's `figures.png` here as `SPEC-figures.png`; this draws the same
plot again from the runs kept in training-dlcp.json (their medians and [min, max] spreads), without
running an experiment, e.g. after a change to how gradswitch/experiment/plots.py lays panels out.

    python -m bench.figures      # rewrites dlcp-contention-figures.png and dlcp-spray-figures.png
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.common import RESULTS
from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.plots import plot_figures
from gradswitch.experiment.shipped_specs import EXPERIMENTS
from gradswitch.experiment.tables.reading import load

SPECS = EXPERIMENTS  # the shipped compare specs (gradswitch/specs/)
SOURCES = {"dlcp-contention": "training-dlcp.json", "dlcp-spray": "training-dlcp.json"}
TIMES = ("median_s", "p99_s")  # a compare plots these in its times plot, not among the figures (compare.py)


def redraw(results: Path = RESULTS) -> list[Path]:
    """Each spec's figures plot from its stored runs; the paths written."""
    written = []
    for spec_name, source in SOURCES.items():
        stored: dict[str, Any] = load(results, source)
        runs: dict[str, dict[str, Any]] = stored["dlcp"][spec_name]["runs"]
        keys = [k for k in load_spec(SPECS / f"{spec_name}.toml").figures if k not in TIMES]
        path = results / f"{spec_name}-figures.png"
        if plot_figures(runs, keys, path):
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the JSON's directory (default bench/results)")
    args = parser.parse_args()
    for path in redraw(args.results):
        print(f"written {path}")


if __name__ == "__main__":
    main()
