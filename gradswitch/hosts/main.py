"""Entry point of a worker or server process: `python -m gradswitch.hosts.main CONFIG RUN_DIR NODE_ID`.

The process opens its RoCE engine, resolves its peers' addresses (gradswitch/roce/resolve.py), says it
is ready (RUN_DIR/ready-<id>), waits for the runner's go (RUN_DIR/go, polled with a
deadline), runs the job, reports progress after every iteration (RUN_DIR/progress-<id>) and
writes RUN_DIR/result-<id>.json: the iteration records, the transport's counters, and the
error if it failed. It never waits forever: every wait has the job's deadline and a dead
peer fails the QP after its retries.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from gradswitch.hosts.comm import Comm
from gradswitch.hosts.digits_job import TrainLoop
from gradswitch.hosts.iteration import TrainingLoop
from gradswitch.hosts.loops import Loop, WorkerLoop
from gradswitch.hosts.whole_file import write_progress
from gradswitch.protocol.polling import wait_until
from gradswitch.roce.engine import Engine, Link, RawSocketLink
from gradswitch.roce.qp import TransportError
from gradswitch.workload.job import Algorithm, JobConfig, Role
from gradswitch.workload.records import IterationRecord, WrongResult
from gradswitch.workload.worker_result import WorkerResult, iteration_entry, worker_result, write

RunFn = Callable[[Callable[[int], None]], tuple[list[IterationRecord], dict[str, object]]]


def make_algorithm(comm: Comm) -> tuple[RunFn, Loop | None]:
    """The function that runs this node's part of the job, and its iteration loop (None: a server's)."""
    cfg, me = comm.cfg, comm.me
    if cfg.algo == Algorithm.RING:
        from gradswitch.hosts.ring import Ring

        ring = Ring(comm)
        return (lambda progress: (ring.loop.run(progress), ring.loop.extra())), ring.loop
    if cfg.algo == Algorithm.PS:
        from gradswitch.hosts.ps import PsServer, PsWorker

        if me.role == Role.SERVER:
            server = PsServer(comm)
            return (lambda progress: ([], {"keys_served": server.serve()})), None
        worker = PsWorker(comm)
        return (lambda progress: (worker.loop.run(progress), worker.loop.extra())), worker.loop
    if cfg.algo == Algorithm.NETREDUCE:
        from gradswitch.hosts.netreduce import NetReduceWorker

        nr = NetReduceWorker(comm)
        return (lambda progress: (nr.loop.run(progress), {**nr.report(), **nr.loop.extra()})), nr.loop
    raise ValueError(f"unknown algorithm {cfg.algo}")


def completed(loop: Loop | None) -> list[IterationRecord]:
    """The iterations a loop completed before its run failed (a peer died, the job was aborted): kept in the
    node's result."""
    return list(loop.records) if isinstance(loop, WorkerLoop | TrainLoop | TrainingLoop) else []


def linger(cfg: JobConfig, engine: Engine, run_dir: Path, node_id: int) -> None:
    """Keep answering until every node is done: a peer whose last ACK from us was lost
    retransmits, and must find us there. Bounded: a dead peer never says done."""
    (run_dir / f"done-{node_id}").write_text(str(time.monotonic()))
    everyone = [run_dir / f"done-{n.node_id}" for n in cfg.nodes]
    # Our own work is complete; a peer that is gone is reported by its own result.
    with contextlib.suppress(TimeoutError, TransportError):
        engine.run_until(lambda: all(p.exists() for p in everyone), cfg.linger_timeout, "the other nodes to finish")


def ready_then_go(cfg: JobConfig, run_dir: Path, node_id: int) -> Path:
    """Say this node is ready (RUN_DIR/ready-<id>) and wait for the runner's go; the go file (it holds the runner's
    stamp)."""
    (run_dir / f"ready-{node_id}").write_text(str(time.monotonic()))
    go = run_dir / "go"
    wait_until(go.exists, cfg.start_timeout, interval=0.02, what="the runner's go")
    return go


def failed(run_dir: Path, who: str, e: Exception) -> tuple[str, str]:
    """A node's failure: its error line and traceback; the abort file, if no node wrote one yet, tells the others at
    once (the runner also does on a crash), naming `who`."""
    error = f"{type(e).__name__}: {e}"
    if not (run_dir / "abort").exists():
        (run_dir / "abort").write_text(f"{who} failed: {error}")
    return error, traceback.format_exc()


def run_node(cfg: JobConfig, node_id: int, run_dir: Path, link: Link | None = None) -> WorkerResult:
    me = cfg.node(node_id)
    engine = Engine(link if link is not None else RawSocketLink(me.ifname, me.ip, job=cfg.job_id), me.ip)
    comm = Comm(cfg, me, engine)
    comm.abort_file = run_dir / "abort"
    records: list[IterationRecord] = []
    extra: dict[str, object] = {}
    ok, check_failed = False, False
    loop: Loop | None = None
    error: str | None = None
    trace: str | None = None
    try:
        run, loop = make_algorithm(comm)
        # Every peer's address is known before the first packet (a window to an unresolved peer
        # leaves out of order: gradswitch/roce/resolve.py); a third of the start time, so the runner hears why.
        engine.resolve_peers(cfg.start_timeout / 3)
        ready_then_go(cfg, run_dir, node_id)

        def progress(iteration: int) -> None:
            write_progress(run_dir, node_id, iteration + 1)

        records, extra = run(progress)
        ok = True
        linger(cfg, engine, run_dir, node_id)
    except WrongResult as e:
        records = e.records
        error, check_failed = str(e), True
    except Exception as e:  # reported to the runner, which names the node
        error, trace = failed(run_dir, f"{me.role} {node_id} on {me.host}", e)
        records = completed(loop)
    finally:
        stats = comm.stats()
        engine.close()
    result = worker_result(node_id, me.host, str(me.role), ok, [iteration_entry(r) for r in records], stats, extra,
                           error, trace, check_failed)
    write(run_dir, result)
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m gradswitch.hosts.main CONFIG RUN_DIR NODE_ID", file=sys.stderr)
        return 2
    cfg = JobConfig.load(Path(args[0]))
    result = run_node(cfg, int(args[2]), Path(args[1]))
    if not result["ok"]:
        print(result.get("error", "failed"), file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
