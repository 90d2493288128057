"""The default engine and what records it: a spec that names no engine runs on the graph engine (the loop stays
selectable, and refuses a trace), and every benchmark's JSON records the engines that ran its jobs (`engines`,
gradswitch/experiment/tables/reading.py), a file from before the field reading as the loop."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from bench import common
from gradswitch.experiment import results_file
from gradswitch.experiment.spec import Engine, ExperimentSpec, load_experiment, same_spec, spec_from_dict, spec_json
from gradswitch.experiment.tables.reading import ENGINES_BEFORE, engines_of, load
from gradswitch.formats import FormatError
from gradswitch.protocol.paths import REPO_ROOT

# bench/ files that write a JSON with `format` themselves, not into bench/results/: a resumable store of
# repetitions under --out, a kept simulator run
NOT_RESULTS = {"crossval_collectives", "sim_faults"}


def test_a_spec_that_names_no_engine_runs_on_the_graph_engine(tmp_path: Path) -> None:
    assert ExperimentSpec().algorithm.engine == Engine.GRAPH
    assert spec_from_dict({"algo": "ring", "workers": 4}).algorithm.engine == Engine.GRAPH
    toml = tmp_path / "run.toml"
    toml.write_text('[network]\nworkers = 4\n[algorithm]\nalgo = "netreduce"\n')
    assert load_experiment(toml).algorithm.engine == Engine.GRAPH
    toml.write_text('[network]\nworkers = 4\n[algorithm]\nalgo = "netreduce"\nengine = "loop"\n')
    assert load_experiment(toml).algorithm.engine == Engine.LOOP  # the loop stays selectable
    assert spec_from_dict({"workers": 4, "engine": "loop"}).problems() == []


def test_the_loop_refuses_a_trace_and_the_graph_takes_it() -> None:
    trace = ExperimentSpec.of(workload_et="/nonexistent/traces")
    assert trace.engine_problems() == []
    (line,) = trace.but(engine=Engine.LOOP).engine_problems()
    assert line.startswith("engine = loop with workload_et: a trace always runs on the graph engine")


def test_a_benchmarks_json_records_its_engines_and_an_older_one_reads_as_the_loop(tmp_path: Path, monkeypatch
                                                                                  ) -> None:
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "toolchain", lambda level="info": {"bmv2": {"logging_macros": False}})
    specs = [ExperimentSpec(), ExperimentSpec.of(engine="loop", name="on-the-loop")]
    path = common.save("both", {"rows": []}, engines=common.spec_engines(specs))
    raw = json.loads(path.read_text())
    assert raw["engines"] == ["graph", "loop"]
    assert engines_of(load(tmp_path, "both.json"), path) == (Engine.GRAPH, Engine.LOOP)
    default = common.save("default", {"rows": []}, engines=common.spec_engines([ExperimentSpec()]))
    assert engines_of(json.loads(default.read_text()), default) == (Engine.GRAPH,)
    none = common.save("none", {"rows": []}, engines=common.NO_ENGINE)
    assert engines_of(json.loads(none.read_text()), none) == ()
    path.write_text(json.dumps({k: v for k, v in raw.items() if k != "engines"}))  # written before the field
    assert engines_of(load(tmp_path, "both.json"), path) == ENGINES_BEFORE == (Engine.LOOP,)
    for bad in ("graph", ["graph", "gpu"], [1]):
        path.write_text(json.dumps({**raw, "engines": bad}))
        with pytest.raises(FormatError, match=re.escape(f"{path}: `engines` is {bad!r}: a list of engines (loop, "
                                                        "graph) expected")):
            load(tmp_path, "both.json")


def test_every_benchmark_that_writes_results_states_its_engines() -> None:
    """save() takes `engines` by keyword (mypy holds every call to it); a benchmark that writes its own document
    with BENCHMARK_FORMAT puts engines_field in it."""
    benches = sorted((REPO_ROOT / "bench").glob("*.py"))
    saving = 0
    for path in benches:
        text = path.read_text()
        tree = ast.parse(text)
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            if isinstance(call.func, ast.Name) and call.func.id == "save":
                saving += 1
                assert "engines" in {k.arg for k in call.keywords}, f"{path.name}:{call.lineno}: save without engines"
        if '"format": BENCHMARK_FORMAT' in text and path.stem not in NOT_RESULTS and path.stem != "common":
            assert "engines_field(" in text, f"{path.name} writes a benchmark's JSON without `engines`"
    assert saving >= 20


def test_every_published_results_json_reads() -> None:
    """Every JSON under bench/results/ passes its reader's checks: a benchmark's (format, engines), or a run's
    results.json (its own format: those a document shows as `gradswitch experiment`'s output, `<!-- result: -->`)."""
    results = REPO_ROOT / "bench" / "results"
    shown = {m for doc in (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "tutorial.md")
             for m in re.findall(r"<!-- result: bench/results/([\w.-]+\.json) -->", doc.read_text())}
    assert "first-experiment.json" in shown
    for path in sorted(results.glob("*.json")):
        if path.name in shown:
            results_file.read(path)
        else:
            engines_of(load(results, path.name), path)


def test_a_saved_spec_without_an_engine_ran_on_the_loop() -> None:
    """A compare resumes a run whose saved spec is the spec's; one saved before `engine` existed ran on the loop,
    so it is the loop's spec, not today's default's (which runs it again on the graph engine)."""
    spec = ExperimentSpec.of(workers=4, name="old")
    saved = {k: v for k, v in spec_json(spec.but(engine=Engine.LOOP)).items() if k != "engine"}
    assert not same_spec(saved, spec)
    assert same_spec(saved, spec.but(engine=Engine.LOOP))
    assert same_spec(spec_json(spec), spec)
