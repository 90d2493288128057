"""What a rank's communication nodes carry on the hosts' graph engine (gradswitch/hosts/graph_main.py): a `DataSource`
gives each operation's input, the output it must have, and what happens when an operation ends; after the graph, its
report (per-iteration records and a worker result's extra fields). The job's payload (GraphJob.payload) picks it
(gradswitch/hosts/graph_sources.py): synthetic data from the seed (gradswitch/hosts/collectives/data.py, here) or the
digits MLP's real gradients (gradswitch/hosts/graph_digits.py).

The runtime calls `input` as an operation starts, `finished` as soon as it ends (before anything that depends on
it starts), and `expected` when it checks the output, in the order the operations ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gradswitch.hosts.collectives.ops import Op
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.worker_result import IterationEntry


@dataclass(frozen=True)
class SourceReport:
    """What a data source adds to the rank's result: iteration records, and extra fields (EXTRA_KEYS)."""

    iterations: list[IterationEntry] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)


class DataSource(Protocol):
    def input(self, op: Op) -> Int32Array:
        """This rank's input to the operation, as it starts."""

    def expected(self, op: Op) -> Int32Array:
        """What this rank's output of the operation must be (every element)."""

    def finished(self, op: Op, output: Int32Array) -> None:
        """The operation ended with this output (not yet checked)."""

    def report(self) -> SourceReport:
        """After the graph and its checks."""


class SyntheticData:
    """Inputs drawn from the job's seed, outputs as the operation defines them
    (gradswitch/hosts/collectives/data.py)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def input(self, op: Op) -> Int32Array:
        return op.input(self.seed)

    def expected(self, op: Op) -> Int32Array:
        return op.expected(self.seed)

    def finished(self, op: Op, output: Int32Array) -> None:
        pass

    def report(self) -> SourceReport:
        return SourceReport()
