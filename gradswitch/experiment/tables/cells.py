"""A table's cells: a figure, a share, a ratio of two runs with [min, max], a figure's median with [min, max] over
the repetitions where the JSON keeps a `spread` (gradswitch.experiment.stats.spread wrote it), and the marks:

- `(machine-bound)`: the run, or a run behind a ratio, was limited by the machine, not the links
  (gradswitch/experiment/bottleneck.py; reading.machine_bound). Never a headline.
- `(low)`: the machine's CPU was under 20 % idle (bottleneck.TARGET_CPU_IDLE), `(low in some)` in some repetitions.
- `(check failed: k of n)`: k of the run's n repetitions gave a result that was wrong or beyond its error bound
  (`correct: false`; a compare lists them in `check_failed_repetitions`). Such a run, and a ratio behind which one
  stands, is never a headline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gradswitch.experiment.bottleneck import TARGET_CPU_IDLE

MODELS = {"resnet50": "ResNet-50", "vgg16": "VGG-16", "bert-base": "BERT-base"}
MACHINE_BOUND = "(machine-bound)"


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def num(v: Any, digits: int = 2) -> str:
    return f"{v:,.{digits}f}" if _is_number(v) else "-"


def _percent(v: float) -> str:
    """A share in percent: whole percents, one decimal under TARGET_CPU_IDLE (19.6 is under 20, its whole percent
    is not)."""
    return f"{100 * v:.1f}" if v < TARGET_CPU_IDLE else f"{100 * v:.0f}"


def pct(v: Any) -> str:
    return f"{_percent(v)} %" if _is_number(v) else "-"


def idle(v: Any) -> str:
    """The machine's idle CPU, marked `(low)` under TARGET_CPU_IDLE."""
    return pct(v) + (" (low)" if _is_number(v) and v < TARGET_CPU_IDLE else "")


def spread_cell(run: Mapping[str, Any], key: str, digits: int = 2) -> str:
    """`median [min, max]` of a figure over a run's repetitions; the figure alone when they agree or the JSON keeps
    no spread for it."""
    s = run.get("spread", {}).get(key)
    if not s:
        return num(run.get(key), digits)
    text, lo, hi = num(s["median"], digits), num(s["min"], digits), num(s["max"], digits)
    return text if s["n"] < 2 or lo == hi else f"{text} [{lo}, {hi}]"


def spread_pct(run: Mapping[str, Any], key: str, low_mark: bool = False) -> str:
    """A share's `median [min, max]` in percent; with low_mark, `(low)` when the median is under TARGET_CPU_IDLE and
    `(low in some)` when only some repetitions were."""
    s = run.get("spread", {}).get(key)
    if not s:
        return idle(run.get(key)) if low_mark else pct(run.get(key))
    text = pct(s["median"])
    if s["n"] > 1 and pct(s["min"]) != pct(s["max"]):
        text += f" [{_percent(s['min'])}, {_percent(s['max'])}]"
    if low_mark and s["median"] < TARGET_CPU_IDLE:
        text += " (low)"
    elif low_mark and s["min"] < TARGET_CPU_IDLE:
        text += " (low in some)"
    return text


def ratio(value: Any, lo: Any, hi: Any, headline: bool = True) -> str:
    """A ratio of two runs' medians with [min, max] (one run's smallest repetition over the other's largest, and
    its largest over the other's smallest); marked when a run behind it was machine-bound."""
    text = f"{num(value)} [{num(lo)}, {num(hi)}]"
    return text if headline else f"{text} {MACHINE_BOUND}"


def over_baseline(run: Mapping[str, Any]) -> str:
    o = run.get("over_baseline")
    if not o:
        return "baseline"
    if check_failures(run)[0]:  # a result broke its check: never a headline
        return f"{num(o['ratio'])} [{num(o['min'])}, {num(o['max'])}]{check_mark(run)}, not a headline"
    return ratio(o["ratio"], o["min"], o["max"], bool(o["headline"]))


def repetitions(run: Mapping[str, Any]) -> str:
    """How many repetitions the medians use, of those done, and which were machine-bound or failed."""
    text = f"{run.get('headline_repetitions')} of {run.get('repetitions_done')}"
    bound, failed = run.get("machine_bound_repetitions") or [], run.get("failed_repetitions") or []
    if run.get("machine_bound"):
        text += ": all machine-bound (the medians are over all of them; not a headline)"
    elif bound:
        text += f"; machine-bound: {', '.join(str(b) for b in bound)}"
    if failed:
        text += f"; failed: {', '.join(str(f) for f in failed)}"
    return text


def check_failures(run: Mapping[str, Any]) -> tuple[int, int]:
    """How many of a run's repetitions broke their check (a result marked correct: false), of how many ran; from
    `check_failed_repetitions` where the compare kept it, else from the repetitions' own `correct`."""
    reps = [r for r in run.get("repetitions") or [] if not r.get("error")]
    kept = run.get("check_failed_repetitions")
    if kept is not None:
        return len(kept), len(reps) or run.get("repetitions_done") or len(kept)
    if reps:
        return sum(1 for r in reps if r.get("correct") is False), len(reps)
    return (1, 1) if run.get("correct") is False else (0, 1)


def check_mark(run: Mapping[str, Any]) -> str:
    """" (check failed: k of n)" for a run some of whose repetitions broke their check, "" otherwise."""
    bad, of = check_failures(run)
    return f" (check failed: {bad} of {of})" if bad else ""


def marked(text: str, bound: bool) -> str:
    return f"{text} {MACHINE_BOUND}" if bound else text


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def mib(size: Any) -> str:
    return f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size / 2**10:g} KiB"
