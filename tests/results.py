"""The orchestration's entry points as the tests read what they return: the JSON values of results.json and
summary.json, whose fields a test asserts on whatever their type. The code itself reads them typed
(gradswitch/experiment/results_file.Results, summary_file.Summary); here a test needs no narrowing of a figure
that is None only when a run did not happen before comparing it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradswitch.experiment import compare, results_file, runner, summary_file
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions

Report = dict[str, Any]  # a results.json as JSON


def run_experiment(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
                   network_options: NetworkOptions | None = None) -> Report:
    return dict(runner.run_experiment(spec, out_dir, progress, network_options))


def run_on(net: Testbed, spec: ExperimentSpec, out_dir: Path, progress: bool | None = None) -> Report:
    return dict(runner.run_on(net, spec, out_dir, progress))


def run_compare(spec: compare.CompareSpec, out_dir: Path, runner: compare.Runner | None = None,
                log: Any = print) -> dict[str, Report]:
    return {name: dict(run) for name, run in compare.run_compare(spec, out_dir, runner, log).items()}


def read(path: Path) -> Report:
    """A results.json as results_file reads it (its format checked)."""
    return dict(results_file.read(path))


def read_summary(path: Path) -> dict[str, Report]:
    """A compare's summary.json as summary_file reads it (its format checked)."""
    return {name: dict(run) for name, run in summary_file.read(path).items()}
