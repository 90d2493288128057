"""Time to accuracy of a job that trains a real model, from its iterations (gradswitch/experiment/report.py)."""

from __future__ import annotations

from typing import cast

from gradswitch.experiment.report import TARGET_ACCURACY, _iteration, learning_figures
from gradswitch.workload.worker_result import IterationEntry


def _its(accuracies: list[float]) -> list[dict[str, float]]:
    return [{"index": i, "accuracy": a, "train_s": 0.5 * (i + 1)} for i, a in enumerate(accuracies)]


def test_the_first_iteration_at_the_target_gives_iterations_and_training_time():
    got = learning_figures(_its([0.5, 0.85, TARGET_ACCURACY, 0.88, 0.95]))
    assert got == {"final_accuracy": 0.95, "target_accuracy": TARGET_ACCURACY, "iterations_to_accuracy": 3,
                   "time_to_accuracy_s": 1.5}


def test_a_run_that_never_reaches_the_target_says_so():
    got = learning_figures(_its([0.5, 0.6]))
    assert got["iterations_to_accuracy"] is None and got["time_to_accuracy_s"] is None
    assert got["final_accuracy"] == 0.6


def test_runs_without_accuracy_have_no_learning_figures():
    assert learning_figures([{"index": 0, "time_s": 1.0}]) == {}


def test_a_jobs_accuracy_is_its_worst_workers_model():
    recs = [{"time_s": 1.0, "start": 0.0, "end": 1.0, "correct": True, "check": "exact",
             "extra": {"accuracy": a, "zero_filled_packets": z}} for a, z in ((0.91, 1.0), (0.87, 2.0))]
    it = _iteration(0, cast(list[IterationEntry], recs))
    assert it["accuracy"] == 0.87
    assert it["zero_filled_packets"] == 3.0
