"""What one worker or server reports of its run (RUN_DIR/result-<id>.json), its type, and the one place that
writes and reads it: gradswitch/hosts/main.py writes it, the simulator's driver (gradswitch/sim/results.py) makes the
same value from the simulator's output, and the orchestration reads it (gradswitch/experiment/supervisor.py,
report.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict, cast

from gradswitch.formats import FormatError, check_format
from gradswitch.workload.records import IterationRecord

FORMAT = 1  # result-<id>.json's format (gradswitch/formats.py; a file written before it had one reads as 1)


class WorkerResultError(ValueError):
    """A result file this code cannot read (one line naming the file and what is wrong)."""


class IterationEntry(TypedDict):
    """One iteration as a worker reports it (gradswitch.workload.records.IterationRecord.to_dict)."""

    index: int
    start: float
    end: float
    time_s: float
    correct: bool
    wrong_elements: int
    max_abs_error: float | None  # None: not known (the simulator's digest check, or wrong elements)
    saturated: int
    extra: dict[str, float]
    check: str


class PlanFigures(TypedDict):
    ops: int
    layers: int
    largest_op_elements: int


class PathChangeEntry(TypedDict):
    """A NetReduce job's agreed change of path (gradswitch/hosts/fallback.py): times are time.monotonic() on the
    hosts."""

    epoch: int  # odd: to ring, even: back to the switch
    path: str  # ring or switch
    switch: str  # the switch whose loss or return it follows
    from_reduction: int  # the first reduction that took the path (reductions are numbered alike on every worker)
    signalled_at: float  # when this worker saw the signal (a fallback: and stopped sending to the switch)
    agreed_at: float  # when every worker's announcement was in: the path changed


class FallbackEntry(TypedDict):
    """Which path a NetReduce worker's reductions took (gradswitch/hosts/fallback.py)."""

    by_switch: int
    by_ring: int
    redone_for_others: int  # reductions it had from the switch and took part in again by ring for the others
    ring_by_iteration: dict[str, int]  # iteration -> its reductions that ring gave (those with any)
    changes: list[PathChangeEntry]


class TransportStats(TypedDict, total=False):
    """A node's transport counters (gradswitch/hosts/comm.py Comm.stats; the simulator's the same)."""

    tx_packets: int
    tx_bytes: int
    rx_packets: int
    rx_bytes: int
    drops: dict[str, int]
    requester: dict[str, int]
    responder: dict[str, int]
    rtt: dict[str, dict[str, float]]


class _Required(TypedDict):
    node_id: int
    host: str
    role: str
    ok: bool
    iterations: list[IterationEntry]


class WorkerResult(_Required, total=False):
    """result-<id>.json: the node, whether it finished its work, its iterations, its transport's counters
    (gradswitch/hosts/comm.py Comm.stats), and what its loop or role adds (EXTRA_KEYS)."""

    error: str  # why it failed
    traceback: str
    check_failed: bool  # it stopped because a result broke its check (not a crash)
    stats: TransportStats
    timeline: list[dict[str, object]]  # a training worker's events (gradswitch/workload/timeline.py Event)
    plan: PlanFigures  # a training worker's plan
    netreduce: dict[str, object]  # a NetReduce worker's counters
    # a NetReduce worker: the path of its reductions (switch or ring, gradswitch/hosts/fallback.py)
    fallback: FallbackEntry
    keys_served: int  # a parameter server's
    deliveries: int  # the simulator's deliveries of a node
    model_digest: str  # train-digits: the model's digest after the run
    progress: int  # a node that left no result (killed): the iterations it said it completed (progress-<id>)
    format: int  # the file's format (FORMAT), written by `write`


EXTRA_KEYS = frozenset(WorkerResult.__annotations__) - frozenset(_Required.__annotations__) - {
    "error", "traceback", "check_failed", "stats", "format"}


def iteration_entry(record: IterationRecord) -> IterationEntry:
    return cast(IterationEntry, record.to_dict())


def worker_result(node_id: int, host: str, role: str, ok: bool, iterations: list[IterationEntry],
                  stats: Mapping[str, object] | None = None, extra: Mapping[str, object] | None = None,
                  error: str | None = None, traceback: str | None = None, check_failed: bool = False
                  ) -> WorkerResult:
    """A node's result; `extra`'s keys must be EXTRA_KEYS (ValueError naming the one that is not)."""
    out: WorkerResult = {"node_id": node_id, "host": host, "role": role, "ok": ok, "iterations": iterations}
    if error is not None:
        out["error"] = error
    if traceback is not None:
        out["traceback"] = traceback
    if check_failed:
        out["check_failed"] = True
    if stats is not None:
        out["stats"] = cast(TransportStats, dict(stats))
    unknown = sorted(set(extra or {}) - EXTRA_KEYS)
    if unknown:
        raise ValueError(f"a node's result has no field {unknown[0]!r} (known: {', '.join(sorted(EXTRA_KEYS))})")
    out.update(cast(WorkerResult, dict(extra or {})))
    return out


def path_of(run_dir: Path, node_id: int) -> Path:
    return run_dir / f"result-{node_id}.json"


def write(run_dir: Path, result: WorkerResult) -> Path:
    path = path_of(run_dir, result["node_id"])
    path.write_text(json.dumps({"format": FORMAT, **result}, indent=1))
    return path


def read(run_dir: Path, node_id: int) -> WorkerResult:
    """Node node_id's result-<id>.json; WorkerResultError when it is not one."""
    path = path_of(run_dir, node_id)
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise WorkerResultError(f"{path}: cannot read it: {e}") from None
    try:
        check_format(raw, path, "node's result", FORMAT, missing_is=1)
    except FormatError as e:
        raise WorkerResultError(str(e)) from None
    missing = sorted(set(_Required.__annotations__) - set(raw)) if isinstance(raw, dict) else ["node_id"]
    if missing:
        raise WorkerResultError(f"{path}: not a node's result (no {', '.join(missing)})")
    unknown = sorted(set(raw) - set(WorkerResult.__annotations__))
    if unknown:
        raise WorkerResultError(f"{path}: unknown field {unknown[0]!r} (known: "
                                f"{', '.join(sorted(WorkerResult.__annotations__))})")
    raw.pop("format", None)  # the file's, not the node's: the value read is the one written
    return cast(WorkerResult, raw)


WORKER_RESULT_DOCS: dict[str, str] = {
    "node_id": "the node's id in its job",
    "host": "the host it ran on",
    "role": "`worker` or `server`",
    "ok": "it finished its work",
    "iterations": "its iterations (see IterationEntry)",
    "error": "why it failed",
    "traceback": "where it failed (a crash, not a wrong result)",
    "check_failed": "it stopped because a result broke its check (wrong, or beyond its error bound)",
    "stats": "its transport's counters (see TransportStats)",
    "timeline": "training: its compute and communication events (iteration, kind, name, start, end, lane)",
    "plan": "training: its plan (ops, layers, largest_op_elements)",
    "netreduce": "NetReduce: its worker's counters",
    "keys_served": "a parameter server: keys it served",
    "deliveries": "the simulator: messages delivered to it",
    "model_digest": "train-digits: its model's digest after the run (every worker's must agree)",
    "fallback": "a NetReduce worker: how many reductions the switches and ring all-reduce gave (ring while the job's "
                "aggregation switch was lost), per iteration, and each agreed change of path with its times",
    "progress": "a node that left no result (its process killed): the iterations it said it had completed",
    "format": "the file's format: 1 (a file without it is read as 1; any other is refused in one line)",
}

ITERATION_ENTRY_DOCS: dict[str, str] = {
    "index": "the iteration's number, from 0",
    "start": "when it started (CLOCK_MONOTONIC on BMv2, simulated seconds on ns3)",
    "end": "when it ended",
    "time_s": "end - start",
    "correct": "its result held (meaningless where check is none)",
    "wrong_elements": "elements that differed from the exact sum",
    "max_abs_error": "the largest absolute error (null where unknown)",
    "saturated": "elements that saturated the switch's fixed-point encoding",
    "extra": "figure -> value (zero_filled_packets, relative_error; training: compute_s, comm_s, ...)",
    "check": "`exact`, `digest` or `none`: which check gave correct and the errors",
}

TRANSPORT_STATS_DOCS: dict[str, str] = {
    "tx_packets": "packets it sent",
    "tx_bytes": "IP bytes it sent",
    "rx_packets": "packets it received",
    "rx_bytes": "IP bytes it received",
    "drops": "packets it dropped, by reason",
    "requester": "its RoCE requesters' counters summed (retransmitted, timeouts, ...)",
    "responder": "its RoCE responders' counters summed (duplicates, ...)",
    "rtt": "peer -> srtt_ms and rto_ms",
}
