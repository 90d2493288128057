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
