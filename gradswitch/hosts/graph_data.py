"""What a rank's communication nodes carry on the hosts' graph engine (gradswitch/hosts/graph_main.py): a `DataSource`
gives each operation's input, the output it must have, and what happens when an operation ends; after the graph, its
report (per-iteration records and a worker result's extra fields). The job's payload (GraphJob.payload) picks it
(gradswitch/hosts/graph_sources.py): synthetic data from the seed (gradswitch/hosts/collectives/data.py, here), the
digits MLP's real gradients (gradswitch/hosts/graph_digits.py) or the loop's float32 gradients
(gradswitch/hosts/graph_gradients.py, whose checks also give each sum's error against the float64 sum).

The runtime calls `input` as an operation starts, `finished` as soon as it ends (before anything that depends on
it starts), and `expected` when it checks the output, in the order the operations ended. In a DLCP job, before a
training iteration's first operation starts, `contributed` gives the int32 values the rank contributes in that
iteration, from which it sets its magnitude thresholds (gradswitch/workload/dlcp.py Magnitudes), as the loop's
worker sets them from its iteration's gradient; `finished` is told the packets the operation's receives took as
zeros (DLCP dropping: trimmed by a switch, zero-filled within the loss budget).

A NetReduce job of k of N (or with a deadline, docs/faults.md "Stragglers: k of N") ends an all-reduce whose sums
may hold fewer than all ranks: `finished` is then told, per message, which ranks each sum holds (`Contributors`),
and the output it must have is the sum of exactly those ranks' inputs, element by element (as the loop checks it,
gradswitch/hosts/digits_job.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.netreduce_quorum import held_mask
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.worker_result import IterationEntry

# per message of an in-network all-reduce (MESSAGE_ELEMENTS values each, in order): the ranks its sum holds
Contributors = tuple[tuple[int, ...], ...]


def check_all_reduces_in_turn(ops: Mapping[int, Op], ranks: int, sizes: Sequence[int], graph: str,
                              generator: str) -> None:
    """A data source that carries its own tensors (a float32 job's gradients, train-digits') takes only a graph of
    the world group's all-reduces of `sizes` elements in turn (operation k the (k mod len(sizes)))-th);
    ValueError naming the first operation that is not, the graph (`graph`: what it is) and its `generator`."""
    world = tuple(range(ranks))
    for op in ops.values():
        want = sizes[op.sequence % len(sizes)]
        if op.collective != CollectiveKind.ALL_REDUCE or op.members != world or op.elements != want:
            raise ValueError(f"{op.key}: {graph} has only all-reduces of the world group of "
                             f"{', '.join(str(n) for n in sizes)} elements in turn ({generator}), not this "
                             f"{op.collective or op.kind} of {op.elements} on ranks {list(op.members)}")


def refuse_some_ranks_with_exponents(op: Op, exponent: bool, contributors: Contributors | None) -> None:
    """A sum of some ranks alone (k of N) is for fixed point: block exponents' codes and values hold every rank's."""
    if contributors is not None and exponent:
        raise ValueError(f"{op.key}: a sum of some ranks alone (k of N) is for fixed point; block exponents' "
                         "codes and values hold every rank's")


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

    def contributed(self, ops: list[Op]) -> list[Int32Array]:
        """The int32 values this rank contributes in a training iteration whose operations are `ops` (in the
        order they start), before the first starts: DLCP's magnitude thresholds come from them."""

    def finished(self, op: Op, output: Int32Array, contributors: Contributors | None = None,
                 zero_filled: int = 0) -> None:
        """The operation ended with this output (not yet checked); `contributors`: a k-of-N all-reduce's, the ranks
        each message's sum holds (None: every rank); `zero_filled`: packets its receives took as zeros."""

    def float_error(self, op: Op, output: Int32Array) -> float | None:
        """After `expected` (the operation's check): the largest absolute error of its output as numbers against the
        float64 sum of its inputs' (float32 gradients: the loop's max_abs_error); None where its data are no
        floats or the source does not say."""

    def report(self) -> SourceReport:
        """After the graph and its checks."""


class SyntheticData:
    """Inputs drawn from the job's seed, outputs as the operation defines them
    (gradswitch/hosts/collectives/data.py)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.partial: dict[str, Contributors] = {}  # k of N: an all-reduce's contributors, by key, until checked

    def input(self, op: Op) -> Int32Array:
        return op.input(self.seed)

    def expected(self, op: Op) -> Int32Array:
        contributors = self.partial.pop(op.key, None)
        if contributors is None:
            return op.expected(self.seed)
        held = held_mask(contributors, len(op.members), op.elements)
        out: Int32Array = np.zeros(op.elements, dtype=np.int32)
        for q in range(len(op.members)):  # (ranks in group order: the world group's, a NetReduce job's workers)
            out += np.where(held[q], op.input(self.seed, q), 0).astype(np.int32)
        return out

    def contributed(self, ops: list[Op]) -> list[Int32Array]:
        return [self.input(op) for op in ops]

    def finished(self, op: Op, output: Int32Array, contributors: Contributors | None = None,
                 zero_filled: int = 0) -> None:
        if contributors is not None:
            if op.collective != CollectiveKind.ALL_REDUCE:
                raise ValueError(f"{op.key}: only an all-reduce's sum holds some ranks alone, not {op.collective}'s")
            self.partial[op.key] = contributors

    def float_error(self, op: Op, output: Int32Array) -> float | None:
        return None  # int32 data

    def report(self) -> SourceReport:
        return SourceReport()
