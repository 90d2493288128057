"""Entry point of a rank of a graph run: `python -m workers.graph_main JOB RUN_DIR RANK`.

The same life as workers/main.py's nodes (ready, the runner's go, done, lingering, result-<rank>.json,
the abort file), running the rank's execution graph (workers/graph_engine.py) instead of iterations.
Every memory region and queue pair the rank's operations use exists before it says ready, so a fast
peer's first write never finds a region missing. After the graph, every communication node's output is
compared, element by element, with what its operation defines (workers/collectives/data.py), and the
rank writes its node timings, in seconds of the emulated cluster from the go, to graph-<rank>.json.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from pathlib import Path

from protocol.polling import wait_until
from roce.engine import Engine, Link, RawSocketLink
from roce.qp import MemoryRegion
from workers.collectives.data import wrong_elements
from workers.collectives.executor import execute
from workers.collectives.ops import Op, ops_of
from workers.comm import Comm
from workers.graph_engine import GraphScheduler, OpRun, Span
from workers.graph_job import GraphJob, write_timing
from workers.main import linger
from workload.gradients import Int32Array
from workload.graph import CollectiveNode, Node, node_kind
from workload.graph_timing import GraphRun, NodeTiming
from workload.worker_result import WorkerResult, worker_result, write


class HostRuntime:
    """The scheduler's runtime on a host: the monotonic clock, the transport, the rank's operations, and
    the checks of their outputs (`wrong`: per node checked, its wrong elements out of its length)."""

    def __init__(self, comm: Comm, ops: dict[int, Op], regions: dict[int, MemoryRegion], seed: int) -> None:
        self.comm, self.ops, self.regions, self.seed = comm, ops, regions, seed
        self.pending: list[tuple[int, Int32Array]] = []
        self.wrong: dict[int, tuple[int, int]] = {}

    def now(self) -> float:
        return time.monotonic()

    def wait(self, max_wait: float, what: str) -> None:
        self.comm.step(max_wait, what)

    def start(self, node: Node) -> OpRun:
        op = self.ops[node.id]
        return execute(self.comm, op, self.regions[node.id], op.input(self.seed))

    def finish(self, node: Node, output: Int32Array) -> None:
        self.pending.append((node.id, output))

    def background(self) -> bool:
        """Check one finished operation's output against its definition, every element."""
        if not self.pending:
            return False
        nid, output = self.pending.pop(0)
        self.wrong[nid] = (wrong_elements(output, self.ops[nid].expected(self.seed)), len(output))
        return True


def prepare(comm: Comm, ops: dict[int, Op]) -> dict[int, MemoryRegion]:
    """Every operation's region and every queue pair it uses, before the first packet."""
    regions = {nid: comm.register(op.rkey, op.region_bytes()) for nid, op in ops.items()}
    for op in ops.values():
        for p in op.schedule().peers():
            comm.qp(op.members[p])
    return regions


def timings(job: GraphJob, rank: int, spans: dict[int, Span], runtime: HostRuntime, t0: float
            ) -> tuple[list[NodeTiming], list[str]]:
    """Every node's timing in emulated seconds from t0, each communication node checked (the checks
    left are done now); and what was wrong (one line per node whose output differs from its definition)."""
    while runtime.background():
        pass
    d = job.dilation
    out, wrong = [], []
    for n in job.graph.ranks[rank].nodes:
        s = spans[n.id]
        checked: bool | None = None
        if n.id in runtime.wrong and runtime.ops[n.id].kind != "send":  # a send has no output: its receiver checks
            bad, length = runtime.wrong[n.id]
            checked = bad == 0
            if bad:
                wrong.append(f"rank {rank} node {n.id} ({n.name}, {runtime.ops[n.id].key}): {bad} of {length} "
                             f"elements wrong")
        coll = n if isinstance(n, CollectiveNode) else None
        out.append(NodeTiming(rank, n.id, node_kind(n), (s.start - t0) / d, (s.end - t0) / d,
                              coll.collective if coll else None, coll.group if coll else None,
                              getattr(n, "nbytes", 0), checked))
    return out, wrong


def run_rank(job: GraphJob, rank: int, run_dir: Path, link: Link | None = None) -> WorkerResult:
    cfg = job.job
    me = cfg.node(rank)
    engine = Engine(link if link is not None else RawSocketLink(me.ifname, me.ip, job=cfg.job_id), me.ip)
    comm = Comm(cfg, me, engine)
    comm.abort_file = run_dir / "abort"
    ok, check_failed = False, False
    error: str | None = None
    trace: str | None = None
    try:
        ops = ops_of(job.graph, rank)
        regions = prepare(comm, ops)
        engine.resolve_peers(cfg.start_timeout / 3)
        (run_dir / f"ready-{rank}").write_text(str(time.monotonic()))
        go = run_dir / "go"
        wait_until(go.exists, cfg.start_timeout, interval=0.02, what="the runner's go")
        t0 = time.monotonic()
        with contextlib.suppress(ValueError):  # the runner's stamp: one clock for every rank of the machine
            t0 = min(t0, float(go.read_text()))
        runtime = HostRuntime(comm, ops, regions, cfg.seed)
        spans = GraphScheduler(job.graph.ranks[rank], runtime, job.dilation, cfg.iteration_timeout).run()
        nodes, wrong = timings(job, rank, spans, runtime, t0)
        write_timing(run_dir, rank, GraphRun(tuple(nodes)))
        if wrong:
            error, check_failed = f"{me.host}: " + "; ".join(wrong), True
        else:
            ok = True
        linger(cfg, engine, run_dir, rank)
    except Exception as e:  # reported to the runner, which names the rank
        error = f"{type(e).__name__}: {e}"
        trace = traceback.format_exc()
        if not (run_dir / "abort").exists():
            (run_dir / "abort").write_text(f"rank {rank} on {me.host} failed: {error}")
    finally:
        stats = comm.stats()
        engine.close()
    result = worker_result(rank, me.host, str(me.role), ok, [], stats, None, error, trace, check_failed)
    write(run_dir, result)
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m workers.graph_main JOB RUN_DIR RANK", file=sys.stderr)
        return 2
    result = run_rank(GraphJob.load(Path(args[0])), int(args[2]), Path(args[1]))
    if not result["ok"]:
        print(result.get("error", "failed"), file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
