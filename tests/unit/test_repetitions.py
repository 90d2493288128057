"""A compare's repetitions, baselines and resumption (gradswitch/experiment/compare.py).

The experiments here are a stand-in runner whose figures are a function of the spec (its name
and seed), and which writes results.json as the real runner does: what is checked is what the
compare makes of them (seeds, directories, medians and spreads, machine-bound repetitions left
out, ratios to the best baseline, skipping what is complete). The real runner on Mininet:
tests/mininet/test_experiments.py.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import cast

import pytest

from gradswitch.experiment import results_file, summary_file
from gradswitch.experiment.compare import (
    CompareSpec,
    load_spec,
    ratio_of,
    repetitions,
    run_compare,
)
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.spec import ExperimentError, ExperimentSpec, SpecError, spec_dict

SPEC = """
name = "rep"
repeat = 3
baselines = ["slow", "fast"]
figures = ["median_s", "retransmissions"]
[defaults]
iterations = 2
seed = 10
[[runs]]
name = "slow"
[[runs]]
name = "fast"
[[runs]]
name = "new"
"""

# Median iteration time per run and seed offset (seeds 10, 11, 12): "fast" is the best baseline.
TIMES = {"slow": [2.0, 2.2, 2.4], "fast": [1.0, 1.2, 0.8], "new": [0.5, 0.4, 0.6]}


class Runner:
    """A stand-in for run_experiment: figures from the spec, results.json written, every call kept."""

    def __init__(self, times: dict[str, list[float]] = TIMES, machine_bound: Collection[tuple[str, int]] = (),
                 fail: Collection[tuple[str, int]] = ()) -> None:
        self.times = times
        self.machine_bound = machine_bound
        self.fail = fail
        self.calls: list[tuple[str, int, Path]] = []

    def __call__(self, spec: ExperimentSpec, out: Path) -> Results:
        k = spec.measurement.seed - 10
        self.calls.append((spec.label, spec.measurement.seed, out))
        if (spec.label, k) in self.fail:
            raise ExperimentError(f"{spec.label}: h3 exited with status 3")
        t = self.times[spec.label][k]
        bound = (spec.label, k) in self.machine_bound
        report = {"name": spec.label, "spec": spec_dict(spec), "step_bytes": spec.workload.size_bytes, "ok": True,
                  "check": "exact", "retransmissions": 10 * k, "bytes_on_wire": 10, "packets_on_wire": 1,
                  "summary": {"median_s": t, "p99_s": t * 1.5, "correct": True, "algbw_mbps": 1.0 / t,
                              "lower_bound_s": 0.4, "ratio_to_bound": t / 0.4,
                              "iterations_done": spec.measurement.iterations},
                  "iterations": [], "errors": {},
                  "headline_extra": {"check": "exact", "cpu_idle": 0.05 if bound else 0.5, "machine_bound": bound,
                                     "machine_bound_reason": "CPU 5% idle during the jobs (under 10%)" if bound
                                     else None}}
        out.mkdir(parents=True, exist_ok=True)
        (out / "table.txt").write_text(spec.label)
        return results_file.write(out / "results.json", cast(Results, report))


def spec(tmp_path: Path, text: str = SPEC) -> CompareSpec:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return load_spec(path)


def test_every_run_repeats_with_its_seed_in_a_directory_of_its_own(tmp_path):
    runner = Runner()
    out = tmp_path / "out"
    summary = run_compare(spec(tmp_path), out, runner, log=lambda s: None)
    # round by round: every run once, then every run again, each with seed + repetition
    assert [(name, seed) for name, seed, _ in runner.calls] == [
        (n, 10 + k) for k in range(3) for n in ("slow", "fast", "new")]
    assert {where for *_, where in runner.calls} == {out / n / f"rep{k}" for n in TIMES for k in (1, 2, 3)}
    fast = summary["fast"]
    assert fast["median_s"] == 1.0 and fast["spread"]["median_s"] == {"min": 0.8, "median": 1.0, "max": 1.2, "n": 3}
    assert [r["median_s"] for r in fast["repetitions"]] == [1.0, 1.2, 0.8]
    assert [(r["repetition"], r["seed"]) for r in fast["repetitions"]] == [(1, 10), (2, 11), (3, 12)]
    assert fast["retransmissions"] == 10 and fast["spread"]["retransmissions"]["max"] == 20
    assert summary_file.read(out / "summary.json") == summary


def test_a_run_is_measured_against_the_best_baseline_with_the_ratios_range(tmp_path):
    summary = run_compare(spec(tmp_path), tmp_path / "out", Runner(), log=lambda s: None)
    new = summary["new"]["over_baseline"]
    # median_s: lower is better, so "fast" (median 1.0) is the best baseline, not "slow" (2.2)
    assert new["baseline"] == "fast" and new["figure"] == "median_s"
    assert new["ratio"] == pytest.approx(0.5 / 1.0)
    assert new["min"] == pytest.approx(0.4 / 1.2) and new["max"] == pytest.approx(0.6 / 0.8)
    assert new["headline"] is True
    assert summary["slow"]["is_baseline"] and "over_baseline" not in summary["slow"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Best baseline: **fast**, median 1.000 [0.800, 1.200] (also measured: slow 2.200 [2.000, 2.400])" in report
    assert "- new: 0.500 [0.333, 0.750] from 3 repetition(s)" in report
    assert "| new | bmv2 | 3 of 3 | no | 0.50 [0.33, 0.75] | 0.500 [0.400, 0.600] |" in report


def test_machine_bound_repetitions_are_left_out_and_named(tmp_path):
    # new's first repetition ran on a saturated machine and was fast for it; slow's every repetition
    times = {**TIMES, "new": [0.1, 0.4, 0.6]}
    bound = {("new", 0), ("slow", 0), ("slow", 1), ("slow", 2)}
    summary = run_compare(spec(tmp_path), tmp_path / "out", Runner(times, bound), log=lambda s: None)
    new = summary["new"]
    assert new["median_s"] == pytest.approx(0.5) and new["spread"]["median_s"]["n"] == 2  # 0.1 left out
    assert new["machine_bound_repetitions"] == [1] and new["headline_repetitions"] == 2
    assert not new["machine_bound"] and len(new["repetitions"]) == 3  # every repetition kept, marked
    slow = summary["slow"]
    assert slow["machine_bound"] and slow["headline_repetitions"] == 0  # figures from all: no headline
    assert slow["median_s"] == pytest.approx(2.2)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Machine-bound repetitions (left out of the medians and the headline)" in report
    assert "- new, repetition 1: CPU 5% idle during the jobs (under 10%)" in report
    assert "| slow | bmv2 | 0 of 3 | **3 of 3** | baseline |" in report
    # every repetition of the run machine-bound: its ratio is given, never a headline
    everything = {(n, k) for n in ("new",) for k in range(3)}
    again = run_compare(spec(tmp_path), tmp_path / "again", Runner(TIMES, everything), log=lambda s: None)
    assert again["new"]["over_baseline"]["headline"] is False
    assert "(every repetition machine-bound: not a headline)" in (tmp_path / "again" / "report.md").read_text()


def test_a_compare_started_again_runs_only_what_is_not_complete(tmp_path):
    out = tmp_path / "out"
    first = Runner(fail={("new", 2)})
    lines: list[str] = []
    summary = run_compare(spec(tmp_path), out, first, log=lines.append)
    assert len(first.calls) == 9 and summary["new"]["failed_repetitions"] == [3]
    assert "[9/9] new (repetition 3/3) ..." in "\n".join(lines)
    # the failed repetition left no results.json; one that stopped early left an incomplete one
    stopped = results_file.read(out / "fast" / "rep2" / "results.json")
    stopped["summary"]["iterations_done"] = 1
    results_file.write(out / "fast" / "rep2" / "results.json", stopped)
    again = Runner()
    lines = []
    summary = run_compare(spec(tmp_path), out, again, log=lines.append)
    assert [(n, s) for n, s, _ in again.calls] == [("fast", 11), ("new", 12)]
    assert sum("skipped" in line for line in lines) == 7
    assert f"[1/9] slow (repetition 1/3): complete in {out / 'slow' / 'rep1'}, skipped" in lines
    assert summary["new"]["failed_repetitions"] == [] and summary["new"]["repetitions_done"] == 3
    assert summary["new"]["spread"]["median_s"] == {"min": 0.4, "median": 0.5, "max": 0.6, "n": 3}
    # a changed spec is another experiment: its repetitions run again, the others' stay
    changed = SPEC.replace('[[runs]]\nname = "new"\n', '[[runs]]\nname = "new"\nwindow = 8\n')
    third = Runner()
    run_compare(spec(tmp_path, changed), out, third, log=lambda s: None)
    assert [(n, s) for n, s, _ in third.calls] == [("new", 10), ("new", 11), ("new", 12)]


def test_one_repetition_keeps_one_directory_per_run(tmp_path):
    runner = Runner()
    summary = run_compare(spec(tmp_path, SPEC.replace("repeat = 3", "repeat = 1")), tmp_path / "out", runner,
                          log=lambda s: None)
    assert [where for *_, where in runner.calls] == [tmp_path / "out" / n for n in ("slow", "fast", "new")]
    assert summary["new"]["spread"]["median_s"] == {"min": 0.5, "median": 0.5, "max": 0.5, "n": 1}
    assert summary["new"]["over_baseline"]["ratio"] == summary["new"]["over_baseline"]["min"] == 0.5


def test_training_specs_are_measured_by_their_throughput():
    from gradswitch.experiment.shipped_specs import EXPERIMENTS

    dlcp = load_spec(EXPERIMENTS / "dlcp-contention")
    assert dlcp.headline_figure == "samples_per_s_real" and dlcp.baselines and dlcp.repeat >= 3
    assert load_spec(EXPERIMENTS / "netreduce").headline_figure == "median_s"  # its first figure
    # higher throughput is better: the baseline with more samples/s is the one to beat
    run = {"spread": {"samples_per_s_real": {"min": 90.0, "median": 100.0, "max": 110.0, "n": 3}}}
    base = {"spread": {"samples_per_s_real": {"min": 45.0, "median": 50.0, "max": 60.0, "n": 3}}}
    r = ratio_of(run, base, "samples_per_s_real")
    assert (r["ratio"], r["min"], r["max"]) == (2.0, 1.5, pytest.approx(110 / 45))


@pytest.mark.parametrize("text, error", [
    ("repeat = 0", r"repeat = 0: a whole number of repetitions per run, 1 to 100"),
    ('repeat = "3"', r"repeat = '3': a whole number"),
    ('baselines = ["slowest"]', r"baselines: no run named 'slowest' \(runs: slow, fast, new\)"),
    ('baselines = "slow"', r"baselines = 'slow': a list of run names"),
    ('baselines = ["slow", "fast", "new"]', r"baselines name every run"),
])
def test_bad_repeat_or_baselines_say_what_is_allowed(tmp_path, text, error):
    body = SPEC.replace('repeat = 3\nbaselines = ["slow", "fast"]\n', text + "\n")
    with pytest.raises(SpecError, match=error):
        spec(tmp_path, body)


def test_repetitions_may_draw_another_ecmp_hash_too(tmp_path):
    path = tmp_path / "lb.toml"
    path.write_text(SPEC.replace("repeat = 3", 'repeat = 3\nrepeat_varies = ["seed", "ecmp_seed"]'))
    spec = load_spec(path)
    runner = Runner()
    run_compare(spec, tmp_path / "out", runner, log=lambda line: None)
    assert sorted({(label, seed) for label, seed, _ in runner.calls if label == "new"}) == [
        ("new", 10), ("new", 11), ("new", 12)]
    assert [r.spec.network.ecmp_seed for r in repetitions(spec) if r.label == "new"] == [0, 1, 2]
    assert [r.spec.network.ecmp_seed for r in repetitions(CompareSpec("plain", spec.runs,
                                                                      repeat=3)) if r.label == "new"] \
        == [0, 0, 0]


@pytest.mark.parametrize("varies", ['["workers"]', '[]', '"seed"', '["seed", "seed"]'])
def test_repeat_varies_names_only_what_a_repetition_may_draw(tmp_path, varies):
    path = tmp_path / "bad.toml"
    path.write_text(SPEC.replace("repeat = 3", f"repeat = 3\nrepeat_varies = {varies}"))
    with pytest.raises(SpecError, match="repeat_varies"):
        load_spec(path)


WITHIN = """
name = "lb"
baselines = ["a-ecmp", "b-ecmp"]
baselines_within = ["ring_order"]
figures = ["median_s"]
[defaults]
iterations = 2
seed = 10
[[runs]]
name = "a-ecmp"
ring_order = "leaves"
[[runs]]
name = "b-ecmp"
ring_order = "random"
[[runs]]
name = "a-spray"
ring_order = "leaves"
[[runs]]
name = "b-spray"
ring_order = "random"
"""


def test_a_run_is_measured_against_the_baseline_of_its_own_placement(tmp_path):
    path = tmp_path / "lb.toml"
    path.write_text(WITHIN)
    times = {"a-ecmp": [2.0], "b-ecmp": [1.0], "a-spray": [1.0], "b-spray": [0.5]}
    summary = run_compare(load_spec(path), tmp_path / "out", Runner(times), log=lambda line: None)
    assert summary["a-spray"]["over_baseline"]["baseline"] == "a-ecmp"  # not b-ecmp, the faster one
    assert summary["b-spray"]["over_baseline"]["baseline"] == "b-ecmp"
    assert summary["a-spray"]["over_baseline"]["ratio"] == pytest.approx(0.5)


def test_a_run_without_a_baseline_of_its_kind_is_refused(tmp_path):
    path = tmp_path / "lb.toml"
    path.write_text(WITHIN.replace('baselines = ["a-ecmp", "b-ecmp"]', 'baselines = ["a-ecmp"]'))
    with pytest.raises(SpecError, match=r"b-spray.*no baseline shares its ring_order"):
        load_spec(path)


def test_a_run_saved_before_a_spec_field_existed_is_still_complete(tmp_path):
    """Results written before a field was added (e.g. `backend`) ran with its default: resuming keeps
    them; a run that set the new field to something else is another experiment."""
    out = tmp_path / "out"
    run_compare(spec(tmp_path), out, Runner(), log=lambda s: None)
    for path in out.glob("*/rep*/results.json"):
        saved = json.loads(path.read_text())
        for newer in ("backend", "ranks"):
            del saved["spec"][newer]
        del saved["spec"]["sim"]["shaped_links"]  # a field newer than the run inside a table
        path.write_text(json.dumps(saved))
    again = Runner()
    run_compare(spec(tmp_path), out, again, log=lambda s: None)
    assert again.calls == []
    on_ns3 = SPEC.replace('[[runs]]\nname = "new"\n', '[[runs]]\nname = "new"\nbackend = "ns3"\n')
    third = Runner()
    run_compare(spec(tmp_path, on_ns3), out, third, log=lambda s: None)
    assert [(n, s) for n, s, _ in third.calls] == [("new", 10), ("new", 11), ("new", 12)]
