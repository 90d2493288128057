"""What a backend measured running a job's execution graphs: when each node of each rank started and
ended, and whether a communication node's output held what its operation defines. Both backends
(the Python hosts on BMv2, the C++ simulator) report this one type; reports and comparisons read it.

Times are seconds of the emulated cluster (real seconds of the job being modelled), from the
job's start.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from gradswitch.workload.graph import CollectiveKind

TIMING_FORMAT = 1


@dataclass(frozen=True)
class NodeTiming:
    rank: int
    node_id: int
    kind: str  # gradswitch.workload.graph.NODE_KINDS's key: compute, collective, send, recv
    start_s: float
    end_s: float
    collective: CollectiveKind | None = None
    group: str | None = None
    nbytes: int = 0
    checked: bool | None = None  # communication: its output held exactly what it should (None: not checked)
    # DLCP dropping: packets received zero-filled, and the squared error they left in its checked output against
    # that output's squared norm (the simulator's digest check: elements of blocks lacking a contribution, and
    # elements); a job without dropping: 0
    zero_filled: int = 0
    error2: float = 0.0
    norm2: float = 0.0
    # float32 gradients (the hosts' payload `gradients`): its output decoded, its largest absolute error against the
    # float64 sum of the ranks' gradients (the loop's max_abs_error); None: not known (integers, exponent codes, or
    # a payload without floats)
    float_error: float | None = None

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class NodeStart:
    """A node a rank started and had not ended when it stopped (it died, or its job failed): when it started."""

    rank: int
    node_id: int
    start_s: float


@dataclass(frozen=True)
class CollectiveTime:
    """One collective of a group (the k-th of that group, run by every member): from its first
    member's start to its last member's end."""

    group: str
    index: int
    collective: CollectiveKind
    nbytes: int
    start_s: float
    end_s: float
    checked: bool | None  # every member's output exact (None: not checked)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class GraphRun:
    """Every node's timing, and the job's time (its last node's end); a rank that stopped mid-graph, the start of
    each node it had started and not ended (`started`: a training iteration ends as its next one's first forward
    starts, ended or not)."""

    nodes: tuple[NodeTiming, ...]
    started: tuple[NodeStart, ...] = ()

    @property
    def job_s(self) -> float:
        return max((n.end_s for n in self.nodes), default=0.0)

    def collectives(self) -> list[CollectiveTime]:
        """Each group's collectives in order, members matched by position (as gradswitch.workload.graph.validate
        requires: every member runs a group's collectives in one sequence)."""
        per: dict[tuple[str, int], list[NodeTiming]] = defaultdict(list)
        seen: dict[tuple[str, int], int] = defaultdict(int)
        for n in sorted(self.nodes, key=lambda n: (n.rank, n.start_s, n.node_id)):
            if n.kind == "collective" and n.group is not None:
                k = seen[(n.group, n.rank)]
                seen[(n.group, n.rank)] += 1
                per[(n.group, k)].append(n)
        out = []
        for (group, k), members in sorted(per.items(), key=lambda kv: min(m.start_s for m in kv[1])):
            first = members[0]
            assert first.collective is not None
            checks = [m.checked for m in members]
            out.append(CollectiveTime(group, k, first.collective, first.nbytes, min(m.start_s for m in members),
                                      max(m.end_s for m in members),
                                      None if any(c is None for c in checks) else all(checks)))
        return out

    def exposed_communication_s(self) -> dict[int, float]:
        """Per rank: the time it had no computation running and waited on communication (the
        union of its communication intervals minus what overlapped a computation)."""
        out: dict[int, float] = {}
        by_rank: dict[int, list[NodeTiming]] = defaultdict(list)
        for n in self.nodes:
            by_rank[n.rank].append(n)
        for rank, nodes in by_rank.items():
            comm = _union([(n.start_s, n.end_s) for n in nodes if n.kind != "compute"])
            comp = _union([(n.start_s, n.end_s) for n in nodes if n.kind == "compute"])
            out[rank] = _length(comm) - _overlap(comm, comp)
        return out

    def undilated(self, factor: float) -> GraphRun:
        """Times on the clock of a run dilated by `factor` as the emulated cluster's (divided by it)."""
        return GraphRun(tuple(replace(n, start_s=n.start_s / factor, end_s=n.end_s / factor) for n in self.nodes),
                        tuple(replace(n, start_s=n.start_s / factor) for n in self.started))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": TIMING_FORMAT, "nodes": [
            {"rank": n.rank, "node_id": n.node_id, "kind": n.kind, "start_s": n.start_s, "end_s": n.end_s,
             "collective": None if n.collective is None else n.collective.value, "group": n.group,
             "nbytes": n.nbytes, "checked": n.checked, "zero_filled": n.zero_filled, "error2": n.error2,
             "norm2": n.norm2, **({} if n.float_error is None else {"float_error": n.float_error})}
            for n in self.nodes]}
        if self.started:  # (absent: none, as a run that did not stop)
            out["started"] = [{"rank": n.rank, "node_id": n.node_id, "start_s": n.start_s} for n in self.started]
        return out

    @staticmethod
    def from_dict(d: dict[str, Any]) -> GraphRun:
        if d.get("format") != TIMING_FORMAT:
            raise ValueError(f"graph timing format {d.get('format')!r}; this gradswitch reads {TIMING_FORMAT}")
        return GraphRun(tuple(
            NodeTiming(int(x["rank"]), int(x["node_id"]), str(x["kind"]), float(x["start_s"]), float(x["end_s"]),
                       None if x["collective"] is None else CollectiveKind(x["collective"]), x["group"],
                       int(x["nbytes"]), x["checked"], int(x.get("zero_filled", 0)), float(x.get("error2", 0.0)),
                       float(x.get("norm2", 0.0)),
                       None if x.get("float_error") is None else float(x["float_error"])) for x in d["nodes"]),
            tuple(NodeStart(int(x["rank"]), int(x["node_id"]), float(x["start_s"])) for x in d.get("started", [])))


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)


def _overlap(x: list[tuple[float, float]], y: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in x for c, d in y)
