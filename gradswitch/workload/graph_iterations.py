"""A training graph's run (gradswitch/workload/generators/training.py) as the training loop reports it: per rank, its
timeline (each forward and backward node a computation event, each all-reduce an op event) and its iterations
(IterationRecords from that timeline, gradswitch/workload/timeline.py `timings`), so a graph engine's run gives
the loop's result-<id>.json and, through the same report, the loop's results.json.

A rank's iteration i runs from its own first forward node of iteration i to the start of its own first forward
node of iteration i + 1 (ended or not: a rank that stopped as that node started had ended iteration i, as a loop's
worker that crashes after iteration i has), as each worker of the loop measures its own; the last one ends when this
rank's nodes that a next iteration's first forward would wait for have ended (gradswitch/workload/generators/training.py
`iteration_times` takes the same nodes over every rank). A graph without computation (a job's all-reduces in a
row, gradswitch/workload/generators/plain.py) times an iteration from its first all-reduce's start to its last's
end on the rank, as the loop without training does (gradswitch/hosts/loops.py). An iteration is correct when every
all-reduce of it on the rank held exactly what it should (a node not checked counts as held; `check` says which
check ran).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.graph import CollectiveNode, GraphError, JobGraph, RankGraph
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.node_names import NodeLabel, NodeName, iteration_head, iteration_prefix, parse_node_name
from gradswitch.workload.records import CheckKind, IterationRecord
from gradswitch.workload.timeline import Event, EventKind, timings

_KINDS = {NodeLabel.FORWARD: EventKind.FORWARD, NodeLabel.BACKWARD: EventKind.BACKWARD,
          NodeLabel.ALL_REDUCE: EventKind.OP, NodeLabel.CODES: EventKind.OP}


def iteration_of(name: str) -> int | None:
    """The training iteration a training graph's node belongs to (`it3.fwd.conv1`: 3); None for another graph's."""
    parts = _parts(name)
    return parts.iteration if parts is not None else None


def _parts(name: str) -> NodeName | None:
    """`it3.fwd.conv1` parsed; None for a name the training generator (or the one without computation) does not
    give."""
    parsed = parse_node_name(name)
    return parsed if parsed is not None and parsed.label in _KINDS and parsed.what else None


def trains(rank: RankGraph) -> bool:
    """Whether the rank's graph is a training graph's (forward nodes; not a graph without computation's nor
    train-digits')."""
    return any(p is not None and p.label == NodeLabel.FORWARD for n in rank.nodes if (p := _parts(n.name)))


def iteration_start(rank: RankGraph, iteration: int) -> int | None:
    """The id of the rank's first forward node of a training iteration (whose start ends the iteration before it,
    where a loop's worker that crashes after that one dies); None: the graph has no such iteration."""
    return next((n.id for n in rank.nodes
                 if (p := _parts(n.name)) is not None and (p.iteration, p.label) == (iteration, NodeLabel.FORWARD)),
                None)


def crash_node(rank: RankGraph, after: int) -> int | None:
    """Where the rank dies for a crash after iteration `after`, as the loop's worker does: a training graph's next
    iteration's first forward, as it would start (iteration_start: none after the last iteration, as the training
    loop's worker, which dies as its next iteration starts); a graph without computation's (its all-reduces in a row,
    gradswitch/workload/generators/plain.py) iteration `after`'s last node, once it ended and the rank's writes are
    acknowledged (as the loop without training dies after its iteration's drain, the last one's too); None: no such
    node."""
    if trains(rank):
        return iteration_start(rank, after + 1)
    return next((n.id for n in reversed(rank.nodes) if (p := _parts(n.name)) is not None and p.iteration == after),
                None)


def _rank_timings(graph: JobGraph, run: GraphRun, rank: int) -> list[tuple[NodeTiming, NodeName]]:
    names = {n.id: n.name for n in graph.ranks[rank].nodes}
    out = []
    for t in run.nodes:
        if t.rank == rank and (parts := _parts(names.get(t.node_id, ""))) is not None:
            out.append((t, parts))
    return out


def rank_events(graph: JobGraph, run: GraphRun, rank: int, in_flight: int = 1) -> list[Event]:
    """The rank's timeline as the loop records it: a layer's forward and backward passes by the layer's name, an
    all-reduce as `op K` on lane K mod `in_flight` (the loop's slot; the graph does not record which it took)."""
    events = []
    for t, p in _rank_timings(graph, run, rank):
        kind = _KINDS[p.label]
        if kind == EventKind.OP:
            events.append(Event(p.iteration, kind, f"op {p.what}", t.start_s, t.end_s, int(p.what) % max(1, in_flight)))
        else:
            events.append(Event(p.iteration, kind, p.what, t.start_s, t.end_s))
    return sorted(events, key=lambda e: (e.start, e.end))


def rank_bounds(graph: JobGraph, run: GraphRun, rank: int) -> list[tuple[float, float]]:
    """Each finished iteration's (start, end) on the rank; an iteration that did not finish is left out."""
    timed = _rank_timings(graph, run, rank)
    if not trains(graph.ranks[rank]):
        return _plain_bounds(graph, timed, rank)
    names = {n.id: n.name for n in graph.ranks[rank].nodes}
    begun = [(s.start_s, parts) for s in run.started
             if s.rank == rank and (parts := _parts(names.get(s.node_id, ""))) is not None]
    starts: dict[int, float] = {}
    for start_s, p in [(t.start_s, parts) for t, parts in timed] + begun:
        if p.label == NodeLabel.FORWARD:
            starts[p.iteration] = min(starts.get(p.iteration, start_s), start_s)
    if not starts:
        return []
    iterations = max(starts) + 1
    if sorted(starts) != list(range(iterations)):
        raise GraphError(f"{graph.name}: rank {rank} started iterations {sorted(starts)}, not 0..{iterations - 1}")
    bounds = [(starts[i], starts[i + 1]) for i in range(iterations - 1)]
    last_end = _last_end(graph, timed, rank, iterations)
    if last_end is not None:
        bounds.append((starts[iterations - 1], last_end))
    return bounds


def _plain_bounds(graph: JobGraph, timed: list[tuple[NodeTiming, NodeName]], rank: int
                  ) -> list[tuple[float, float]]:
    """A graph without computation (gradswitch/workload/generators/plain.py): an iteration runs from its first
    all-reduce's start to its last one's end on the rank, as the loop times its reductions in a row; one whose
    every node has not ended is left out."""
    total: dict[int, int] = {}
    for n in graph.ranks[rank].nodes:
        if (p := _parts(n.name)) is not None:
            total[p.iteration] = total.get(p.iteration, 0) + 1
    spans: dict[int, list[NodeTiming]] = {}
    for t, p in timed:
        spans.setdefault(p.iteration, []).append(t)
    out = []
    for it in sorted(total):
        mine = spans.get(it, [])
        if len(mine) != total[it]:
            break
        out.append((min(t.start_s for t in mine), max(t.end_s for t in mine)))
    return out


def _last_end(graph: JobGraph, timed: list[tuple[NodeTiming, NodeName]], rank: int, iterations: int
              ) -> float | None:
    """When the rank's last iteration ended: its nodes that a next iteration's first forward would wait for (what
    iteration 1's first forward waits for in iteration 0, taken one iteration on), all ended; None: some did not.
    One iteration: its every node ended."""
    last = iterations - 1
    mine = [t for t, parts in timed if parts.iteration == last]
    if iterations < 2:
        total = sum(1 for n in graph.ranks[rank].nodes if (p := _parts(n.name)) is not None and p.iteration == last)
        return max(t.end_s for t in mine) if mine and len(mine) == total else None
    by_id = graph.ranks[rank].by_id()
    first = iteration_start(graph.ranks[rank], 1)
    assert first is not None  # a training graph of two iterations or more (trains: it has forward nodes)
    zero, head = iteration_head(0), iteration_head(last)
    waited = {head + by_id[d].name[len(zero):] for d in by_id[first].deps if by_id[d].name.startswith(zero)}
    ends = [t.end_s for t, _parts_ in timed if by_id[t.node_id].name in waited]
    return max(ends) if len(ends) == len(waited) else None


def iteration_float_errors(graph: JobGraph, run: GraphRun, rank: int) -> dict[int, float]:
    """Per iteration of the rank whose sums carried float32 gradients (NodeTiming.float_error: the hosts' payload
    `gradients`), the largest absolute error of its sums against the float64 sums, the loop's max_abs_error; an
    iteration of which no node says is left out (not known)."""
    out: dict[int, float] = {}
    for t, p in _rank_timings(graph, run, rank):
        if t.float_error is not None:
            out[p.iteration] = max(out.get(p.iteration, 0.0), t.float_error)
    return out


@dataclass
class _IterationCheck:
    """One iteration's all-reduces on a rank: whether each held its sum (DLCP: but for zero-filled contributions),
    the packets received zero-filled and the squared error they left against the squared norm checked."""

    held: bool = True
    zero_filled: int = 0
    error2: float = 0.0
    norm2: float = 0.0

    @property
    def relative_error(self) -> float:
        return math.sqrt(self.error2 / self.norm2) if self.norm2 > 0 else 0.0


def rank_iterations(graph: JobGraph, run: GraphRun, rank: int, check: CheckKind, in_flight: int = 1,
                    dlcp: DlcpPolicy | None = None) -> list[IterationRecord]:
    """The rank's finished iterations as the training loop records them: times, computation, communication and
    their overlap from its timeline, and whether every all-reduce of the iteration held its sum. With DLCP dropping
    (`dlcp.drop`) an iteration's zero-filled packets and the relative error they left are its own, and it is correct
    while that error is at most `dlcp.max_relative_error`, as the loop judges it (gs-job-node.cc, docs/dlcp.md
    "Trimmed packets and the loss budget")."""
    checks: dict[int, _IterationCheck] = defaultdict(_IterationCheck)
    by_id = graph.ranks[rank].by_id()
    for t, p in _rank_timings(graph, run, rank):
        if isinstance(by_id[t.node_id], CollectiveNode):
            c = checks[p.iteration]
            c.held = c.held and t.checked is not False
            c.zero_filled += t.zero_filled
            c.error2 += t.error2
            c.norm2 += t.norm2
    bound = dlcp.max_relative_error if dlcp is not None and dlcp.drop else None
    out = []
    training = trains(graph.ranks[rank])
    for timing in timings(rank_events(graph, run, rank, in_flight), rank_bounds(graph, run, rank)):
        c = checks.get(timing.index, _IterationCheck())
        rel = c.relative_error
        extra: dict[str, float] = {"zero_filled_packets": float(c.zero_filled), "relative_error": rel}
        if training:  # the training loop's parts of an iteration (the loop without training records none)
            extra = {"compute_s": timing.compute_s, "comm_s": timing.comm_s, "exposed_comm_s": timing.exposed_comm_s,
                     "overlap": timing.overlap, **extra}
        correct = c.held and (c.error2 == 0 or (bound is not None and rel <= bound))
        out.append(IterationRecord(timing.index, timing.start, timing.end, correct, 0, 0.0, 0, extra, check=check))
    return out


class IterationProgress:
    """How many of a rank's iterations have ended, node by node (`ended`), for the rank's progress file: iteration i
    is done once every node of iterations 0..i has ended, as a loop's worker counts it (a training graph's, a graph
    without computation's, train-digits': iteration_prefix). A graph of no iterations counts none."""

    def __init__(self, rank: RankGraph) -> None:
        self._iteration = {n.id: it for n in rank.nodes if (it := iteration_prefix(n.name)) is not None}
        self._left: dict[int, int] = {}
        for it in self._iteration.values():
            self._left[it] = self._left.get(it, 0) + 1
        self.done = 0

    def ended(self, node_id: int) -> bool:
        """Count a node's end; True when that completed one or more iterations (`done` grew)."""
        it = self._iteration.get(node_id)
        if it is None:
            return False
        self._left[it] -= 1
        before = self.done
        while self._left.get(self.done) == 0:
            self.done += 1
        return self.done > before
