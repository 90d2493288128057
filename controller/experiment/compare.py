"""`gradswitch compare SPEC`: a matrix of experiments on equal terms, one report.

A spec is a TOML file (see experiments/):

    name = "baselines"
    [defaults]            # every run starts from these (ExperimentSpec fields)
    iterations = 5
    bw_mbps = 20
    [matrix]              # the cartesian product of these lists...
    algo = ["ring", "ps"]
    workers = [2, 4]
    [[runs]]              # ...plus runs given one by one (each may set `name`)
    name = "ring-sr"
    algo = "ring"
    transport = "sr"

It writes DIR/<run>/ (each experiment's own results and plots), DIR/summary.json (run name ->
headline figures: median_s, p99_s, correct, ...), DIR/report.md and DIR/*.png.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.experiment.plots import plot_compare, plot_figures, plot_learning, plot_link_loads
from controller.experiment.report import format_table
from controller.experiment.runner import run_experiment
from controller.experiment.spec import ExperimentError, ExperimentSpec, SpecError, spec_from_dict

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Ubuntu 22.04's Python 3.10
    import tomli as tomllib


@dataclass
class CompareSpec:
    name: str
    runs: list[ExperimentSpec]
    notes: str = ""
    figures: list[str] = field(default_factory=list)  # summary keys to plot side by side


def _auto_name(spec: ExperimentSpec, varied: list[str]) -> str:
    parts = []
    for key in varied:
        value = getattr(spec, key)
        if key == "size_bytes":
            parts.append(f"{value / 2**20:g}MiB")
        elif key == "workers":
            parts.append(f"n{value}")
        else:
            parts.append(f"{value}")
    return "-".join(parts) or spec.algo


SPEC_KEYS = ("name", "notes", "figures", "defaults", "matrix", "runs")


def load_spec(path: Path) -> CompareSpec:
    """A compare spec, every run checked (SpecError: one line per problem, naming the run)."""
    if not path.exists() and path.with_suffix(".toml").exists():
        path = path.with_suffix(".toml")  # `gradswitch compare experiments/tensorlights`
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SpecError(f"{path}: {e}") from None
    try:
        unknown = sorted(set(raw) - set(SPEC_KEYS))
        if unknown:
            raise SpecError(f"unknown keys {', '.join(unknown)} (known: {', '.join(SPEC_KEYS)})")
        defaults = spec_from_dict(raw.get("defaults", {}))
        runs: list[ExperimentSpec] = []
        matrix = raw.get("matrix", {})
        if matrix:
            keys = list(matrix)
            for values in itertools.product(*(matrix[k] if isinstance(matrix[k], list) else [matrix[k]]
                                              for k in keys)):
                spec = spec_from_dict(dict(zip(keys, values, strict=True)), defaults)
                varied = [k for k in keys if isinstance(matrix[k], list) and len(matrix[k]) > 1]
                runs.append(spec_from_dict({"name": _auto_name(spec, varied)}, spec))
        for i, run in enumerate(raw.get("runs", []), start=1):
            try:
                runs.append(spec_from_dict(run, defaults))
            except SpecError as e:
                raise SpecError(f"run {run.get('name', i)!r}: {e}") from None
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from None
    names = [r.label for r in runs]
    problems = [f"{path}: run {name!r}: {line}" for r, name in zip(runs, names, strict=True) for line in r.problems()]
    if len(set(names)) != len(names):
        problems.append(f"{path}: run names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    if not runs:
        problems.append(f"{path}: no runs (give a [matrix] or [[runs]])")
    if problems:
        raise SpecError("\n".join(problems))
    return CompareSpec(raw.get("name", path.stem), runs, raw.get("notes", ""), raw.get("figures", []))


def headline(report: dict[str, Any]) -> dict[str, Any]:
    s = report["summary"]
    out = {"median_s": s["median_s"], "p99_s": s["p99_s"], "correct": s["correct"], "ok": report["ok"],
           "algbw_mbps": s["algbw_mbps"], "lower_bound_s": s["lower_bound_s"], "ratio_to_bound": s["ratio_to_bound"],
           "retransmissions": report["retransmissions"], "bytes_on_wire": report["bytes_on_wire"]}
    out.update(report.get("headline_extra", {}))
    training = report.get("training") or {}
    # Every run has both: a training run its steady-state iteration and real-equivalent throughput,
    # an all-reduce run its median all-reduce iteration (and no samples).
    out["iteration_s"] = training.get("iteration_s", s["median_s"])
    out["samples_per_s_real"] = training.get("samples_per_s_real")
    for key in ("exposed_comm_s", "compute_s", "overlap", "dilation", "scaling_efficiency", "ideal_samples_per_s_real",
                "of_ideal", "ideal_link_load"):
        if key in training:
            out[key] = training[key]
    if report.get("bmv2"):  # which BMv2 build ran: path, version, logging macros or not
        out["bmv2"] = {k: report["bmv2"][k] for k in ("path", "version", "logging_macros")}
    return out


Runner = Callable[[ExperimentSpec, Path], dict[str, Any]]


def run_compare(spec: CompareSpec, out_dir: Path, runner: Runner | None = None,
                log: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:
    run = runner or run_experiment
    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, dict[str, Any]] = {}
    reports: dict[str, dict[str, Any]] = {}
    for i, exp in enumerate(spec.runs, start=1):
        log(f"[{i}/{len(spec.runs)}] {exp.label}")
        try:
            report = run(exp, out_dir / exp.label)
        except ExperimentError as e:
            log(f"  failed: {e}")
            summary[exp.label] = {"median_s": None, "p99_s": None, "correct": False, "ok": False,
                                  "iteration_s": None, "samples_per_s_real": None, "error": str(e)}
            continue
        reports[exp.label] = report
        summary[exp.label] = headline(report)
        log(format_table(report))
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))  # partial results survive a crash
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    write_markdown(spec, summary, reports, out_dir)
    return summary


def _cell(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def write_markdown(spec: CompareSpec, summary: dict[str, dict[str, Any]], reports: dict[str, dict[str, Any]],
                   out_dir: Path) -> None:
    plot_compare(summary, out_dir / "compare.png")
    extra_keys = sorted({k for h in summary.values() for k in h} - {
        "median_s", "p99_s", "correct", "ok", "algbw_mbps", "lower_bound_s", "ratio_to_bound", "retransmissions",
        "bytes_on_wire", "error", "bmv2"})
    header = ["run", "median s", "p99 s", "correct", "Mb/s", "bound s", "x bound", "retrans"] + extra_keys
    lines = [f"# {spec.name}", ""]
    if spec.notes:
        lines += [spec.notes.strip(), ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, h in summary.items():
        row = [name, _cell(h.get("median_s")), _cell(h.get("p99_s")), _cell(h.get("correct")),
               _cell(h.get("algbw_mbps"), 1), _cell(h.get("lower_bound_s")), _cell(h.get("ratio_to_bound"), 2),
               _cell(h.get("retransmissions"))] + [_cell(h.get(k)) for k in extra_keys]
        lines.append("| " + " | ".join(row) + " |")
    builds = sorted({f"{b['path']} {b['version']}, " + ("with" if b["logging_macros"] else "without")
                     + " logging macros" for h in summary.values() if (b := h.get("bmv2"))})
    lines += ["", f"BMv2: {'; '.join(builds) or 'not recorded'}. `cpu_idle`: the machine's idle CPU share during the "
              "jobs (near 0: the machine, not the links, limited the run).", ""]
    lines += ["![median and p99 iteration time per run](compare.png)", ""]
    if plot_figures(summary, [k for k in spec.figures if k not in ("median_s", "p99_s")], out_dir / "figures.png"):
        lines += ["![the spec's figures per run](figures.png)", ""]
    if plot_learning(reports, out_dir / "learning.png"):
        lines += ["![test accuracy against iterations and wall time](learning.png)", ""]
    if plot_link_loads(reports, out_dir / "links.png"):
        lines += ["![load of every fabric link per run](links.png)", ""]
    for name, report in reports.items():
        spec_d = report["spec"]
        lines.append(f"- **{name}**: {spec_d['algo']} x{spec_d['workers']} on {spec_d['topo']}, "
                     f"{report['step_bytes'] / 2**20:.2f} MiB, bw {spec_d['bw_mbps']}, loss {spec_d['loss_pct']}%, "
                     f"{spec_d['transport']} ([details]({name}/table.txt), ![iterations]({name}/iterations.png))")
    errors = {n: h["error"] for n, h in summary.items() if h.get("error")}
    if errors:
        lines += ["", "## Failed runs", ""] + [f"- {n}: {e.splitlines()[0]}" for n, e in errors.items()]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
