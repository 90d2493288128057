"""What a graph run's communication carries (GraphJob.payload), and what a run of real gradients yields.

`synthetic` (the default): every operation's input is drawn from the job's seed and its output checked against
what the operation defines (gradswitch/hosts/collectives/data.py); any graph, either backend (the simulator checks it by
digest). `train-digits`: the graph is gradswitch.workload.generators.digits_graph and each all-reduce carries a rank's
real gradient of the digits MLP (gradswitch/hosts/graph_digits.py), checked exactly against the sum the rank computes of
every worker's gradient; the hosts only (BMv2): the simulator's ranks compute no model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from gradswitch.workload.worker_result import WorkerResult


class PayloadKind(str, Enum):
    SYNTHETIC = "synthetic"
    DIGITS = "train-digits"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TrainingOutcome:
    """A run of real gradients: per iteration the held-out accuracy of the worst rank's model and the largest
    minibatch loss, and each rank's parameter digest at the end (equal on every rank when every sum was exact)."""

    accuracy: tuple[float, ...]
    loss: tuple[float, ...]
    model_digests: dict[int, str]
    # NetReduce k of N (or a deadline): per iteration the fewest workers a sum held (over every rank's messages),
    # and the largest relative error of a rank's averaged gradient against the mean of all N; empty otherwise
    contributors: tuple[float, ...] = ()
    gradient_error: tuple[float, ...] = ()

    @property
    def model_digest(self) -> str | None:
        """The digest every rank's model has, or None when they differ (or there is none)."""
        digests = set(self.model_digests.values())
        return digests.pop() if len(digests) == 1 else None

    @classmethod
    def of(cls, results: Mapping[int, WorkerResult]) -> TrainingOutcome:
        """From the ranks' results (their iteration records and digests), over the iterations every rank
        recorded."""
        records = [r["iterations"] for r in results.values()]
        done = min((len(its) for its in records), default=0)
        partial = done > 0 and all("contributors" in its[i]["extra"] for its in records for i in range(done))
        return cls(tuple(min(its[i]["extra"]["accuracy"] for its in records) for i in range(done)),
                   tuple(max(its[i]["extra"]["loss"] for its in records) for i in range(done)),
                   {rank: r["model_digest"] for rank, r in sorted(results.items()) if "model_digest" in r},
                   tuple(min(its[i]["extra"]["contributors"] for its in records) for i in range(done))
                   if partial else (),
                   tuple(max(its[i]["extra"]["gradient_error"] for its in records) for i in range(done))
                   if partial else ())

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"accuracy": list(self.accuracy), "loss": list(self.loss),
                             "model_digests": {str(r): d for r, d in self.model_digests.items()}}
        if self.contributors:
            d["contributors"], d["gradient_error"] = list(self.contributors), list(self.gradient_error)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainingOutcome:
        return cls(tuple(float(a) for a in d["accuracy"]), tuple(float(x) for x in d["loss"]),
                   {int(r): str(v) for r, v in d["model_digests"].items()},
                   tuple(float(c) for c in d.get("contributors", ())),
                   tuple(float(e) for e in d.get("gradient_error", ())))
