"""results.json: one experiment's results, its type, and the one place that writes and reads it.

Every results.json carries `format` (FORMAT: what a reader of this code understands) and `code_version`
(gradswitch.version.code_version(): the package's version and, from a checkout, `git describe`). Files
written before the format existed have neither: they read as format 0, whose fields are format 1's less
those two and `outcome`. Format 2 added `graph`: what a run of execution graphs given as traces (workload_et)
reports beyond the loop's figures (GraphFigures; such runs wrote a file of their own, graph-results.json, before).
The fields, their types and meanings are FIELD_DOCS below; docs/results.md is
generated from them (gradswitch/experiment/results_doc.py) and a test fails when the two differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict, cast

from gradswitch.protocol.choice import Choice

FORMAT = 2
# Payloads results.json carries as they come (the spec's fields, BMv2's counters, a link's usage, a node's extras):
# JSON objects whose keys are those of their own source, documented there, not figures of the run's.
Payload = dict[str, Any]

# 0: written before `format` existed (no format, code_version or outcome); 1: before `graph` (a trace run's section)
KNOWN_FORMATS = (0, 1, 2)
WRITTEN = frozenset({"format", "code_version"})  # what write() adds to every results.json


class ResultsFileError(ValueError):
    """A results.json this code cannot read (one line: the path, what is wrong, what to do)."""


class Outcome(Choice):
    """What became of a run: it ran and its results held, it ran and a result broke its check, or it could
    not run (a crash, a refused spec, a timeout, iterations missing)."""

    OK = "ok"
    CHECK_FAILED = "check_failed"  # every node ran; some result was wrong or beyond its error bound
    FAILED = "failed"  # a node crashed or timed out, the simulator stopped at its limit, iterations are missing


class Iteration(TypedDict, total=False):
    """One iteration of a job (results.json `iterations`): the slowest worker's time, and per figure the
    workers' combined value (packets summed, accuracy the worst worker's, anything else the largest)."""

    index: int
    time_s: float
    check: str
    start: float
    end: float
    correct: bool
    wrong_elements: int
    max_abs_error: float
    relative_error: float
    zero_filled_packets: float
    compute_s: float
    comm_s: float
    exposed_comm_s: float
    overlap: float
    accuracy: float
    loss: float
    train_s: float
    contributors: float  # k of N (or a deadline): the fewest workers a sum of the iteration held
    gradient_error: float  # k of N: the averaged gradient's relative error against the mean of all N workers'
    reported_by: int
    faults: list[str]


class Summary(TypedDict, total=False):
    """The job's figures over its iterations (results.json `summary`, and each of `jobs`)."""

    median_s: float | None
    p99_s: float | None
    mean_s: float | None
    algbw_mbps: float | None
    lower_bound_s: float | None
    ratio_to_bound: float | None
    iterations_done: int
    correct: bool  # only where a check ran
    # in `jobs` only:
    ok: bool
    outcome: str
    check: str
    jct_s: float | None


class HeadlineExtra(TypedDict, total=False):
    """Figures a compare takes as the run's headline besides the summary's (results.json `headline_extra`)."""

    avg_jct_s: float | None
    check: str
    final_accuracy: float
    target_accuracy: float
    iterations_to_accuracy: int | None
    time_to_accuracy_s: float | None
    zero_filled_packets: float
    max_relative_error: float
    busiest_link_load: float | None
    busiest_offered_load: float | None
    uplink_imbalance: float
    background_goodput_mbps: float | None
    max_abs_error: float
    dlcp_dropped: int
    cpu_idle: float | None
    machine_bound: bool | None
    machine_bound_reason: str | None
    wall_s: float
    events_per_s: float
    packet_hops_per_s: float
    peak_rss_mb: float


class Training(TypedDict, total=False):
    """A training run's figures (results.json `training`; null for an all-reduce run)."""

    emulate: Payload
    sync: str
    scheduling: str
    dilation: float
    warmup: int
    warmup_iteration_s: list[float]
    steady_iterations: int
    iteration_s: float | None
    iteration_p99_s: float
    compute_s: float | None
    comm_s: float
    exposed_comm_s: float | None
    overlap: float
    iteration_s_real: float
    iteration_p99_s_real: float
    samples_per_s_real: float | None
    single_gpu_iteration_s_real: float | None
    scaling_efficiency: float | None
    timeline_iteration: int
    ideal_iteration_s_real: float
    ideal_samples_per_s_real: float
    of_ideal: float | None
    ideal_link_load: float
    timeline: list[str]


class SimulatorFigures(TypedDict):
    """backend ns3: how fast the simulator ran (results.json `simulator`)."""

    wall_s: float
    sim_s: float
    events: int
    events_per_s: float
    packet_hops: int
    packet_hops_per_s: float
    peak_rss_mb: float
    ranks: int
    time_limit_hit: bool
    binary: str


class CollectiveFigures(TypedDict):
    """One collective of a trace run (results.json `graph.collectives`): the k-th of a process group, from its first
    member's start to its last member's end."""

    group: str
    index: int
    collective: str
    members: int
    nbytes: int
    start_s: float
    end_s: float
    time_s: float
    bound_s: float
    checked: bool | None
    algorithm: str


class TransferFigures(TypedDict):
    """One send and its receive of a trace run (results.json `graph.transfers`)."""

    src: int
    dst: int
    tag: int
    nbytes: int
    start_s: float
    end_s: float
    time_s: float
    bound_s: float
    checked: bool | None


class KindFigures(TypedDict):
    """Every collective of one type of a trace run, or every transfer (results.json `graph.by_kind`)."""

    kind: str
    count: int
    time_s: float
    bound_s: float
    worst_ratio: float


class GraphFigures(TypedDict):
    """A run of execution graphs given as traces (workload_et): what it reports beyond the loop's figures
    (results.json `graph`; gradswitch/experiment/graph_run.py GraphRunReport reads and writes it). Times are the
    emulated cluster's seconds from the go (the testbed's over the dilation; on ns-3 the simulated ones)."""

    graph: str
    hosts: list[str]
    bw_mbps: float
    dilation: float
    job_s: float
    checked: bool
    collectives: list[CollectiveFigures]
    transfers: list[TransferFigures]
    by_kind: list[KindFigures]
    exposed_s: dict[str, float]
    exposed_by_group_s: dict[str, float]
    busiest_link: str | None
    busiest_link_bytes: int | None
    busiest_link_load: float | None
    ideal_link_load: float | None
    link_drops: int | None
    resent_packets: int
    run: Payload


class ResultsBody(TypedDict):
    """What summarize computes (every field but format and code_version)."""

    name: str
    backend: str
    spec: Payload
    started: str
    step_bytes: int
    ok: bool
    outcome: str
    errors: dict[str, str]
    check: str
    iterations: list[Iteration]
    bytes_on_wire: int
    packets_on_wire: int
    retransmissions: int
    timeouts: int
    duplicates: int
    host_drops: dict[str, int]
    jct_s: float | None
    summary: Summary
    extra: dict[str, Payload]
    goodput_mbps: float | None
    jobs: dict[str, Summary]
    headline_extra: HeadlineExtra
    training: Training | None
    link_loads: dict[str, float]
    links: dict[str, Payload]
    switches: Payload
    bmv2: Payload | None


class Results(ResultsBody, total=False):
    """results.json as written (format and code_version are added on writing) and read."""

    format: int
    code_version: str
    tensorlights: Payload  # runs with TensorLights only
    simulator: SimulatorFigures  # backend ns3 only
    faults: list[Payload]  # runs with faults only: gradswitch.workload.fault_record.FaultRecord.to_dict() each
    fault_outcome: str  # runs with faults only: the worst of theirs (gradswitch.workload.fault_record.FaultOutcome)
    graph: GraphFigures  # trace runs (workload_et) only


FIELD_DOCS: dict[str, str] = {
    "format": f"this file's format ({FORMAT}); files without it are format 0 (written before it existed)",
    "code_version": "the code that wrote it: the package version, `+` and `git describe` where run from a checkout",
    "name": "the run's label (the spec's `name`, or one made of its parameters)",
    "backend": "`bmv2` (the testbed) or `ns3` (the simulator)",
    "spec": "the experiment spec the run ran, every field (`gradswitch experiment --help`, docs/specs.md)",
    "started": "when the jobs started (ISO 8601, UTC)",
    "step_bytes": "bytes one worker reduces per iteration; a trace run: the bytes rank 0's collectives and sends "
                  "carry",
    "ok": "every job complete, every node without error, and correct where a check ran",
    "outcome": "`ok`; `check_failed`: every node ran but a result was wrong or beyond its error bound; "
               "`failed`: the run could not run (a crash, a timeout, the simulator's time limit, iterations missing)",
    "errors": "node (\"worker 2 (h2)\") -> its error's message; the simulator's time limit as `simulator`",
    "check": "job 1's weakest check: `exact` (every element against the exact sum), `digest`, or `none`",
    "iterations": "job 1's iterations (see Iteration)",
    "bytes_on_wire": "bytes job 1's hosts sent, Ethernet headers included",
    "packets_on_wire": "packets job 1's hosts sent",
    "retransmissions": "packets job 1's requesters sent again",
    "timeouts": "retransmission timeouts of job 1's requesters",
    "duplicates": "packets job 1's responders already had",
    "host_drops": "packets job 1's hosts dropped, by reason",
    "jct_s": "job 1's completion time: its first iteration's start to its last one's end (seconds)",
    "summary": "job 1's figures (see Summary)",
    "extra": "node id -> what that node reported besides its iterations (e.g. `netreduce`, `plan`, `model_digest`)",
    "goodput_mbps": "job 1's algorithmic bandwidth (summary.algbw_mbps)",
    "jobs": "job id -> that job's Summary with its `ok`, `check` and `jct_s`",
    "headline_extra": "further figures a compare reports (see HeadlineExtra)",
    "training": "a training run's figures (see Training); null for an all-reduce",
    "link_loads": "switch-to-switch link direction (\"leaf1->spine2\") -> its load over the jobs",
    "links": "every shaped link direction -> kind, rate_mbps, seconds, sent_bytes, dropped_packets, load",
    "switches": "switch -> its counters over the jobs (drops by reason, [rx packets, tx packets, tx bytes] per port)",
    "bmv2": "the BMv2 build the switches ran (path, version, logging_macros); null on ns3",
    "tensorlights": "TensorLights' rotations and interval_s, where it ran",
    "simulator": "backend ns3: how fast the simulator ran (see SimulatorFigures)",
    "faults": "runs with faults (docs/faults.md): one per fault, as it was carried out: fault, label, injected_s, "
              "outcome (`recovered`, `interrupted`, `no-effect`), detected_s, recovered_s, time_to_detect_s, "
              "time_to_recover_s, iterations_lost, fallback, detail (seconds after the jobs' start); on ns-3 also "
              "throughput_it_s: iterations per second before, during (until recovered) and after",
    "fault_outcome": "runs with faults: the worst of their outcomes (`interrupted` over `recovered` over "
                     "`no-effect`); an interrupted run's errors name the fault first",
    "graph": "trace runs (workload_et) only: what the graphs' run reports beyond the loop's figures (see "
             "GraphFigures); such a run's `iterations` is one, the graphs' run, its time `graph.job_s`",
}

GRAPH_DOCS: dict[str, str] = {
    "graph": "the graphs' name",
    "hosts": "rank r ran on hosts[r] (parameter servers after the ranks)",
    "bw_mbps": "the links' rate on the testbed (Mb/s)",
    "dilation": "testbed seconds per emulated second (D; 1 on ns-3 but for a twin of a dilated run)",
    "job_s": "the job's time: its last node's end (seconds from the go)",
    "checked": "every collective's and receive's output exact on every rank",
    "collectives": "every collective, the k-th of each group (see CollectiveFigures)",
    "transfers": "every send matched with its receive (see TransferFigures)",
    "by_kind": "per collective type, and `send_recv` for the transfers (see KindFigures)",
    "exposed_s": "rank -> seconds it waited on the network with no computation running",
    "exposed_by_group_s": "process group -> the most any member waited on that group's collectives",
    "busiest_link": "the shaped link direction that carried the most bytes (null: none measured)",
    "busiest_link_bytes": "the bytes it carried",
    "busiest_link_load": "its load over the run",
    "ideal_link_load": "the busiest link's load in a run its links pace, where the flows' paths make it under 1 "
                       "(null: 1, a graph with computation, or ns-3)",
    "link_drops": "packets every shaped link's queue dropped (null: no link measured)",
    "resent_packets": "packets the ranks' transports sent again (loss, timeouts)",
    "run": "every node's timing (its own `format`, the ranks' timings'): `nodes`, each with rank, node_id, kind, "
           "start_s, end_s, collective, group, nbytes and checked (gradswitch/workload/graph_timing.py GraphRun)",
}

COLLECTIVE_DOCS: dict[str, str] = {
    "group": "its process group",
    "index": "which of the group's collectives (from 0)",
    "collective": "all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, ...",
    "members": "the group's ranks",
    "nbytes": "bytes each member gives it",
    "start_s": "its first member's start",
    "end_s": "its last member's end",
    "time_s": "end_s - start_s",
    "bound_s": "the link-rate bound of the algorithm that ran it (NetReduce all-reduce: S/B)",
    "checked": "every member's output exact (null: not checked)",
    "algorithm": "what ran it: `netreduce` (the switches), `ps`, or the hosts' ring, pairwise or chain",
}

TRANSFER_DOCS: dict[str, str] = {
    "src": "the sending rank",
    "dst": "the receiving rank",
    "tag": "the pair's tag",
    "nbytes": "bytes sent",
    "start_s": "the send's start",
    "end_s": "the later of the send's and the receive's ends",
    "time_s": "end_s - start_s",
    "bound_s": "its link-rate bound",
    "checked": "the receiver's check (null: not checked)",
}

KIND_DOCS: dict[str, str] = {
    "kind": "the collective type, or `send_recv`",
    "count": "how many ran",
    "time_s": "their times added up",
    "bound_s": "their bounds added up",
    "worst_ratio": "the worst time over bound",
}

ITERATION_DOCS: dict[str, str] = {
    "index": "the iteration's number, from 0",
    "time_s": "the slowest worker's time for it (seconds)",
    "check": "the weakest check the workers ran: `exact`, `digest` or `none`",
    "start": "the earliest worker's start (CLOCK_MONOTONIC on BMv2, simulated seconds on ns3)",
    "end": "the latest worker's end",
    "correct": "every worker's result held (where a check ran)",
    "wrong_elements": "elements that differed from the exact sum, over all workers",
    "max_abs_error": "the largest absolute error of any element (float32; left out where unknown)",
    "relative_error": "the largest relative error against the exact sum (DLCP's bound; where a check ran)",
    "zero_filled_packets": "packets lost and zero-filled in the sums (DLCP), over all workers",
    "compute_s": "training: the slowest worker's modelled computation",
    "comm_s": "training: its communication",
    "exposed_comm_s": "training: communication not hidden behind computation",
    "overlap": "training: the share of communication hidden behind computation",
    "accuracy": "train-digits: the worst worker's model's test accuracy",
    "loss": "train-digits: the largest minibatch loss",
    "train_s": "train-digits: the job's cumulative training time",
    "contributors": "k of N (or a deadline): the fewest workers a sum of the iteration held",
    "gradient_error": "k of N: the averaged gradient's relative error against the mean of all N workers'",
    "reported_by": "workers whose record of it the entry holds, where fewer than all (a worker killed after it "
                   "completed the iteration left none); left out otherwise",
    "faults": "the faults (their labels) whose target was out while it ran; left out where none",
}

SUMMARY_DOCS: dict[str, str] = {
    "median_s": "median iteration time (seconds)",
    "p99_s": "99th percentile iteration time",
    "mean_s": "mean iteration time",
    "algbw_mbps": "algorithmic bandwidth: step_bytes over the median iteration (Mb/s)",
    "lower_bound_s": "the link-rate lower bound of one iteration (null unshaped)",
    "ratio_to_bound": "median over the lower bound",
    "iterations_done": "iterations every worker finished",
    "correct": "every iteration correct (only where a check ran)",
    "ok": "`jobs` only: the job complete, without errors, and correct where checked",
    "outcome": "`jobs` only: the job's outcome (as results.json's)",
    "check": "`jobs` only: the job's weakest check",
    "jct_s": "`jobs` only: the job's completion time",
}

HEADLINE_EXTRA_DOCS: dict[str, str] = {
    "avg_jct_s": "mean completion time over the jobs",
    "check": "job 1's weakest check",
    "final_accuracy": "train-digits: the last iteration's accuracy",
    "target_accuracy": "train-digits: the accuracy the time to accuracy is measured to",
    "iterations_to_accuracy": "train-digits: iterations until the target was reached (null: never)",
    "time_to_accuracy_s": "train-digits: training time until then",
    "zero_filled_packets": "DLCP: packets zero-filled over the run",
    "max_relative_error": "the largest relative error of any iteration (where a check ran)",
    "busiest_link_load": "the busiest shaped link direction's load (about 1: the links limited the run)",
    "busiest_offered_load": "what the switches handed their busiest port over its rate",
    "uplink_imbalance": "busiest over mean uplink load (1: ECMP spread evenly)",
    "background_goodput_mbps": "bulk TCP's goodput during the jobs",
    "max_abs_error": "float32: the largest absolute error of any element",
    "dlcp_dropped": "DLCP: packets the switches dropped by design",
    "cpu_idle": "the machine's idle CPU share during the jobs (null on ns3)",
    "machine_bound": "the machine, not the links, limited the run (left out of a compare's medians)",
    "machine_bound_reason": "why it was judged machine-bound",
    "wall_s": "wall-clock seconds of the jobs (bmv2) or of the simulation (ns3)",
    "events_per_s": "ns3: simulator events per wall second",
    "packet_hops_per_s": "ns3: packet hops per wall second",
    "peak_rss_mb": "ns3: the simulator's peak memory",
}

TRAINING_DOCS: dict[str, str] = {
    "emulate": "the emulated cluster (device, precision, batch, link_gbps, ...)",
    "sync": "synchronous or asynchronous",
    "scheduling": "how gradients are scheduled onto the network",
    "dilation": "testbed seconds per real second (D)",
    "warmup": "iterations left out of the figures",
    "warmup_iteration_s": "their times",
    "steady_iterations": "iterations in the figures",
    "iteration_s": "median steady-state iteration (testbed seconds)",
    "iteration_p99_s": "its 99th percentile",
    "compute_s": "median computation per iteration",
    "comm_s": "median communication per iteration",
    "exposed_comm_s": "median communication not hidden behind computation",
    "overlap": "median share of communication hidden",
    "iteration_s_real": "iteration_s over the dilation: the real cluster's",
    "iteration_p99_s_real": "its 99th percentile",
    "samples_per_s_real": "the real cluster's training throughput",
    "single_gpu_iteration_s_real": "one GPU's modelled iteration",
    "scaling_efficiency": "throughput over workers times one GPU's",
    "timeline_iteration": "the median steady iteration, drawn in timeline.png",
    "ideal_iteration_s_real": "the iteration with every reduction at its link-rate bound",
    "ideal_samples_per_s_real": "the ideal's throughput",
    "of_ideal": "this run's share of the ideal (1: the testbed added nothing)",
    "ideal_link_load": "the ideal's busiest link load",
    "timeline": "the timeline files written",
}

SIMULATOR_DOCS: dict[str, str] = {
    "wall_s": "wall-clock seconds the simulator ran",
    "sim_s": "simulated seconds",
    "events": "events it handled",
    "events_per_s": "events per wall second",
    "packet_hops": "packets forwarded over a link",
    "packet_hops_per_s": "packet hops per wall second",
    "peak_rss_mb": "its peak memory (MB; the largest rank's over MPI)",
    "ranks": "MPI ranks it ran on",
    "time_limit_hit": "it stopped at its simulated time limit (the run failed)",
    "binary": "the gradswitch-sim that ran",
}

DOCUMENTED: tuple[tuple[str, type, dict[str, str]], ...] = (
    ("results.json", Results, FIELD_DOCS),
    ("Iteration", Iteration, ITERATION_DOCS),
    ("Summary", Summary, SUMMARY_DOCS),
    ("HeadlineExtra", HeadlineExtra, HEADLINE_EXTRA_DOCS),
    ("Training", Training, TRAINING_DOCS),
    ("SimulatorFigures", SimulatorFigures, SIMULATOR_DOCS),
    ("GraphFigures", GraphFigures, GRAPH_DOCS),
    ("CollectiveFigures", CollectiveFigures, COLLECTIVE_DOCS),
    ("TransferFigures", TransferFigures, TRANSFER_DOCS),
    ("KindFigures", KindFigures, KIND_DOCS),
)


def format_of(raw: dict[str, object], where: Path | str) -> int:
    """The file's format (0 without one); ResultsFileError for one this code does not know."""
    fmt = raw.get("format", 0)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt not in KNOWN_FORMATS:
        raise ResultsFileError(f"{where}: format = {fmt!r}: this gradswitch reads results.json formats "
                               f"{', '.join(map(str, KNOWN_FORMATS))}; read it with the gradswitch that wrote it "
                               f"(its code_version: {raw.get('code_version', 'unknown')}) or run it again")
    return fmt


def with_version(body: Results) -> Results:
    """The results with this file's format and the code's version first."""
    from gradswitch.version import code_version

    out = cast(Results, {"format": FORMAT, "code_version": code_version()})
    out.update({k: v for k, v in body.items() if k not in ("format", "code_version")})  # type: ignore[typeddict-item]
    return out


def dumps(results: Results) -> str:
    return json.dumps(with_version(results), indent=1)


def write(path: Path, results: Results) -> Results:
    """Write results.json (format and code_version set); returns what was written."""
    out = with_version(results)
    path.write_text(json.dumps(out, indent=1))
    return out


def parse(raw: object, where: Path | str = "results.json") -> Results:
    """A results.json's content, its format checked (format 0: given `outcome` from `ok`)."""
    if not isinstance(raw, dict) or "summary" not in raw or "name" not in raw:
        raise ResultsFileError(f"{where}: not a results.json (a JSON object with name, summary, iterations, ...)")
    fmt = format_of(raw, where)
    if fmt == 0 and "outcome" not in raw:
        summary = raw["summary"]
        broke = isinstance(summary, dict) and summary.get("correct") is False
        outcome = Outcome.OK if raw.get("ok") else Outcome.CHECK_FAILED if broke else Outcome.FAILED
        raw = {**raw, "outcome": str(outcome)}
    return cast(Results, raw)


def read_json(path: Path, error: type[ValueError]) -> Any:
    """A JSON file's value; `error` (one line naming the file) when it is missing or not JSON."""
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise error(f"{path}: cannot read it ({e.strerror})") from None
    except ValueError as e:
        raise error(f"{path}: not JSON ({e})") from None


def read(path: Path) -> Results:
    """Read a results.json; ResultsFileError (one line) when it is missing, not JSON or of an unknown format."""
    return parse(read_json(path, ResultsFileError), path)
