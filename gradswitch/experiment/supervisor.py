"""Running a run's worker and server processes in their Mininet hosts, and collecting their results.

Each node is `python -m gradswitch.hosts.main JOB_CONFIG RUN_DIR NODE_ID` in its host. They say they are
ready (RUN_DIR/ready-<id>), start together on the runner's go (RUN_DIR/go), report progress
after every iteration, say when their work is done (RUN_DIR/done-<id>: they linger after it for
peers' retransmissions) and write RUN_DIR/result-<id>.json. A node that dies stops the rest of
its job at once (RUN_DIR/abort), and the whole run has a deadline: nothing waits forever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gradswitch.experiment.spec import ExperimentError
from gradswitch.hosts.whole_file import progress_path
from gradswitch.net.network import GradNetwork
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.protocol.polling import wait_until
from gradswitch.workload import worker_result
from gradswitch.workload.job import JobConfig, job_dir, job_file
from gradswitch.workload.worker_result import WorkerResult as NodeResult

DONE_POLL_S = 0.05  # how often the runner looks at the nodes' progress and done files
WORKER_NICE = 10  # workers yield to the BMv2 switches on a small machine (docs/performance.md)



class Progress:
    """A one-line progress bar on stderr (only on a terminal, or when forced)."""

    def __init__(self, total: int, label: str, enabled: bool | None = None) -> None:
        self.total = max(1, total)
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = time.monotonic()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * min(done, self.total) / self.total)
        elapsed = time.monotonic() - self.start
        sys.stderr.write(f"\r{self.label}: [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
                         f"iterations, {elapsed:.1f} s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def exit_words(status: int) -> str:
    """How a node's process ended, for a person: `exited with status 3`, `was killed (SIGKILL)`."""
    if status < 0:
        try:
            return f"was killed ({signal.Signals(-status).name})"
        except ValueError:
            return f"was killed (signal {-status})"
    return f"exited with status {status}"


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


NodeKey = tuple[int, int]  # (job, node id)
Processes = dict[NodeKey, "subprocess.Popen[bytes]"]


def stop_deadline_s(cfgs: list[JobConfig]) -> float:
    """How long the other nodes of a job may take to stop once one of them died (the runner's abort): a node
    blocked on the dead one gives up when its QP has retried to its limit (give_up_s of the jobs' first
    timeout and retry limit), and looks at the abort file every ABORT_CHECK_S anyway; and a second for the
    process to write its result and exit."""
    from gradswitch.experiment.fault_schedule import give_up_s

    return max(give_up_s(c.rto, c.retry_limit) for c in cfgs) + ABORT_CHECK_S + 1.0


ABORT_CHECK_S = 0.2  # gradswitch.hosts.comm.Comm: how often a node looks at the abort file (a test keeps the two equal)


def run_nodes(net: GradNetwork, cfgs: list[JobConfig], config_dir: Path, run_dir: Path, bar: Progress,
              on_go: Callable[[], None] = lambda: None,
              on_done: Callable[[], None] = lambda: None, module: str = "gradswitch.hosts.main",
              on_started: Callable[[Processes], None] = lambda procs: None,
              on_exit: Callable[[NodeKey, int, float], None] = lambda key, status, at: None,
              ) -> dict[int, dict[int, NodeResult]]:
    """Start every node of every job (their configs are config_dir/job<N>.json), release them
    together (on_go just before), wait; results per job and node. on_done: once every node of every
    job has done its work (within a poll, DONE_POLL_S, of the last), or else when they have all
    exited: the end of the jobs' window, before the nodes linger and exit. `module`: what each node runs,
    `python -m MODULE JOB_FILE RUN_DIR NODE_ID` (gradswitch.hosts.graph_main for an execution-graph run). on_started:
    every node's process, once all are started (a fault schedule kills one); on_exit: a node's process seen
    gone with a failure status (its key, status, time.monotonic()). Once a node died, the rest of its job is
    told at once (RUN_DIR/abort) and must be gone within stop_deadline_s, or they are killed and named."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    procs: Processes = {}
    late: dict[NodeKey, str] = {}  # nodes killed because they did not stop after their job's abort: why
    logs: dict[tuple[int, int], Path] = {}
    dirs = {cfg.job_id: job_dir(run_dir, cfg.job_id) for cfg in cfgs}
    by_job = {cfg.job_id: cfg for cfg in cfgs}
    try:
        for cfg in cfgs:
            jd = dirs[cfg.job_id]
            jd.mkdir()
            for node in cfg.nodes:
                key = (cfg.job_id, node.node_id)
                logs[key] = jd / f"{node.host}-{node.node_id}.log"
                with logs[key].open("wb") as log:
                    # Workers run niced: on a small machine the BMv2 switches must not be starved by the
                    # emulated hosts, or they drop packets at their inputs.
                    procs[key] = net.host(node.host).popen(
                        ["nice", "-n", str(WORKER_NICE), sys.executable, "-m", module,
                         str(job_file(config_dir, cfg.job_id)), str(jd), str(node.node_id)],
                        stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO_ROOT), env=env)

        def ready() -> bool:
            for (job, nid), p in procs.items():
                if p.poll() is not None:
                    node = by_job[job].node(nid)
                    raise ExperimentError(f"job {job}: {node.role} {nid} on {node.host} exited before starting "
                                          f"(status {p.returncode}):\n{log_tail(logs[(job, nid)])}")
            return all((dirs[job] / f"ready-{nid}").exists() for job, nid in procs)

        on_started(procs)
        start_timeout = max(c.start_timeout for c in cfgs)
        wait_until(ready, start_timeout, interval=0.05, what="every worker to be ready")
        on_go()
        stamp = str(time.monotonic())
        for jd in dirs.values():
            (jd / "go").write_text(stamp)
        first = cfgs[0]
        deadline = first.iterations * first.iteration_timeout + start_timeout + first.linger_timeout
        ended = False
        stop_within = stop_deadline_s(cfgs)
        aborted_at: dict[int, float] = {}  # job -> when its abort was written (time.monotonic())
        seen: set[NodeKey] = set()

        # The paths finished() looks at, as strings, made once: it runs every DONE_POLL_S on the machine the
        # measured runs share (pathlib objects built each time cost several % of a core).
        done_files = [str(dirs[job] / f"done-{nid}") for job, nid in procs]
        progress_files = [str(progress_path(dirs[first.job_id], w.node_id)) for w in first.workers]
        abort_files = {job: str(jd / "abort") for job, jd in dirs.items()}

        def progress_of(path: str) -> int | None:
            try:
                with open(path, "rb", buffering=0) as f:
                    return int(f.read() or 0)
            except FileNotFoundError:
                return None

        def finished() -> bool:
            nonlocal ended
            if not ended and all(os.path.exists(f) for f in done_files):
                ended = True
                on_done()
            done = [n for f in progress_files if (n := progress_of(f)) is not None]
            bar.update(min(done) if len(done) == len(first.workers) else 0)
            now = time.monotonic()
            for (job, nid), p in procs.items():
                abort = abort_files[job]
                status = p.poll()
                if status not in (None, 0) and (job, nid) not in seen:
                    seen.add((job, nid))
                    on_exit((job, nid), int(status or 0), now)
                if status not in (None, 0) and not os.path.exists(abort):
                    node = by_job[job].node(nid)
                    # A node that died (or failed) stops the rest of its job now, not at their timeouts.
                    Path(abort).write_text(f"{node.role} {nid} on {node.host} {exit_words(int(status or 0))}")
                if os.path.exists(abort):
                    aborted_at.setdefault(job, now)
            for job, at in aborted_at.items():
                if now - at <= stop_within:
                    continue
                # A node that said done lingers for its peers, bounded by linger_timeout; the others are late.
                for (j, n), p in procs.items():
                    if j == job and p.poll() is None and not (dirs[j] / f"done-{n}").exists():
                        p.kill()
                        late[(j, n)] = (f"still running {stop_within:.1f} s after the job was aborted "
                                        f"({(dirs[j] / 'abort').read_text().strip()}): killed")
            return all(p.poll() is not None for p in procs.values())

        try:
            wait_until(finished, deadline, interval=DONE_POLL_S, what="the jobs to finish")
            if not ended:  # some node never said done (it failed): the window ends with the processes
                on_done()
        except TimeoutError as e:
            running = [f"job {j} {by_job[j].node(n).host}" for (j, n), p in procs.items() if p.poll() is None]
            raise ExperimentError(f"{e}; still running: {running}") from None
        finally:
            bar.close()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    results: dict[int, dict[int, NodeResult]] = {cfg.job_id: {} for cfg in cfgs}
    for (job, nid), proc in procs.items():
        if worker_result.path_of(dirs[job], nid).exists():
            results[job][nid] = worker_result.read(dirs[job], nid)
        else:
            node = by_job[job].node(nid)
            code = proc.returncode or 0
            why = late.get((job, nid)) or f"no result (exit status {code}): it {exit_words(code)}"
            # What it said it completed before it went (its progress file): kept, as the iterations its peers hold.
            progress = progress_path(dirs[job], nid)  # written whole (whole_file.py): never empty
            done = int(progress.read_text()) if progress.exists() else 0
            results[job][nid] = worker_result.worker_result(
                nid, node.host, str(node.role), False, [], extra={"progress": done},
                error=f"{why}\n{log_tail(logs[(job, nid)])}")
    return results
