"""Turning worker results into results.json, a one-screen table and a CSV (plots: plots.py)."""

from __future__ import annotations

import csv
import datetime as dt
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import numpy as np

from gradswitch.experiment.placement import modelled_compute_s
from gradswitch.experiment.plots import plot_iterations
from gradswitch.experiment.results_file import Outcome, Results
from gradswitch.experiment.spec import ExperimentSpec, spec_dict, step_bytes
from gradswitch.hosts.ideal import ideal
from gradswitch.roce.wire import ETH_HEADER_LEN
from gradswitch.workload.fault_record import FaultOutcome, FaultRecord
from gradswitch.workload.job import Algorithm, DType, JobConfig
from gradswitch.workload.plan import allreduce_bound_s
from gradswitch.workload.worker_result import IterationEntry, WorkerResult


def lower_bound_s(algo: Algorithm, workers: int, servers: int, nbytes: int, bw_mbps: float | None) -> float | None:
    """Link-rate lower bound of one all-reduce of nbytes (docs/architecture.md, "Link-rate bounds";
    gradswitch.workload.plan.allreduce_bound_s)."""
    if not bw_mbps:
        return None
    return allreduce_bound_s(algo, workers, servers, nbytes, bw_mbps * 1e6 / 8)


def training_summary(spec: ExperimentSpec, iterations: list[dict[str, Any]], cfg: JobConfig | None = None
                     ) -> dict[str, Any] | None:
    """results.json's `training` object: steady-state iteration time and its parts (testbed seconds),
    the dilation, real-equivalent time and samples/s, scaling efficiency against one GPU's modelled
    iteration, and (given the job's configuration) the ideal: the same iteration with every
    reduction at its link-rate bound (gradswitch/hosts/ideal.py). Per iteration the job's figure is its
    slowest worker's."""
    if spec.workload.emulate is None or spec.dilation is None:
        return None
    d = spec.dilation
    steady = [it for it in iterations if it["index"] >= spec.measurement.warmup]
    if not steady:
        return {"dilation": d, "warmup": spec.measurement.warmup, "steady_iterations": 0, "iteration_s": None,
                "compute_s": None, "exposed_comm_s": None, "samples_per_s_real": None}

    def med(key: str) -> float:
        return float(np.median([it[key] for it in steady]))

    times = np.array([it["time_s"] for it in steady])
    iteration = float(np.median(times))
    real = iteration / d
    e = spec.workload.emulate
    samples = spec.network.workers * e.batch / real if real > 0 else None
    one_gpu = modelled_compute_s(spec)
    single = e.batch / one_gpu if one_gpu > 0 else None
    return {
        "emulate": asdict(e), "sync": str(spec.algorithm.sync), "scheduling": str(spec.algorithm.scheduling),
        "dilation": d, "warmup": spec.measurement.warmup,
            "warmup_iteration_s": [it["time_s"] for it in iterations[: spec.measurement.warmup]],
        "steady_iterations": len(steady),
        "iteration_s": iteration, "iteration_p99_s": float(np.percentile(times, 99)),
        "compute_s": med("compute_s"), "comm_s": med("comm_s"), "exposed_comm_s": med("exposed_comm_s"),
        "overlap": med("overlap"),
        "iteration_s_real": real, "iteration_p99_s_real": float(np.percentile(times, 99)) / d,
        "samples_per_s_real": samples,
        "single_gpu_iteration_s_real": one_gpu or None,
        "scaling_efficiency": samples / (spec.network.workers * single) if samples and single else None,
        "timeline_iteration": median_iteration(steady),
        **ideal_figures(spec, cfg, real),
    }


def ideal_figures(spec: ExperimentSpec, cfg: JobConfig | None, real: float) -> dict[str, Any]:
    """The ideal iteration (every reduction at its link-rate bound on the emulated cluster), its
    samples/s, and the measured run's share of it (1: the testbed added nothing)."""
    if cfg is None or cfg.training is None or spec.workload.emulate is None:
        return {}
    best = ideal(cfg)
    return {"ideal_iteration_s_real": best.iteration_s,
            "ideal_samples_per_s_real": spec.network.workers * spec.workload.emulate.batch / best.iteration_s,
            "of_ideal": best.iteration_s / real if real > 0 else None, "ideal_link_load": best.link_load}


def median_iteration(steady: list[dict[str, Any]]) -> int:
    """The steady-state iteration whose time is the median (the one the timeline shows)."""
    ordered = sorted(steady, key=lambda it: it["time_s"])
    return int(ordered[(len(ordered) - 1) // 2]["index"])


CHECKS = ("none", "digest", "exact")  # what a worker's check of its result proves, weakest first


def record_check(record: IterationEntry) -> str:
    """The check a worker's IterationRecord says it ran (`check`; records without one: "exact")."""
    check = str(record.get("check", "exact"))
    if check not in CHECKS:
        raise ValueError(f"iteration record check = {check!r}: one of {', '.join(CHECKS)}")
    return check


def weakest(checks: list[str]) -> str:
    """The weakest of some checks ("exact" when there are none: nothing claims less)."""
    return min(checks, key=CHECKS.index) if checks else "exact"


def _iteration(i: int, recs: list[IterationEntry], workers: int | None = None) -> dict[str, Any]:
    """Iteration i of a job from its workers' records: the slowest worker's time; correctness and
    errors only where every worker checked its result (`check`). workers: how many the job has, when some of
    them left no record of it (a worker killed after completing it: `reported_by` says how many did)."""
    extras = sorted({k for x in recs for k in x.get("extra", {})})
    check = weakest([record_check(x) for x in recs])
    it: dict[str, Any] = {"index": i, "time_s": max(x["time_s"] for x in recs), "check": check,
                          "start": min(x["start"] for x in recs), "end": max(x["end"] for x in recs)}
    if workers is not None and len(recs) < workers:
        it["reported_by"] = len(recs)
    if check != "none":
        it["correct"] = all(x["correct"] for x in recs)
        wrong = [x.get("wrong_elements") for x in recs]
        if all(v is not None for v in wrong):
            it["wrong_elements"] = sum(int(v) for v in wrong if v is not None)
        errors = [x.get("max_abs_error") for x in recs]
        if all(v is not None for v in errors):
            it["max_abs_error"] = max(float(v) for v in errors if v is not None)
    for k in extras:
        if k == "relative_error" and check == "none":
            continue  # an error against the exact sum is a check's figure
        # Packets add up; a test accuracy is the worst worker's model (zero-filled gradients can make the
        # workers' models differ, docs/dlcp.md); every other figure is the slowest or largest worker's.
        combine = sum if k.endswith("packets") else min if k == "accuracy" else max
        it[k] = combine(x.get("extra", {}).get(k, 0) for x in recs)
    return it


TARGET_ACCURACY = 0.9  # time to accuracy: the first iteration whose test accuracy reaches this


def learning_figures(iterations: list[dict[str, Any]]) -> dict[str, Any]:
    """A job that trains a real model (test accuracy per iteration): its final accuracy, and the iterations and
    training time (the job's cumulative `train_s`: iterations only, checks and evaluation excluded) until its test
    accuracy first reached TARGET_ACCURACY (None: never in this run)."""
    if not iterations or "accuracy" not in iterations[0]:
        return {}
    reached = next((it for it in iterations if it["accuracy"] >= TARGET_ACCURACY), None)
    return {"final_accuracy": iterations[-1]["accuracy"], "target_accuracy": TARGET_ACCURACY,
            "iterations_to_accuracy": None if reached is None else reached["index"] + 1,
            "time_to_accuracy_s": None if reached is None else reached.get("train_s")}


def _job_summary(spec: ExperimentSpec, results: dict[int, WorkerResult]) -> dict[str, Any]:
    """Iterations (slowest worker per iteration), wire totals and headline figures of one job."""
    workers = [r for r in results.values() if r["role"] == "worker"]
    n_iter = min((completed_by(r) for r in workers), default=0)
    iterations = []
    for i in range(n_iter):  # every iteration every worker completed, from the records of those that kept them
        recs = [r["iterations"][i] for r in workers if len(r["iterations"]) > i]
        if not recs:
            break
        iterations.append(_iteration(i, recs, len(workers)))
    check = weakest([it["check"] for it in iterations])
    times = np.array([it["time_s"] for it in iterations]) if iterations else np.array([])
    sbytes = step_bytes(spec)
    bound = lower_bound_s(spec.algorithm.algo, spec.network.workers, spec.algorithm.servers, sbytes,
                          spec.network.bw_mbps)
    median = float(np.median(times)) if len(times) else None
    complete = bool(iterations) and len(iterations) == spec.measurement.iterations
    checked = check != "none"
    # correct: every iteration the job kept held its check (a job cut short by a crash keeps what it completed)
    correct = bool(iterations) and all(it["correct"] for it in iterations) if checked else None
    summary: dict[str, Any] = {
        "median_s": median,
        "p99_s": float(np.percentile(times, 99)) if len(times) else None,
        "mean_s": float(np.mean(times)) if len(times) else None,
        "algbw_mbps": sbytes * 8 / median / 1e6 if median else None,
        "lower_bound_s": bound,
        "ratio_to_bound": median / bound if median and bound else None,
        "iterations_done": len(iterations),
    }
    if checked:
        summary["correct"] = correct
    crashed = any(r.get("error") and not r.get("check_failed") for r in results.values())
    broke = correct is False or any(r.get("check_failed") for r in results.values())
    outcome = Outcome.FAILED if crashed or (not complete and not broke) else Outcome.CHECK_FAILED if broke \
        else Outcome.OK
    return {
        "ok": all(r.get("ok") for r in results.values()) and complete and correct is not False,
        "outcome": str(outcome),
        "errors": {f"{r['role']} {r['node_id']} ({r['host']})": r["error"] for r in results.values() if r.get("error")},
        "check": check,
        "iterations": iterations,
        **wire_totals(results.values()),
        "jct_s": iterations[-1]["end"] - iterations[0]["start"] if iterations else None,
        "summary": summary,
        "extra": {str(nid): {k: v for k, v in r.items() if k not in {"iterations", "stats", "traceback", "error",
                                                                         "node_id", "host", "role", "ok", "timeline",
                                                                         "check_failed"}}
                  for nid, r in results.items()},
    }


def wire_totals(results: Iterable[WorkerResult]) -> dict[str, Any]:
    """What a job's hosts sent and dropped, from their transports' counters: results.json's bytes_on_wire,
    packets_on_wire, retransmissions, timeouts, duplicates and host_drops."""
    stats = [r.get("stats", {}) for r in results]
    tx_bytes = sum(s.get("tx_bytes", 0) for s in stats)
    tx_packets = sum(s.get("tx_packets", 0) for s in stats)
    host_drops: dict[str, int] = {}
    for s in stats:
        for k, v in s.get("drops", {}).items():
            host_drops[k] = host_drops.get(k, 0) + v
    return {
        "bytes_on_wire": tx_bytes + ETH_HEADER_LEN * tx_packets,  # the hosts count IP bytes
        "packets_on_wire": tx_packets,
        "retransmissions": sum(s.get("requester", {}).get("retransmitted", 0) for s in stats),
        "timeouts": sum(s.get("requester", {}).get("timeouts", 0) for s in stats),
        # packets a receiver already had: a retransmission that was not needed (or whose ACK was lost)
        "duplicates": sum(s.get("responder", {}).get("duplicates", 0) for s in stats),
        "host_drops": host_drops,
    }


def completed_by(result: WorkerResult) -> int:
    """Iterations a worker completed: its records, or, where it left no result (its process killed), what it
    said it had completed (`progress`)."""
    if not result["iterations"] and "progress" in result:
        return int(result["progress"])
    return len(result["iterations"])


Usage = dict[str, dict[str, Any]]  # link direction ("leaf1->spine2") -> what it carried (experiment/links.py)


def busiest_link_load(links: Usage) -> float | None:
    """The largest load of any shaped link direction over the jobs: bytes its sender's shaper sent
    (what the link carried) over what the link's rate carries in that time. About 1 when a link,
    not the machine, limited the run; never much above 1 (a shaper sends at most its rate and a
    millisecond's burst)."""
    loads = [float(u["load"]) for u in links.values() if u.get("load") is not None]
    return max(loads) if loads else None


def fabric_link_loads(links: Usage) -> dict[str, float]:
    """Load of every switch-to-switch link direction ("leaf1->spine2") over the jobs, from what its
    shaper sent: per-spine loads show where ECMP put the flows."""
    return {name: u["load"] for name, u in links.items()
            if u["kind"] in ("uplink", "downlink", "fabric") and u.get("load") is not None}


def uplink_imbalance(links: Usage) -> float | None:
    """Busiest over mean load of the links from edge switches (those with hosts) to the others:
    1 when the fabric's uplinks carry equal shares, up to the number of uplinks when one carries all."""
    up = [float(u["load"]) for u in links.values() if u["kind"] == "uplink" and u.get("load") is not None]
    if len(up) < 2 or not sum(up):
        return None
    return max(up) / (sum(up) / len(up))


def busiest_offered_load(switches: dict[str, Any], bw_mbps: float) -> float | None:
    """What the switch program handed to its busiest port (its port counters) over what the link
    carries in the time. This is the load OFFERED to a switch's egress shaper, not what the link
    carried: above 1 when the shaper's queue dropped the excess (bulk TCP, an incast), and then
    above busiest_link_load by what was dropped."""
    best = None
    for sw in switches.values():
        if not isinstance(sw, dict) or not sw.get("seconds"):
            continue
        for counts in sw.get("ports", {}).values():
            if len(counts) >= 3:
                util = counts[2] * 8 / (sw["seconds"] * bw_mbps * 1e6)
                best = util if best is None else max(best, util)
    return best


def worst_outcome(outcomes: list[str]) -> str:
    """A run's outcome from its jobs': failed over check_failed over ok."""
    order = [str(Outcome.FAILED), str(Outcome.CHECK_FAILED), str(Outcome.OK)]
    return min(outcomes, key=order.index) if outcomes else str(Outcome.FAILED)


def summarize(spec: ExperimentSpec, cfgs: list[JobConfig], results: dict[int, dict[int, WorkerResult]],
              switches: dict[str, Any], started: float, links: Usage | None = None,
              background_goodput_mbps: float | None = None) -> Results:
    """results.json: job 1's figures at the top, every job under "jobs", what every shaped link
    carried (`links`), the switches' counters."""
    links = links or {}
    jobs = {cfg.job_id: _job_summary(spec, results[cfg.job_id]) for cfg in cfgs}
    main = jobs[cfgs[0].job_id]
    jcts = [j["jct_s"] for j in jobs.values() if j["jct_s"] is not None]
    headline_extra: dict[str, Any] = {"avg_jct_s": float(np.mean(jcts)) if jcts else None,
                                      "check": main["check"]}
    its = main["iterations"]
    checked = main["check"] != "none"
    headline_extra.update(learning_figures(its))
    if its and "zero_filled_packets" in its[0]:
        headline_extra["zero_filled_packets"] = sum(it["zero_filled_packets"] for it in its)
    if its and checked and all("relative_error" in it for it in its):  # the error the check measured
        headline_extra["max_relative_error"] = max(it["relative_error"] for it in its)
    link_loads: dict[str, float] = {}
    if spec.network.bw_mbps:
        headline_extra["busiest_link_load"] = busiest_link_load(links)
        headline_extra["busiest_offered_load"] = busiest_offered_load(switches, spec.network.bw_mbps)
        link_loads = fabric_link_loads(links)
        imbalance = uplink_imbalance(links)
        if imbalance is not None:
            headline_extra["uplink_imbalance"] = imbalance
    if spec.workload.background_flows:
        headline_extra["background_goodput_mbps"] = background_goodput_mbps
    if its and checked and spec.workload.dtype == DType.FLOAT32 and all("max_abs_error" in it for it in its):
        headline_extra["max_abs_error"] = max(it["max_abs_error"] for it in its)
    dlcp_drops = sum(events.get("dropped", 0) for sw in switches.values() if isinstance(sw, dict)
                     for events in sw.get("dlcp", {}).values())
    if spec.transport.dlcp.enabled:
        headline_extra["dlcp_dropped"] = dlcp_drops
    return cast(Results, {
        "name": spec.label,
        "backend": str(spec.network.backend),  # bmv2 (the testbed) or ns3 (the simulator)
        "spec": spec_dict(spec),
        "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(),
        "step_bytes": step_bytes(spec),
        **main,
        "ok": all(j["ok"] for j in jobs.values()),
        "outcome": worst_outcome([j["outcome"] for j in jobs.values()]),
        "goodput_mbps": main["summary"]["algbw_mbps"],
        "jobs": {str(k): {"ok": v["ok"], "outcome": v["outcome"], "check": v["check"], "jct_s": v["jct_s"],
                          **v["summary"]}
                 for k, v in jobs.items()},
        "headline_extra": headline_extra,
        "training": training_summary(spec, main["iterations"], cfgs[0]),
        "link_loads": link_loads,
        "links": links,
        "switches": switches,
        "bmv2": None,
    })


def with_faults(report: Results, records: list[FaultRecord], go: float) -> Results:
    """The run's faults in its results (both backends): `faults` (one FaultRecord each), `fault_outcome` (the
    worst: interrupted over recovered over no-effect), each iteration that was running while a fault's target was
    out marked with its label (`faults`), and each fault first in `errors`, before what followed from it (the
    nodes' errors). go: the jobs' start on the iterations' clock."""
    if not records:
        return report
    # A fault never injected was never out: it marks no iteration.
    spans = [(r.fault.label, r.injected_s, _out_until(r)) for r in records if r.injected]
    for it in report["iterations"]:
        hit = [label for label, a, b in spans if it["start"] - go < b and it["end"] - go > a]
        if hit:
            it["faults"] = hit
    order = [FaultOutcome.INTERRUPTED, FaultOutcome.RECOVERED, FaultOutcome.NO_EFFECT]
    report["faults"] = [r.to_dict() for r in records]
    report["fault_outcome"] = str(min((r.outcome for r in records), key=order.index))
    report["errors"] = {**interrupting(records), **report["errors"]}
    return report


def interrupting(records: Sequence[FaultRecord]) -> dict[str, str]:
    """The faults that interrupted a run, as its errors name them first: `fault LABEL` -> its line."""
    return {f"fault {r.fault.label}": fault_line(r) for r in records if r.outcome == FaultOutcome.INTERRUPTED}


def _out_until(record: FaultRecord) -> float:
    """When the fault's target was back, seconds after the go (inf: not in the run)."""
    ends = [up for _, up in record.fault.windows()]
    if any(e is None for e in ends):
        return float("inf")
    return record.injected_s + max(e for e in ends if e is not None) - record.fault.at_s


def fault_line(r: FaultRecord) -> str:
    """One line of what a fault did: `interrupted: injected at 2.01 s, detected after 0.05 s: killed worker 1 ...`."""
    parts = [f"{r.outcome}: injected at {r.injected_s:.2f} s"]
    if r.time_to_detect_s is not None:
        parts.append(f"detected after {r.time_to_detect_s:.2f} s")
    if r.time_to_recover_s is not None:
        parts.append(f"recovered after {r.time_to_recover_s:.2f} s")
    if r.iterations_lost:
        parts.append(f"{r.iterations_lost} iteration{'' if r.iterations_lost == 1 else 's'} lost")
    if r.fallback:
        parts.append(f"fell back to {r.fallback}")
    return ", ".join(parts) + (f": {r.detail}" if r.detail else "")


def _fmt(value: float | None, unit: str = "", digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}{unit}"


def _verdict(report: Results) -> str:
    check = report.get("check", "exact")
    if check == "none":
        return "results not checked (check: none)"
    if not report["iterations"]:
        return "no iteration completed"
    if report.get("outcome") == Outcome.CHECK_FAILED or not report["summary"].get("correct"):
        worst = max((it.get("relative_error", 0.0) for it in report["iterations"]), default=0.0)
        bad = sum(1 for it in report["iterations"] if it.get("correct") is False)
        return (f"CHECK FAILED: NOT CORRECT ({check} check; {bad} of {len(report['iterations'])} iterations wrong, "
                f"relative error up to {worst:.3g}): not a headline figure")
    if check == "digest":
        return "correct (digest check)"
    its = report["iterations"]
    if all(it.get("wrong_elements", 0) == 0 for it in its):
        return "all exact"
    zero = sum(it.get("zero_filled_packets", 0) for it in its)
    worst = max(it.get("relative_error", 0.0) for it in its)
    return f"correct within the loss budget ({zero:g} packets zero-filled, relative error <= {worst:.3f})"


def _retransmitted(report: Results) -> str:
    """How many packets were sent again, and why: timeouts, and how many the receivers already had."""
    n = report["retransmissions"]
    if not n or report.get("timeouts") is None:  # (results.json written before the two were counted)
        return f"{n} retransmitted"
    return f"{n} retransmitted after {report['timeouts']} timeouts; {report['duplicates']} already received"


def _partial_sums_lines(report: Results) -> list[str]:
    """k of N (or a deadline): how many workers the sums held, their error against all N, what the switch did."""
    spec = report["spec"]
    k, deadline = spec.get("netreduce_k"), spec.get("netreduce_deadline_ms")
    held = [float(it["contributors"]) for it in report["iterations"] if it.get("contributors") is not None]
    if (k is None and deadline is None) or not held:
        return []
    n = spec["workers"]
    rule = " or ".join(x for x in (f"{k} of {n}" if k is not None else f"{n} of {n}",
                                   f"a {deadline:g} ms deadline" if deadline is not None else "") if x)
    errors = [float(it["gradient_error"]) for it in report["iterations"] if it.get("gradient_error") is not None]
    events: dict[str, int] = {}
    for job in report.get("switches", {}).get("netreduce", {}).values():
        for part in job.get("switches", {}).values():
            for name, count in part.get("events", {}).items():
                events[name] = events.get(name, 0) + int(count)
    line = (f"  {'partial sums':<22}{rule}: an iteration's fewest per sum {min(held):g}-{max(held):g} workers "
            f"(median {statistics.median(held):g})")
    if errors:
        line += f"; gradient error vs all {n} median {statistics.median(errors):.3f}"
    if events:
        line += (f"; switch: {events.get('deadline', 0)} cells closed by the deadline, "
                 f"{events.get('late', 0) + events.get('late-answered', 0)} late packets left out")
    return [line]


def _learning_lines(report: Results) -> list[str]:
    """A job that trains a real model (train-digits): its accuracy from the first iteration to the last (the worst
    worker's), and whether every worker of job 1 ended with one model (their parameter digests)."""
    its = report["iterations"]
    if not its or "accuracy" not in its[0]:
        return []
    digests = {str(who): str(node["model_digest"]) for who, node in report.get("extra", {}).items()
               if isinstance(node, dict) and "model_digest" in node}
    same = set(digests.values())
    model = (f"model digest {same.pop()} on every worker" if len(same) == 1 else
             "model digests DIFFER: " + ", ".join(f"node {who} {d}" for who, d in digests.items()) if digests else
             "no model digest")
    return [f"  {'learning':<22}accuracy {its[0]['accuracy']:.3f} -> {its[-1]['accuracy']:.3f} over {len(its)} "
            f"iterations (the worst worker's); {model}"]


def format_table(report: Results) -> str:
    s = report["summary"]
    spec = report["spec"]
    bw = f"{spec['bw_mbps']:g} Mb/s" if spec.get("bw_mbps") else "unshaped"
    backend = report.get("backend", "bmv2")
    lines = [
        f"{report['name']}: {spec['algo']} x{spec['workers']} on {spec['topo']} ({bw}), "
        f"{report['step_bytes'] / 2**20:.2f} MiB per step, {spec['transport']}, loss {spec['loss_pct']:g}%, "
        f"on {'the ns-3 simulator' if backend == 'ns3' else 'BMv2'}"
        f"{', graph engine' if spec.get('engine') == 'graph' else ''}",
        *[f"  fault {f['label']}: {fault_line(FaultRecord.from_dict(f))}" for f in report.get("faults", [])],
        f"  {'iterations':<22}{s['iterations_done']}/{spec['iterations']}  "
        f"{_verdict(report)}",
        f"  {'median iteration':<22}{_fmt(s['median_s'], ' s')}",
        f"  {'p99 iteration':<22}{_fmt(s['p99_s'], ' s')}",
        f"  {'algorithmic bandwidth':<22}{_fmt(s['algbw_mbps'], ' Mb/s', 1)}",
        f"  {'link-rate lower bound':<22}{_fmt(s['lower_bound_s'], ' s')}",
        f"  {'ratio to bound':<22}{_fmt(s['ratio_to_bound'], 'x', 2)}",
        f"  {'bytes on the wire':<22}{report['bytes_on_wire'] / 2**20:.2f} MiB "
        f"({report['packets_on_wire']} packets, {_retransmitted(report)})",
    ]
    t = report.get("training")
    if t and t.get("iteration_s") is not None:
        e = t["emulate"]
        lines += [
            f"  {'emulated cluster':<22}{e['device']} {e['precision']}, batch {e['batch']}, {e['link_gbps']:g} Gb/s "
            f"links; dilation D = {t['dilation']:.3g}; {t['sync']} sync, {t['scheduling']}",
            f"  {'training iteration':<22}{t['iteration_s']:.3f} s testbed = {t['iteration_s_real'] * 1e3:.1f} ms real "
            f"(p99 {t['iteration_p99_s_real'] * 1e3:.1f} ms; {t['warmup']} warm-up left out)",
            f"  {'  computation':<22}{t['compute_s']:.3f} s; exposed communication {t['exposed_comm_s']:.3f} s; "
            f"overlap {t['overlap']:.0%}",
            f"  {'throughput (real)':<22}{_fmt(t['samples_per_s_real'], ' samples/s', 1)}; scaling efficiency "
            f"{_fmt(t['scaling_efficiency'], '', 2)}",
        ]
        if t.get("ideal_samples_per_s_real") is not None:
            lines.append(f"  {'ideal (link bounds)':<22}{t['ideal_samples_per_s_real']:.1f} samples/s; this run "
                         f"{_fmt(t.get('of_ideal'), '', 2)} of it")
    lines += _partial_sums_lines(report)
    lines += _learning_lines(report)
    x = report.get("headline_extra", {})
    if x.get("background_goodput_mbps") is not None:
        lines.append(f"  {'background TCP':<22}{x['background_goodput_mbps']:.2f} Mb/s goodput over the jobs")
    busiest = (f"busiest link {x['busiest_link_load']:.0%} loaded" if x.get("busiest_link_load") is not None
               else "no shaped link measured")
    sim = report.get("simulator")
    if backend == "ns3" and sim:
        lines.append(f"  {'what limited it':<22}{busiest}; simulated: the model's figures, never machine-bound")
        lines.append(f"  {'simulator':<22}{sim['wall_s']:.1f} s wall for {sim['sim_s']:.4g} s simulated; "
                     f"{sim['events_per_s'] / 1e6:.2f} M events/s, {sim['packet_hops_per_s'] / 1e6:.2f} M "
                     f"packet-hops/s; peak {sim['peak_rss_mb']:.0f} MB")
    else:
        limits = [busiest, f"CPU {x['cpu_idle']:.0%} idle" if x.get("cpu_idle") is not None else "CPU idle unknown"]
        judged = {True: f"MACHINE-BOUND: {x.get('machine_bound_reason')}", False: "not machine-bound",
                  None: "not judged"}[x.get("machine_bound")]
        lines.append(f"  {'what limited it':<22}{', '.join(limits)}; {judged}")
    errors = {who: err for who, err in report["errors"].items() if not who.startswith("fault ")}  # (shown first)
    if errors:
        lines.append("  errors:" if not report.get("faults") else "  what followed:")
        lines += [f"    {who}: {err.splitlines()[0]}" for who, err in errors.items()]
    return "\n".join(lines)


def write_report(report: Results, out_dir: Path) -> None:
    (out_dir / "table.txt").write_text(format_table(report) + "\n")
    with (out_dir / "iterations.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["index", "time_s", "check", "correct", "max_abs_error"])  # the last two empty: not checked
        for it in report["iterations"]:
            w.writerow([it["index"], f"{it['time_s']:.6f}", it.get("check", "exact"), it.get("correct", ""),
                        it.get("max_abs_error", "")])
    plot_iterations(cast(dict[str, Any], report), out_dir / "iterations.png")
