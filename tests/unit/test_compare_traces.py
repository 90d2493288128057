"""`gradswitch compare` on Chakra traces (gradswitch/experiment/compare_traces.py): a spec's trace runs load with
their paths from the spec's folder and workers = their ranks, what a trace's run cannot use is refused in one line
naming the run before anything starts (as `gradswitch experiment --workload-et` refuses it), and the summary,
report and resumption of trace runs, from a stand-in graph runner whose times follow the traces' bytes (the
real engines run in tests/ns3/test_compare_traces.py and tests/mininet/test_compare_traces.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gradswitch.experiment import summary_file
from gradswitch.experiment.compare import exit_status, load_spec, run_compare
from gradswitch.experiment.compare_traces import GRAPH_KEY, graph_headline
from gradswitch.experiment.graph_run import RESULTS, GraphRunReport, graph_job, read_graph_report, summarize
from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.results_file import Outcome
from gradswitch.experiment.spec import Backend, ExperimentError, ExperimentSpec, SpecError, load_experiment
from gradswitch.experiment.summary_file import CompareExit
from gradswitch.experiment.trace_results import write_trace_results
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.workload.chakra import write_traces
from gradswitch.workload.generators import collective_graph
from gradswitch.workload.graph import CollectiveKind, JobGraph
from gradswitch.workload.graph_timing import GraphRun, NodeTiming
from gradswitch.workload.job import Algorithm

AR = CollectiveKind.ALL_REDUCE


def traces(folder: Path, name: str, nbytes: int, ranks: int = 4, repeat: int = 1) -> Path:
    prefix = folder / name
    write_traces(collective_graph(AR, ranks, nbytes, repeat, name=name), prefix)
    return prefix


def spec_file(folder: Path, text: str) -> Path:
    path = folder / "spec.toml"
    path.write_text(text)
    return path


def refusal(path: Path) -> str:
    with pytest.raises(SpecError) as e:
        load_spec(path)
    return str(e.value)


# ---- loading ----


def test_a_matrix_over_two_traces_from_the_specs_folder(tmp_path, monkeypatch):
    traces(tmp_path / "et", "ar1", 1 << 20)
    traces(tmp_path / "et", "ar4", 4 << 20, ranks=6)
    path = spec_file(tmp_path, 'repeat = 3\nbaselines = ["ar1"]\n[defaults]\nbackend = "ns3"\nbw_mbps = 1000\n'
                               '[matrix]\nworkload_et = ["et/ar1", "et/ar4"]\n')
    monkeypatch.chdir(tmp_path.parent)  # elsewhere: the paths are the spec's
    spec = load_spec(path)
    assert [r.label for r in spec.runs] == ["ar1", "ar4"]  # named after the traces' prefixes
    assert [r.workload.workload_et for r in spec.runs] == [str(tmp_path / "et" / "ar1"), str(tmp_path / "et" / "ar4")]
    assert [r.network.workers for r in spec.runs] == [4, 6]  # the traces' ranks
    assert spec.traces and spec.headline_figure == "job_s"
    assert {g.world_size for g in spec.graphs.values()} == {4, 6}
    assert load_spec(path.with_suffix("")).runs == spec.runs  # `gradswitch compare DIR/spec`, as other specs


def test_a_matrix_over_the_algorithm_on_bmv2_and_an_absolute_path(tmp_path):
    prefix = traces(tmp_path, "ar", 1 << 20)
    (tmp_path / "specs").mkdir()
    path = spec_file(tmp_path / "specs", f'[defaults]\nworkload_et = "{prefix}"\ntopo = "rack"\nbw_mbps = 8\n'
                                         'workers = 4\n[matrix]\nalgo = ["ring", "netreduce"]\n')
    spec = load_spec(path)
    assert [(r.label, r.algorithm.algo, r.network.workers) for r in spec.runs] == [("ring", Algorithm.RING, 4),
                                                                  ("netreduce", Algorithm.NETREDUCE, 4)]
    assert {r.workload.workload_et for r in spec.runs} == {str(prefix)}
    path.write_text(path.read_text().replace('algo = ["ring", "netreduce"]', 'backend = ["bmv2", "ns3"]'))
    assert [(r.label, r.network.backend, r.network.workers) for r in load_spec(path).runs] == [("bmv2", Backend.BMV2,
                                                                                                4),
                                                                               ("ns3", Backend.NS3, 4)]


@pytest.mark.parametrize(("run", "says"), [
    ('workload_et = "missing/ar"', "run 'x': workload_et: {tmp}/missing: no such directory (a trace is given as "
                                   "DIR/PREFIX"),
    ('workload_et = "et/arr"', "run 'x': workload_et: {et}/arr.0.et: no trace file arr.{{rank}}.et in {et}"),
    ('workload_et = "et/ar"\nworkers = 8', "run 'x': workers = 8, but the traces {et}/ar have 4 ranks; leave workers "
                                           "out (the traces set it) or give 4"),
    ('workload_et = "et/ar"\nsize_bytes = 1024\niterations = 3',
     "run 'x': size_bytes (--size), iterations: a trace's run (workload_et) has no use for them: the traces give the "
     "sizes, the computation and how often each runs; leave them out"),
    ('workload_et = "et/ar"\nworkload = "resnet50"', "run 'x': workload: a trace's run (workload_et) has no use for "
                                                     "it"),
    ('workload_et = "et/ar"\nalgo = "ring"\nservers = 2', "run 'x': servers: a trace's run (workload_et) has no "
                                                          "use for it"),
    ('workload_et = "et/big"\nalgo = "netreduce"', "run 'x': workers = 33: NetReduce on BMv2 has at most 32 workers"),
    ('workload_et = "et/ar"\nbw_mbps = 1000\ntopo = "dumbbell"\nfaults = ["worker-crash:1@0.1"]\nbackend = "ns3"',
     "run 'x': fault worker-crash:1@0.1: the simulator's graph engine (workload_et) runs switch and link faults"),
])
def test_what_a_trace_run_cannot_use_is_one_line_naming_the_run(tmp_path, run, says):
    traces(tmp_path / "et", "ar", 1 << 20)
    traces(tmp_path / "et", "big", 1024, ranks=33)  # the run's workers are its ranks
    (tmp_path / "et" / "arr.txt").write_text("")
    bw = "" if "bw_mbps" in run else "bw_mbps = 8\n"
    path = spec_file(tmp_path, f'[[runs]]\nname = "x"\n{bw}{run}\n')
    lines = refusal(path).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}: " + says.format(et=tmp_path / "et", tmp=tmp_path)), lines[0]


@pytest.mark.parametrize("backend", ["bmv2", "ns3"])
def test_a_trace_through_parameter_servers_is_taken(tmp_path, backend):
    """algo = ps runs a trace's world all-reduces through `servers` servers, keys of ps_key_bytes, on either
    backend: both keys are used, not refused as ignored; the network has a host for each rank and each server."""
    traces(tmp_path / "et", "ar", 1 << 20)
    path = spec_file(tmp_path, f'[[runs]]\nname = "x"\nworkload_et = "et/ar"\nbw_mbps = 8\nalgo = "ps"\n'
                               f'servers = 2\nps_key_bytes = 16384\nbackend = "{backend}"\n')
    (run,) = load_spec(path).runs
    assert (run.algorithm.servers, run.algorithm.ps_key_bytes, run.network.workers) == (2, 16384, 4)
    assert len(topology_for(run).hosts) >= 6


def test_a_trace_through_parameter_servers_with_too_many_keys_is_refused_naming_the_node(tmp_path):
    """The hosts number an operation's keys past 4,096 in rounds (64 KiB in keys of 4 bytes, 16,384 keys, loads); the
    simulator numbers at most 2^24 an operation: 128 MiB in keys of 4 bytes is refused when the spec loads, one
    line naming the trace file and node, with the smallest key that would do."""
    traces(tmp_path / "et", "ar", 64 << 10)
    path = spec_file(tmp_path, '[[runs]]\nname = "x"\nworkload_et = "et/ar"\nbw_mbps = 8\nalgo = "ps"\n'
                               'ps_key_bytes = 4\n')
    (run,) = load_spec(path).runs
    assert run.algorithm.ps_key_bytes == 4
    traces(tmp_path / "et", "big", 128 << 20)
    path = spec_file(tmp_path, '[[runs]]\nname = "x"\nworkload_et = "et/big"\nbw_mbps = 8\nalgo = "ps"\n'
                               'ps_key_bytes = 4\nbackend = "ns3"\n')
    assert refusal(path) == (f"{path}: run 'x': {tmp_path}/et/big.0.et node 0 (all_reduce.0): c/world/0: 33554432 "
                             "keys of ps_key_bytes = 4; the simulator numbers at most 16777216 an operation: raise "
                             "ps_key_bytes to at least 8")


def test_a_trace_without_a_link_rate_or_a_rank_is_refused(tmp_path):
    traces(tmp_path / "et", "ar", 1 << 20)
    (tmp_path / "et" / "ar.2.et").unlink()
    traces(tmp_path / "et", "ok", 1 << 20)
    path = spec_file(tmp_path, '[[runs]]\nname = "a"\nworkload_et = "et/ar"\nbw_mbps = 8\n'
                               '[[runs]]\nname = "b"\nworkload_et = "et/ar"\nbw_mbps = 8\n'
                               '[[runs]]\nname = "c"\nworkload_et = "et/ok"\n')
    assert refusal(path).splitlines() == [
        f"{path}: run 'c': bw_mbps (--bw) is not set: a trace's run needs link rates (its bounds are at the link "
        "rate): give it, e.g. 8 on BMv2 or 100000 on ns3",
        f"{path}: runs 'a', 'b': workload_et: {tmp_path}/et/ar.2.et: missing (files of ranks 0-1, 3 are there; a "
        "trace has one file per rank, 0..N-1)"]  # one line for the trace both runs share


def test_traces_and_ordinary_runs_do_not_mix(tmp_path):
    traces(tmp_path, "ar", 1 << 20)
    path = spec_file(tmp_path, '[defaults]\nbw_mbps = 8\n[[runs]]\nname = "trace"\nworkload_et = "ar"\n'
                               '[[runs]]\nname = "loop"\nsize_bytes = 1048576\n')
    assert refusal(path) == (f"{path}: runs trace run traces (workload_et) and loop do not: a compare's runs are all "
                             "traces or none (a trace run's figures are its job's time against its bounds, the "
                             "others' their iterations'); put them in two specs")


def test_gradswitch_experiment_refuses_the_same_keys_and_takes_a_files_trace_from_its_folder(tmp_path):
    prefix = traces(tmp_path / "et", "ar", 1 << 20)
    done = subprocess.run([sys.executable, "-m", "gradswitch.cli.main", "experiment", "--workload-et", str(prefix),
                           "--bw", "8", "--size", "1MiB", "--out", str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=60, cwd=REPO_ROOT)
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    assert done.stderr.strip().splitlines() == [
        "error: size_bytes (--size): a trace's run (workload_et) has no use for it: the traces give the sizes, the "
        "computation and how often each runs; leave it out"], done.stderr
    run = tmp_path / "run.toml"
    run.write_text('workload_et = "et/ar"\nbw_mbps = 8\n')
    assert load_experiment(run).workload.workload_et == str(prefix)  # from the file's folder
    assert load_experiment(run,
                           {"workload_et": "elsewhere/ar"}).workload.workload_et == "elsewhere/ar"  # an option as typed


# ---- running, summarizing, resuming ----


def fake_run(graph: JobGraph, spec: ExperimentSpec, *, wrong: bool = False, unfinished: bool = False) -> GraphRun:
    """Every node of every rank one after another, each taking its bytes at the link rate x (1 + seed / 10)."""
    assert spec.network.bw_mbps is not None
    rate = spec.network.bw_mbps * 1e6 / 8 / (1 + spec.measurement.seed / 10)
    nodes = []
    for r in graph.ranks:
        t = 0.0
        for n in r.nodes:
            nbytes = getattr(n, "nbytes", 0)
            end = t + nbytes / rate
            nodes.append(NodeTiming(r.rank, n.id, "collective", t, end, AR, "world", nbytes,
                                    not (wrong and r.rank == 1)))
            t = end
    return GraphRun(tuple(nodes[:-1] if unfinished else nodes))


class Engine:
    """A stand-in graph runner: a report as run_graph_spec writes it, from fake_run; `broken`: labels that break."""

    def __init__(self, wrong: str = "", unfinished: str = "", fails: str = "") -> None:
        self.wrong, self.unfinished, self.fails = wrong, unfinished, fails
        self.ran: list[str] = []

    def __call__(self, spec: ExperimentSpec, graph: JobGraph, out: Path) -> GraphRunReport:
        self.ran.append(f"{spec.label}/{spec.measurement.seed}")
        if spec.label == self.fails:
            raise ExperimentError(f"{graph.name}: rank 2 did not run its graph: no result")
        job, _ = graph_job(topology_for(spec), spec, graph)
        run = fake_run(graph, spec, wrong=spec.label == self.wrong, unfinished=spec.label == self.unfinished)
        errors = ("rank 1 node 1: output not what its all_reduce defines",) if spec.label == self.wrong else (
            ("a rank did not finish its graph",) if spec.label == self.unfinished else ())
        report = summarize(job, run, [n.host for n in job.job.nodes], spec.network.bw_mbps or 1.0, {}, None, errors,
                           0.5)
        out.mkdir(parents=True, exist_ok=True)
        write_trace_results(out / RESULTS, spec, graph, report, 0.0, [])
        return report


def two_sizes(tmp_path: Path, repeat: int = 3, more: str = "") -> Path:
    traces(tmp_path / "et", "small", 1 << 20)
    traces(tmp_path / "et", "large", 4 << 20)
    return spec_file(tmp_path, f'name = "sizes"\nrepeat = {repeat}\nbaselines = ["small"]\n[defaults]\n'
                               f'backend = "ns3"\nbw_mbps = 1000\n{more}[matrix]\n'
                               'workload_et = ["et/small", "et/large"]\n')


def test_medians_spreads_and_ratios_of_trace_runs(tmp_path):
    spec = load_spec(two_sizes(tmp_path))
    out = tmp_path / "out"
    summary = run_compare(spec, out, log=lambda s: None, graph_runner=Engine())
    assert summary_file.read(out / "summary.json") == summary and exit_status(summary) == CompareExit.OK
    small, large = summary["small"], summary["large"]
    for s in (small, large):
        assert s["headline_repetitions"] == 3 and s["outcome"] == "ok" and s["correct"] and s["check"] == "exact"
        times = sorted(h["job_s"] or 0.0 for h in s["repetitions"])
        assert s["job_s"] == times[1] and s["spread"]["job_s"]["min"] == times[0]
        assert {"worst_ratio_to_bound", "exposed_comm_s", "retransmissions"} <= set(s["spread"])
    assert large["job_s"] > small["job_s"]  # type: ignore[operator]
    over = large["over_baseline"]
    assert over["figure"] == "job_s" and over["baseline"] == "small" and over["headline"]
    assert over["ratio"] == pytest.approx(4.0)  # 4 MiB against 1 MiB, seed for seed
    assert over["min"] == pytest.approx(4.0 * 1.1 / 1.3) and over["max"] == pytest.approx(4.0 * 1.3 / 1.1)
    report = (out / "report.md").read_text()
    assert "| run | backend | repetitions in the medians | machine-bound | / best baseline | job s | worst time / " \
           "bound | exposed s | busiest link load | check | exact | resent |" in report
    # the medians of repetitions at 1.1, 1.2 and 1.3 x the link rate's time, [min, max] beside them
    assert "| large | ns3 | 3 of 3 | no | 4.00 [3.38, 4.73] | 0.04027 [0.03691, 0.04362] | 0.80 [0.73, 0.87] |" \
        in report
    assert "Best baseline: **small**, median 0.01007 [0.009227, 0.01091]." in report
    assert f"- **large**: trace `{tmp_path / 'et' / 'large'}` (large: 4 ranks, 4 nodes in all), algo ring on rack " \
           "(ns3)" in report
    assert "[rep2](large/rep2/table.txt)" in report and (out / "large" / "rep2" / "table.txt").exists()
    assert "Best baseline: **small**" in report and (out / "compare.png").stat().st_size > 1000


def test_a_trace_run_is_kept_when_the_compare_starts_again_unless_its_spec_or_traces_changed(tmp_path):
    path = two_sizes(tmp_path, repeat=2)
    out = tmp_path / "out"
    first = run_compare(load_spec(path), out, log=lambda s: None, graph_runner=Engine())
    again = Engine()
    assert run_compare(load_spec(path), out, log=lambda s: None, graph_runner=again) == first
    assert again.ran == []
    assert json.loads((out / "small" / "rep1" / GRAPH_KEY).read_text())["spec"]["seed"] == 1
    traces(tmp_path / "et", "small", 2 << 20)  # the same prefix, other traces
    run_compare(load_spec(path), out, log=lambda s: None, graph_runner=again)
    assert again.ran == ["small/1", "small/2"]
    changed = Engine()
    path.write_text(path.read_text().replace("bw_mbps = 1000", "bw_mbps = 2000"))
    summary = run_compare(load_spec(path), out, log=lambda s: None, graph_runner=changed)
    assert sorted(changed.ran) == ["large/1", "large/2", "small/1", "small/2"]
    assert summary["large"]["job_s"] == pytest.approx(first["large"]["job_s"] / 2)  # type: ignore[operator]


def test_a_wrong_output_is_check_failed_and_a_run_that_could_not_run_is_named(tmp_path):
    out = tmp_path / "out"
    summary = run_compare(load_spec(two_sizes(tmp_path, repeat=1)), out, log=lambda s: None,
                          graph_runner=Engine(wrong="large"))
    assert exit_status(summary) == CompareExit.CHECK_FAILED
    assert summary["large"]["outcome"] == "check_failed" and summary["large"]["correct"] is False
    assert summary["large"]["over_baseline"]["headline"] is False
    report = (out / "report.md").read_text()
    assert "| large (check failed: 1 of 1) |" in report and "- large (repetition 1): not correct" in report
    for broken in (Engine(unfinished="small"), Engine(fails="small")):
        summary = run_compare(load_spec(two_sizes(tmp_path, repeat=1)), tmp_path / "again", log=lambda s: None,
                              graph_runner=broken)
        assert exit_status(summary) == CompareExit.DID_NOT_RUN
        assert summary["small"]["failed_repetitions"] == [1] and summary["small"]["outcome"] == "failed"
        report = (tmp_path / "again" / "report.md").read_text()
        assert "## Runs that could not run (exit status 4)" in report
        assert ("- small (repetition 1): a rank did not finish its graph" in report
                or "- small (repetition 1): small: rank 2 did not run its graph: no result" in report), report
        assert summary["large"]["outcome"] == "ok"


def test_a_headline_from_the_report_read_back(tmp_path):
    """A trace run's results.json reads back into the report that wrote it (what a compare started again keeps)."""
    graph = collective_graph(AR, 4, 1 << 20, 2, name="ar")
    spec = ExperimentSpec.of(workers=4, bw_mbps=1000.0, backend=Backend.NS3, workload_et="ar")
    report = Engine()(spec, graph, tmp_path)
    back = read_graph_report(tmp_path / RESULTS)
    assert back == report
    head = graph_headline(back, spec, graph)
    assert head["outcome"] == str(Outcome.OK) and head["job_s"] == report.job_s and head["correct"]
    assert head["worst_ratio_to_bound"] == max(k.worst_ratio for k in report.by_kind)
    short = graph_headline(replace(back, run=GraphRun(back.run.nodes[:-1])), spec, graph)
    assert short["outcome"] == str(Outcome.FAILED) and "error" in short


def test_a_trace_file_is_hashed_once_while_it_stays_the_same(tmp_path):
    """file_digest reads a file again only when its size or modification time changed."""
    import hashlib
    import os

    from gradswitch.experiment.compare_traces import _digest, file_digest

    f = tmp_path / "t.0.et"
    f.write_bytes(b"a" * 100)
    first = file_digest(f)
    hits = _digest.cache_info().hits
    assert file_digest(f) == first == hashlib.sha256(b"a" * 100).hexdigest()
    assert _digest.cache_info().hits == hits + 1
    f.write_bytes(b"b" * 100)  # the same size: its modification time tells
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert file_digest(f) == hashlib.sha256(b"b" * 100).hexdigest()
