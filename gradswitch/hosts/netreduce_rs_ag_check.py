"""A host process that runs NetReduce reduce-scatters or all-gathers through the switches and checks every output.

    python -m gradswitch.hosts.netreduce_rs_ag_check JOB_CONFIG RUN_DIR NODE_ID

JOB_CONFIG is a NetReduce job (gradswitch.workload.job.JobConfig: its workers, credits, transport, RTO); it runs
`iterations` operations, each rank's input `size_bytes` (reduce-scatter: the whole buffer; all-gather: the
rank's own shard), of the collective named in the file beside it, JOB_CONFIG's stem + ".collective"
("reduce-scatter", "all-gather", or "all-gather-placeholders": the other ranks' messages as placeholders,
gradswitch/hosts/netreduce_gather.py). Inputs are gradswitch.hosts.collectives.data.input_of (every rank computes every
rank's, so each checks its own output element by element against gradswitch.hosts.collectives.data.expected). The
runner protocol is gradswitch.hosts.main's (ready, go, progress, done, linger, result-<id>.json), so
gradswitch.experiment.supervisor.run_nodes runs it (module="gradswitch.hosts.netreduce_rs_ag_check"); the switches must
hold the job, placed with scatter or gather (gradswitch.control.netreduce_jobs).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gradswitch.hosts.collectives.data import expected, input_of, wrong_elements
from gradswitch.hosts.comm import Comm
from gradswitch.hosts.main import failed, linger, ready_then_go
from gradswitch.hosts.netreduce import NetReduceWorker
from gradswitch.hosts.netreduce_gather import all_gather_op
from gradswitch.hosts.netreduce_scatter import reduce_scatter_op
from gradswitch.hosts.whole_file import write_progress
from gradswitch.roce.engine import Engine, RawSocketLink
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.job import JobConfig
from gradswitch.workload.records import CheckKind
from gradswitch.workload.worker_result import IterationEntry, worker_result, write

# name -> the collective, and whether an all-gather sends the other ranks' messages as placeholders
KINDS = {"reduce-scatter": (CollectiveKind.REDUCE_SCATTER, False), "all-gather": (CollectiveKind.ALL_GATHER, False),
         "all-gather-placeholders": (CollectiveKind.ALL_GATHER, True)}


def collective_of(config: Path) -> tuple[CollectiveKind, bool]:
    """The collective named beside the job file, and whether an all-gather sends placeholders (one line:
    ValueError naming the file and what is allowed)."""
    path = config.with_suffix(".collective")
    try:
        name = path.read_text().strip()
    except OSError as e:
        raise ValueError(f"{path}: cannot read the collective to run ({e}); write one of {sorted(KINDS)}") from None
    if name not in KINDS:
        raise ValueError(f"{path}: collective {name!r} is not one of {sorted(KINDS)}")
    return KINDS[name]


def run(config: Path, run_dir: Path, node_id: int) -> bool:
    cfg = JobConfig.load(config)
    me = cfg.node(node_id)
    engine = Engine(RawSocketLink(me.ifname, me.ip, job=cfg.job_id), me.ip)
    comm = Comm(cfg, me, engine)
    comm.abort_file = run_dir / "abort"
    entries: list[IterationEntry] = []
    error: str | None = None
    trace: str | None = None
    ok = False
    try:
        kind, placeholders = collective_of(config)
        worker = NetReduceWorker(comm, scatter=kind == CollectiveKind.REDUCE_SCATTER,
                                 gather=kind == CollectiveKind.ALL_GATHER)
        engine.resolve_peers(cfg.start_timeout / 3)
        ready_then_go(cfg, run_dir, node_id)
        elements = max(1, cfg.size_bytes // 4)
        ranks = len(cfg.workers)
        for it in range(cfg.iterations):
            op = f"netreduce/{kind.value}/{it}"
            inputs = [input_of(cfg.seed, op, r, elements) for r in range(ranks)]
            start = time.time()
            gen = (reduce_scatter_op(worker, inputs[worker.rank]) if kind == CollectiveKind.REDUCE_SCATTER
                   else all_gather_op(worker, inputs[worker.rank], placeholders))
            out = comm.drive(gen, f"{kind.value} {it}")
            end = time.time()
            wrong = wrong_elements(out, expected(kind, inputs, worker.rank))
            entries.append({"index": it, "start": start, "end": end, "time_s": end - start, "correct": wrong == 0,
                            "wrong_elements": wrong, "max_abs_error": None, "saturated": 0, "extra": {},
                            "check": str(CheckKind.EXACT)})
            write_progress(run_dir, node_id, it + 1)
        comm.drain()
        ok = all(e["correct"] for e in entries)
        if not ok:
            error = f"rank {worker.rank}: wrong {kind.value} output"
        linger(cfg, engine, run_dir, node_id)
    except Exception as e:  # reported to the runner, which names the node
        error, trace = failed(run_dir, f"{me.role} {node_id} on {me.host}", e)
    finally:
        stats = comm.stats()
        engine.close()
    write(run_dir, worker_result(node_id, me.host, str(me.role), ok, entries, stats, None, error, trace,
                                 check_failed=bool(entries) and not ok))
    return ok


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m gradswitch.hosts.netreduce_rs_ag_check JOB_CONFIG RUN_DIR NODE_ID", file=sys.stderr)
        return 2
    return 0 if run(Path(args[0]), Path(args[1]), int(args[2])) else 1


if __name__ == "__main__":
    sys.exit(main())
