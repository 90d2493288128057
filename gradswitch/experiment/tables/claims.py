"""The papers' claims beside the testbed's figures (the README's headline table): NetReduce / ring per model family
over the runs not machine-bound, DLCP and its spraying against their baselines, TensorLights against FIFO."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gradswitch.experiment.tables.cells import num, over_baseline, ratio, table
from gradswitch.experiment.tables.reading import Json, load
from gradswitch.experiment.tables.training import TENSORLIGHTS, dlcp_section, pair_bound, speedup


def _range(values: Sequence[float]) -> str:
    if not values:
        return "-"
    lo, hi = num(min(values)), num(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def _netreduce_claim(runs: dict[str, Json], rows: list[Json], models: set[str]) -> list[str]:
    """NetReduce / ring over the rows of `models` whose runs were not machine-bound: their range, their ideal's."""
    chosen, left = [], 0
    for r in rows:
        if r["model"] in models and r["what"].startswith("NetReduce / ring"):
            sched = r["what"].split("(")[1].rstrip(")")
            names = [f"{r['model']}-{r['topo']}-{algo}-{sched}" for algo in ("ring", "netreduce")]
            if pair_bound(runs, *names):
                left += 1
            else:
                chosen.append(r)
    reps = sorted({n for r in chosen for n in r.get("repetitions", [1])})
    span = str(reps[0]) if reps[0] == reps[-1] else f"{reps[0]}-{reps[-1]}"
    each = "one run each" if reps == [1] else f"medians of {span} runs each"
    text = f"{_range([r['ratio'] for r in chosen])} ({len(chosen)} rows, {each}"
    text += f"; {left} machine-bound rows left out)" if left else ")"
    return [text, _range([r["ideal"] for r in chosen])]


def claims_table(results: Path) -> str:
    runs, rows = speedup(results)
    cnn = _netreduce_claim(runs, rows, {"resnet50", "vgg16"})
    bert = _netreduce_claim(runs, rows, {"bert-base"})
    contention, spray = dlcp_section(results, "dlcp-contention"), dlcp_section(results, "dlcp-spray")
    dlcp = [f"{name} {over_baseline(s)}" for name, s in contention["runs"].items()
            if s.get("over_baseline") and name != "alone"]  # `alone` is the reference, not DLCP
    sprays = [f"{name.split('-')[0]} {over_baseline(s)}" for name, s in spray["runs"].items()
              if name.endswith("-spray")]
    lights = load(results, "dlcp-tensorlights.json")["tensorlights"]
    jct = [f"{TENSORLIGHTS[n]} {ratio(r['ratio'], r['ratio_min'], r['ratio_max'], bool(r['headline']))}"
           for n in ("tensorlights", "tensorlights-2jobs") if (r := lights.get(n))]
    return table(["claim", "paper", "testbed", "ideal here"], [
        ["NetReduce / ring, training speed, CNNs (ResNet-50, VGG-16; 4 workers)", "up to 1.7x", *cnn],
        ["NetReduce / ring, training speed, transformers (BERT-base; 4 workers)", "up to 1.5x", *bert],
        [f"DLCP / {contention['best_baseline']}, training speed of a job under contention (synthetic gradients)",
         "up to +84 %", "; ".join(dlcp), "-"],
        ["DLCP's spraying / ECMP on the same placement, training speed (synthetic gradients)", "-",
         "; ".join(sprays), "-"],
        ["TensorLights / FIFO, average job completion time", "-31 %", "; ".join(jct), "-"],
    ])
