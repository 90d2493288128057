"""Every JSON gradswitch writes carries `format` and its reader checks it (gradswitch/formats.py): a file of
another format, or without one, is refused in one line naming the file, the format found and the one expected."""

from __future__ import annotations

import json
import re
from dataclasses import asdict

import pytest

from gradswitch.experiment.goodput_study import (
    FABRIC_RUN_FORMAT,
    GOODPUT_FORMAT,
    FabricRun,
    read_study,
)
from gradswitch.formats import FormatError, check_format
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.sim.results import RESULTS_FORMAT, parse
from gradswitch.sim.run import read as read_sim


def test_the_expected_format_is_read_and_another_refused_in_one_line():
    assert check_format({"format": 3, "x": 1}, "a.json", "thing", 3) == {"format": 3, "x": 1}
    with pytest.raises(FormatError) as e:
        check_format({"format": 2}, "dir/a.json", "thing", 3)
    assert str(e.value).startswith("dir/a.json: a thing of format 2; this gradswitch reads format 3")
    assert len(str(e.value).splitlines()) == 1
    with pytest.raises(FormatError, match=r"a\.json: a thing without `format`; this gradswitch reads format 3"):
        check_format({"x": 1}, "a.json", "thing", 3)
    with pytest.raises(FormatError, match="format True"):
        check_format({"format": True}, "a.json", "thing", 1)  # a bool is no version
    with pytest.raises(FormatError, match="not a thing"):
        check_format([1, 2], "a.json", "thing", 1)


def test_a_kind_written_before_it_had_a_format_reads_as_missing_is():
    assert check_format({"x": 1}, "old.json", "thing", 1, missing_is=1) == {"x": 1}
    with pytest.raises(FormatError, match="format 1; this gradswitch reads format 2"):
        check_format({"x": 1}, "old.json", "thing", 2, missing_is=1)


def test_the_simulators_results_are_refused_in_another_format(tmp_path):
    (tmp_path / "sim-results.json").write_text(json.dumps({"format": RESULTS_FORMAT + 1, "jobs": []}))
    with pytest.raises(FormatError) as e:
        read_sim(tmp_path, [])
    assert str(e.value).startswith(f"{tmp_path / 'sim-results.json'}: a simulator's results of format "
                                   f"{RESULTS_FORMAT + 1}; this gradswitch reads format {RESULTS_FORMAT}")
    with pytest.raises(FormatError, match="without `format`"):
        parse({"jobs": []}, [])


def test_the_simulator_writes_the_format_its_reader_expects():
    """Both take it from gradswitch/sim/sim_schema.py (C++ through gs-keys.h: tests/unit/test_sim_schema.py)."""
    source = (REPO_ROOT / "gradswitch/sim/ns3/model/gs-simulation.cc").read_text()
    assert re.findall(r"out\[res::results::kFormat\] = (\w+);", source) == ["RESULTS_FORMAT"]
    header = (REPO_ROOT / "gradswitch/sim/ns3/model/gs-keys.h").read_text()
    assert re.findall(r"constexpr uint32_t RESULTS_FORMAT = (\d+);", header) == [str(RESULTS_FORMAT)]


def run_dict() -> dict[str, object]:
    return asdict(FabricRun("intact", "", "intact", 16, "resnet50", "ring", True, 0.09, 0.9, 1.0, {}, "v"))


def test_a_kept_goodput_run_carries_its_format_and_an_old_one_reads_as_1(tmp_path):
    run = FabricRun.from_dict(run_dict())
    assert run.to_dict()["format"] == FABRIC_RUN_FORMAT
    (tmp_path / "new.json").write_text(json.dumps(run.to_dict()))
    (tmp_path / "old.json").write_text(json.dumps(run_dict()))  # kept before runs carried `format`
    assert FabricRun.read(tmp_path / "new.json") == run == FabricRun.read(tmp_path / "old.json")
    (tmp_path / "future.json").write_text(json.dumps({**run.to_dict(), "format": 2}))
    with pytest.raises(FormatError, match=r"future\.json: a goodput study's ns-3 run of format 2; .* format 1"):
        FabricRun.read(tmp_path / "future.json")


def test_goodput_json_is_checked(tmp_path):
    path = tmp_path / "goodput.json"
    path.write_text(json.dumps({"format": GOODPUT_FORMAT, "study": {}}))
    assert read_study(path)["study"] == {}
    path.write_text(json.dumps({"format": "gradswitch.goodput/1"}))
    with pytest.raises(FormatError, match=r"of format 'gradswitch\.goodput/1'; this gradswitch reads format 1"):
        read_study(path)
    bench = REPO_ROOT / "bench/results/goodput.json"
    if bench.exists():  # written before the study's document carried `format`: format 1
        assert "study" in read_study(bench)


def test_a_jobs_configuration_carries_its_format_and_its_reader_checks_it(tmp_path):
    from gradswitch.experiment.run_plan import plan_run
    from gradswitch.experiment.spec import spec_from_dict
    from gradswitch.workload.job import JOB_FORMAT, JobConfig

    cfg = plan_run(spec_from_dict({"algo": "ring", "workers": 2})).first
    path = tmp_path / "job1.json"
    cfg.save(path)
    raw = json.loads(path.read_text())
    assert raw["format"] == JOB_FORMAT == 1
    assert JobConfig.load(path) == cfg
    del raw["format"]  # written before configurations had a format: read as format 1
    path.write_text(json.dumps(raw))
    assert JobConfig.load(path) == cfg
    path.write_text(json.dumps({**raw, "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{path}: a job configuration of format 2; this gradswitch "
                                                    "reads format 1")):
        JobConfig.load(path)


def test_a_nodes_result_carries_its_format_and_its_reader_checks_it(tmp_path):
    from gradswitch.workload.worker_result import FORMAT, WorkerResultError, read, worker_result, write

    path = write(tmp_path, worker_result(3, "h4", "worker", True, []))
    assert json.loads(path.read_text())["format"] == FORMAT == 1
    assert read(tmp_path, 3)["host"] == "h4"
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in raw.items() if k != "format"}))  # from before: format 1
    assert read(tmp_path, 3)["host"] == "h4"
    path.write_text(json.dumps({**raw, "format": 7}))
    with pytest.raises(WorkerResultError, match=re.escape(f"{path}: a node's result of format 7; this gradswitch "
                                                          "reads format 1")):
        read(tmp_path, 3)


def test_a_compares_summary_carries_its_format_and_its_reader_checks_it(tmp_path):
    from gradswitch.experiment.summary_file import SUMMARY_FORMAT, SummaryFileError, read, write

    path = tmp_path / "summary.json"
    runs = {"ring": {"median_s": 1.5, "repetitions_done": 3}, "netreduce": {"median_s": 1.0, "is_baseline": False}}
    assert write(path, runs) == runs
    raw = json.loads(path.read_text())
    assert raw["format"] == SUMMARY_FORMAT == 1 and read(path) == runs
    path.write_text(json.dumps(runs))  # written before summaries had a format: read as format 1
    assert read(path) == runs
    path.write_text(json.dumps({**raw, "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{path}: a compare's summary of format 2; this gradswitch "
                                                    "reads format 1")):
        read(path)
    with pytest.raises(SummaryFileError, match="a run named 'format'"):
        write(path, {"format": {"median_s": 1.0}})


def test_a_compare_refuses_a_run_named_format(tmp_path):
    from gradswitch.experiment.compare import load_spec
    from gradswitch.experiment.spec import SpecError

    spec = tmp_path / "c.toml"
    spec.write_text('[defaults]\nalgo = "ring"\n[[runs]]\nname = "format"\n[[runs]]\nname = "other"\n')
    with pytest.raises(SpecError, match=re.escape("a run named 'format': summary.json keeps its format under that "
                                                  "name")):
        load_spec(spec)


class _Node:
    switch_pid, pid = 101, 202

    def intfList(self) -> list[object]:
        return []


def test_a_networks_state_carries_its_format_and_its_readers_check_it(tmp_path):
    from types import SimpleNamespace

    from gradswitch.cli.shell import ShellError, target
    from gradswitch.net.bmv2 import SwitchPorts
    from gradswitch.net.network import STATE_FILE, STATE_FORMAT, GradNetwork, read_state
    from gradswitch.topology.generators import rack

    topo = rack(hosts=2)
    net = SimpleNamespace(topo=topo, net=SimpleNamespace(get=lambda name: _Node(), switches=[_Node()]),
                          ports={s.name: SwitchPorts(50051, 9090) for s in topo.switches},
                          reservation=SimpleNamespace(added=[]), patches=lambda: [], run_dir=tmp_path)
    GradNetwork._write_state(net)  # type: ignore[arg-type]
    path = tmp_path / STATE_FILE
    raw = json.loads(path.read_text())
    assert raw["format"] == STATE_FORMAT == 1 and read_state(path) == raw
    assert target(tmp_path, "s1").grpc_addr == "127.0.0.1:50051"
    path.write_text(json.dumps({k: v for k, v in raw.items() if k != "format"}))  # from before: format 1
    assert target(tmp_path, "s1").grpc_addr == "127.0.0.1:50051"
    path.write_text(json.dumps({**raw, "format": 2}))
    message = f"{path}: a network's state of format 2; this gradswitch reads format 1"
    with pytest.raises(FormatError, match=re.escape(message)):
        read_state(path)
    with pytest.raises(ShellError, match=re.escape(message)):
        target(tmp_path, "s1")


def test_the_netreduce_watchs_records_carry_their_format_and_their_reader_checks_them(tmp_path):
    from typing import Any, cast

    from gradswitch.experiment.netreduce_watch import (
        RECORDS_FILE,
        RECORDS_FORMAT,
        NetReduceWatch,
        PathRecord,
        read_records,
    )
    from gradswitch.hosts.fallback import ReductionPath

    watch = NetReduceWatch(cast(Any, None))
    watch.add_job(1, 4, tmp_path, 10.0)
    watch.records.append(PathRecord(1, ReductionPath.RING, "spine1", 1.0, 1.5))
    watch.stop()
    path = tmp_path / RECORDS_FILE
    raw = json.loads(path.read_text())
    assert raw["format"] == RECORDS_FORMAT == 1
    assert read_records(path) == [watch.records[0].to_dict()]
    path.write_text(json.dumps(raw["records"]))  # written before the file had a format (a bare list): format 1
    assert read_records(path) == [watch.records[0].to_dict()]
    path.write_text(json.dumps({**raw, "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{path}: a NetReduce watch's records of format 2; this "
                                                    "gradswitch reads format 1")):
        read_records(path)


def test_the_fallback_signal_carries_its_format_and_its_reader_checks_it(tmp_path):
    from gradswitch.hosts.fallback import SIGNAL_FORMAT, PathSignal, read_signal, signal_file, write_signal

    assert read_signal(tmp_path, 1) is None
    signal = PathSignal(1, "spine1", "spine1 down")
    write_signal(tmp_path, 1, signal)
    path = signal_file(tmp_path, 1)
    raw = json.loads(path.read_text())
    assert raw["format"] == SIGNAL_FORMAT == 1 and read_signal(tmp_path, 1) == signal
    path.write_text(json.dumps({**raw, "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{path}: a NetReduce path signal of format 2; this gradswitch "
                                                    "reads format 1")):
        read_signal(tmp_path, 1)
    path.write_text(json.dumps({k: v for k, v in raw.items() if k != "format"}))  # a file of one run: no old ones
    with pytest.raises(FormatError, match="without `format`"):
        read_signal(tmp_path, 1)


def test_the_chakra_groups_file_is_astra_sims_and_a_format_in_it_is_checked(tmp_path):
    from gradswitch.workload.chakra.groups import GROUPS_FORMAT, read_groups, write_groups
    from gradswitch.workload.graph import GraphError, ProcessGroup

    path = tmp_path / "t.groups.json"
    groups = [ProcessGroup("1", (0, 1)), ProcessGroup("2", (2, 3))]
    write_groups(path, groups)
    assert json.loads(path.read_text()) == {"1": [0, 1], "2": [2, 3]}  # ASTRA-sim's layout: no `format` key
    assert list(read_groups(path, 4).values()) == groups
    path.write_text(json.dumps({"format": GROUPS_FORMAT, "1": [0, 1], "2": [2, 3]}))
    assert list(read_groups(path, 4).values()) == groups
    path.write_text(json.dumps({"format": 2, "1": [0, 1]}))
    with pytest.raises(GraphError, match=re.escape(f"{path}: a process groups file of format 2; this gradswitch "
                                                   "reads format 1")):
        read_groups(path, 4)


def test_a_benchmarks_results_carry_their_format_and_the_tables_check_it(tmp_path, monkeypatch):
    from bench import common
    from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT, load

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "toolchain", lambda level="info": {"bmv2": {"logging_macros": False}})
    path = common.save("figures", {"rows": [1]}, engines=common.NO_ENGINE)
    raw = json.loads(path.read_text())
    assert raw["format"] == BENCHMARK_FORMAT == 1 and load(tmp_path, "figures.json")["rows"] == [1]
    assert json.loads(common.save("study", {"format": 1, "study": {}}, engines=common.NO_ENGINE).read_text()
                      )["format"] == 1  # its own
    path.write_text(json.dumps({k: v for k, v in raw.items() if k != "format"}))  # from before: format 1
    assert load(tmp_path, "figures.json")["rows"] == [1]
    path.write_text(json.dumps({**raw, "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{path}: a benchmark's results of format 2; this gradswitch "
                                                    "reads format 1")):
        load(tmp_path, "figures.json")


def test_a_graph_runs_job_file_and_its_ranks_timings_carry_their_formats_and_are_checked(tmp_path):
    from gradswitch.experiment.run_plan import plan_run
    from gradswitch.experiment.spec import spec_from_dict
    from gradswitch.hosts.graph_job import GRAPH_JOB_FORMAT, GraphJob, read_timing, timing_path, write_timing
    from gradswitch.workload.generators import collective_graph
    from gradswitch.workload.graph import CollectiveKind
    from gradswitch.workload.graph_timing import TIMING_FORMAT, GraphRun, NodeTiming

    cfg = plan_run(spec_from_dict({"algo": "ring", "workers": 2})).first
    job = GraphJob(cfg, collective_graph(CollectiveKind.ALL_REDUCE, 2, 1024))
    path = tmp_path / "job1.json"
    job.save(path)
    raw = json.loads(path.read_text())
    assert raw["format"] == GRAPH_JOB_FORMAT == 1 and GraphJob.load(path) == job
    path.write_text(json.dumps({k: v for k, v in raw.items() if k != "format"}))  # from before: format 1
    assert GraphJob.load(path) == job
    path.write_text(json.dumps({**raw, "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{path}: a graph run's job of format 2; this gradswitch reads "
                                                    "format 1")):
        GraphJob.load(path)
    run = GraphRun((NodeTiming(0, 0, "collective", 0.0, 1.0, CollectiveKind.ALL_REDUCE, "world", 1024, True),))
    write_timing(tmp_path, 0, run)
    assert json.loads(timing_path(tmp_path, 0).read_text())["format"] == TIMING_FORMAT == 1
    assert read_timing(tmp_path, 0) == run
    timing_path(tmp_path, 0).write_text(json.dumps({**run.to_dict(), "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{timing_path(tmp_path, 0)}: a graph rank's timings of format 2")):
        read_timing(tmp_path, 0)


def test_a_trace_runs_results_of_another_format_or_without_its_graph_is_refused_in_one_line(tmp_path):
    """A trace run's report is its results.json (one type, one reader): a format this code does not know is refused
    as every results.json's is, one that holds no `graph` (a training run's, or a format 1 file) names what is
    missing."""
    from gradswitch.experiment import results_file
    from gradswitch.experiment.graph_run import GraphReportError, read_graph_report

    path = tmp_path / "results.json"
    path.write_text(json.dumps({"format": results_file.FORMAT + 1, "name": "x", "summary": {}}))
    with pytest.raises(GraphReportError) as e:
        read_graph_report(path)
    assert str(e.value).startswith(f"{path}: format = {results_file.FORMAT + 1}: this gradswitch reads results.json "
                                   "formats 0, 1, 2;")
    path.write_text(json.dumps({"format": 1, "name": "x", "summary": {}}))
    with pytest.raises(GraphReportError, match="no `graph` in it: not a trace run's results"):
        read_graph_report(path)


def test_the_model_profiles_carry_their_format_and_their_reader_checks_it(tmp_path):
    from gradswitch.workload.compute import MODEL_FORMAT
    from gradswitch.workload.gradients import MODELS_DIR, model_names, read_profile

    assert model_names() and all(json.loads((MODELS_DIR / f"{m}.json").read_text())["format"] == MODEL_FORMAT == 1
                                 for m in model_names())
    source = (REPO_ROOT / "gradswitch/workload/models/generate.py").read_text()
    assert '"format": MODEL_FORMAT' in source  # the generator writes what the reader expects
    raw = json.loads((MODELS_DIR / "small-cnn.json").read_text())
    path = tmp_path / "old.json"
    path.write_text(json.dumps({k: v for k, v in raw.items() if k != "format"}))  # from before: format 1
    assert read_profile(path)["model"] == raw["model"]
    path.write_text(json.dumps({**raw, "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{path}: a model profile of format 2; this gradswitch reads "
                                                    "format 1")):
        read_profile(path)


def test_the_timelines_carry_their_format_beside_the_chrome_trace():
    from gradswitch.experiment.graph_timeline import graph_trace
    from gradswitch.experiment.timeline import TIMELINE_FORMAT
    from gradswitch.workload.graph import CollectiveKind
    from gradswitch.workload.graph_timing import GraphRun, NodeTiming

    run = GraphRun((NodeTiming(0, 0, "collective", 0.0, 1.0, CollectiveKind.ALL_REDUCE, "world", 1024, True),))
    trace = graph_trace(run, ["h1"], "seconds")
    assert trace["format"] == TIMELINE_FORMAT == 1 and trace["traceEvents"]
    source = (REPO_ROOT / "gradswitch/experiment/timeline.py").read_text()
    assert source.count('"format": TIMELINE_FORMAT') == 1  # chrome_trace's: timeline.json


def test_the_benchmarks_kept_repetitions_carry_their_format_and_are_checked(tmp_path):
    from bench.crossval_collectives import Store
    from gradswitch.experiment.crossval import Repetition
    from gradswitch.experiment.tables.reading import BENCHMARK_FORMAT

    store = Store(tmp_path)
    store.add("rack-n4-all_reduce", "bmv2", Repetition(1, 1.5, True, False, None))
    raw = json.loads(store.path.read_text())
    assert raw["format"] == BENCHMARK_FORMAT == 1 and Store(tmp_path).runs == store.runs
    store.path.write_text(json.dumps({k: v for k, v in raw.items() if k != "format"}))  # from before: format 1
    assert Store(tmp_path).runs == store.runs
    store.path.write_text(json.dumps({**raw, "format": 2}))
    with pytest.raises(FormatError, match=re.escape(f"{store.path}: a cross-validation's repetitions of format 2")):
        Store(tmp_path)
