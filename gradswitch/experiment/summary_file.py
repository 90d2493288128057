"""A compare's summary.json: per run its headline figures over its repetitions, its type, and the one place
that writes and reads it (gradswitch/experiment/compare.py computes it). docs/results.md describes every field
(generated from SUMMARY_FIELD_DOCS and HEADLINE_DOCS with results_file's, tested against the types)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import IntEnum
from pathlib import Path
from typing import TypedDict, cast

from gradswitch.experiment.results_file import HEADLINE_EXTRA_DOCS, HeadlineExtra, Outcome
from gradswitch.formats import check_format

# summary.json's `format`, beside its runs (a run may not be named `format`); a summary written before it had one
# reads as 1
SUMMARY_FORMAT = 1


class SummaryFileError(ValueError):
    """A summary.json this code cannot read (one line naming it)."""


class CompareExit(IntEnum):
    """`gradswitch compare`'s exit status (docs/results.md): what became of its runs, worst first."""

    OK = 0  # every repetition ran, and its results held where checked
    CHECK_FAILED = 3  # every repetition ran, but some result was wrong or beyond its error bound
    DID_NOT_RUN = 4  # some repetition could not run (a crash, a refused spec, a timeout, iterations missing)

    @property
    def meaning(self) -> str:
        return EXIT_MEANINGS[self]


EXIT_MEANINGS = {
    CompareExit.OK: "every repetition ran, and its results held where checked",
    CompareExit.CHECK_FAILED: "every repetition ran, but some result was wrong or beyond its error bound",
    CompareExit.DID_NOT_RUN: "some repetition could not run (a crash, a refused spec, a timeout, iterations missing)",
}


class Headline(HeadlineExtra, total=False):
    """One repetition's headline figures (compare.headline of its results.json; a trace run's:
    compare_traces.graph_headline of its results.json's `graph`), or its failure."""

    backend: str
    median_s: float | None
    p99_s: float | None
    ok: bool
    outcome: str
    algbw_mbps: float | None
    lower_bound_s: float | None
    ratio_to_bound: float | None
    retransmissions: int
    bytes_on_wire: int
    correct: bool
    iteration_s: float | None
    samples_per_s_real: float | None
    exposed_comm_s: float | None
    compute_s: float | None
    overlap: float
    dilation: float
    scaling_efficiency: float | None
    ideal_samples_per_s_real: float
    of_ideal: float | None
    ideal_link_load: float
    job_s: float | None
    worst_ratio_to_bound: float | None
    bmv2: dict[str, object]
    error: str
    repetition: int
    seed: int


class Spread(TypedDict):
    min: float
    median: float
    max: float
    n: int


class OverBaseline(TypedDict):
    baseline: str | None
    figure: str
    ratio: float | None
    min: float | None
    max: float | None
    headline: bool


class RunSummary(Headline, total=False):
    """One run of a compare in summary.json: every figure's median over its headline repetitions, and these."""

    repetitions_done: int
    headline_repetitions: int
    machine_bound_repetitions: list[int]
    failed_repetitions: list[int]
    check_failed_repetitions: list[int]
    spread: dict[str, Spread]
    repetitions: list[Headline]
    is_baseline: bool
    over_baseline: OverBaseline


Summary = dict[str, RunSummary]  # run name -> its summary

HEADLINE_DOCS: dict[str, str] = {
    **HEADLINE_EXTRA_DOCS,
    "machine_bound": HEADLINE_EXTRA_DOCS["machine_bound"] + "; in a run's summary: every repetition was (no headline)",
    "check": HEADLINE_EXTRA_DOCS["check"] + "; a trace run: `exact` (every output checked) or `none`",
    "backend": "`bmv2` or `ns3`",
    "median_s": "results.json summary.median_s",
    "p99_s": "summary.p99_s",
    "ok": "results.json ok; in a run's summary: every repetition ok",
    "outcome": "results.json outcome (`ok`, `check_failed`, `failed`); in a run's summary the worst repetition's",
    "algbw_mbps": "summary.algbw_mbps",
    "lower_bound_s": "summary.lower_bound_s",
    "ratio_to_bound": "summary.ratio_to_bound",
    "retransmissions": "results.json retransmissions; a trace run: packets its ranks sent again",
    "bytes_on_wire": "results.json bytes_on_wire",
    "correct": "summary.correct (where a check ran); a trace run: every output exact; in a run's summary: every "
               "repetition's",
    "iteration_s": "training.iteration_s, or the median all-reduce iteration",
    "samples_per_s_real": "training.samples_per_s_real (null for an all-reduce)",
    "exposed_comm_s": "training.exposed_comm_s; a trace run: the most any rank waited on communication with no "
                      "computation running (results.json graph.exposed_s)",
    "compute_s": "training.compute_s",
    "overlap": "training.overlap",
    "dilation": "training.dilation",
    "scaling_efficiency": "training.scaling_efficiency",
    "ideal_samples_per_s_real": "training.ideal_samples_per_s_real",
    "of_ideal": "training.of_ideal",
    "ideal_link_load": "training.ideal_link_load",
    "job_s": "a trace run (workload_et): the job's time, its last node's end (results.json graph.job_s)",
    "worst_ratio_to_bound": "a trace run: the worst collective's (or transfer's) time over its link-rate bound "
                            "(results.json graph.by_kind worst_ratio)",
    "bmv2": "the BMv2 build: path, version, logging_macros",
    "error": "a repetition that could not run: why (it has no figures)",
    "repetition": "the repetition's number, from 1",
    "seed": "its seed",
}

SUMMARY_FIELD_DOCS: dict[str, str] = {
    "repetitions_done": "repetitions that ran or failed",
    "headline_repetitions": "repetitions in the medians: not machine-bound, not failed, their checks held",
    "machine_bound_repetitions": "the machine-bound repetitions' numbers",
    "failed_repetitions": "the numbers of repetitions that could not run",
    "check_failed_repetitions": "the numbers of repetitions whose result broke its check (never in the medians)",
    "spread": "figure -> min, median, max and n over the repetitions in the medians",
    "repetitions": "every repetition's own Headline",
    "is_baseline": "the run is one of the spec's baselines",
    "over_baseline": "a run that is not a baseline: its headline figure over the best baseline's (baseline, "
                     "figure, ratio, min, max, headline: false where either side is machine-bound or broke its check)",
}


def run_outcome(heads: list[Headline]) -> str:
    """A run's outcome from its repetitions': failed over check_failed over ok."""
    order = [str(Outcome.FAILED), str(Outcome.CHECK_FAILED), str(Outcome.OK)]
    outcomes = [h.get("outcome", str(Outcome.OK if h.get("ok") else Outcome.FAILED)) for h in heads]
    return min(outcomes, key=order.index) if outcomes else str(Outcome.FAILED)


def typed(raw: Mapping[str, Mapping[str, object]]) -> Summary:
    """summary.json's content, every run's keys checked against RunSummary (ValueError naming an unknown one)."""
    known = set(RunSummary.__annotations__)
    if "format" in raw:
        raise SummaryFileError("a run named 'format': summary.json keeps its format under that name; name the run "
                               "otherwise")
    for run, fields in raw.items():
        unknown = sorted(set(fields) - known)
        if unknown:
            raise SummaryFileError(f"summary of run {run!r}: unknown field {unknown[0]!r} (docs/results.md lists "
                                   "the fields of summary.json)")
    return cast(Summary, {run: dict(fields) for run, fields in raw.items()})


def write(path: Path, summary: Mapping[str, Mapping[str, object]]) -> Summary:
    """summary.json: its format and every run's summary (SummaryFileError: a run's unknown field)."""
    out = typed(summary)
    path.write_text(json.dumps({"format": SUMMARY_FORMAT, **out}, indent=1))
    return out


def read(path: Path) -> Summary:
    """summary.json's runs (FormatError: of another format than SUMMARY_FORMAT; SummaryFileError: unreadable, or
    not a summary)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SummaryFileError(f"{path}: cannot read it: {e}") from None
    runs = {k: v for k, v in check_format(raw, path, "compare's summary", SUMMARY_FORMAT, missing_is=1).items()
            if k != "format"}
    if not all(isinstance(v, dict) for v in runs.values()):
        raise SummaryFileError(f"{path}: not a compare's summary.json (run name -> its figures)")
    return typed(runs)
