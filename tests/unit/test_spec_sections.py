"""A run's keys in sections ([network], [workload], [algorithm], [transport], [faults], [measurement]; spec.SECTIONS):
a sectioned spec is the flat one it spells out, the flat form (every spec before sections) is read as before, and a
key that is unknown, in the wrong section, given twice, or a compare spec's key in a run is one line naming where it
belongs, through spec_from_dict, load_experiment, load_spec and the command line (one `error:` line, status 2)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.shipped_specs import EXPERIMENTS
from gradswitch.experiment.spec import (
    RUN_KEYS,
    SECTION_CLASSES,
    SECTION_OF,
    SECTIONS,
    AlgorithmSpec,
    Check,
    ExperimentSpec,
    MeasurementSpec,
    NetworkSpec,
    SimOptions,
    SpecError,
    TransportSpec,
    flat_spec,
    load_experiment,
    read_toml,
    same_spec,
    spec_from_dict,
    spec_json,
)
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.roce.qp import Mode
from gradswitch.workload.job import Algorithm

FLAT = """\
name = "sr-spray"
algo = "ring"
workers = 8
topo = "leafspine"
bw_mbps = 20
transport = "sr"
workload = "synthetic"
size_bytes = 1048576
loss_pct = 1
faults = ["link-down:leaf1-spine1@2"]
iterations = 3
sim = { check = "digest" }
dlcp = { spray = true, loss_budget = 0.2 }
"""
SECTIONED = """\
name = "sr-spray"

[network]
workers = 8
topo = "leafspine"
bw_mbps = 20

[network.sim]
check = "digest"

[workload]
workload = "synthetic"
size_bytes = 1048576

[algorithm]
algo = "ring"

[transport]
transport = "sr"
dlcp = { spray = true, loss_budget = 0.2 }

[faults]
loss_pct = 1
faults = ["link-down:leaf1-spine1@2"]

[measurement]
iterations = 3
"""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradswitch.cli.main", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT)


def test_a_sectioned_file_is_the_flat_file_it_spells_out(tmp_path):
    flat, sectioned = tmp_path / "flat.toml", tmp_path / "sectioned.toml"
    flat.write_text(FLAT)
    sectioned.write_text(SECTIONED)
    spec = load_experiment(sectioned)
    assert spec == load_experiment(flat) != ExperimentSpec()
    assert (spec.network.workers, spec.transport.transport, spec.network.sim.check, spec.transport.dlcp.spray,
            spec.transport.dlcp.hosts.loss_budget,
            len(spec.faults.faults), spec.faults.loss_pct) == (8, "sr", "digest", True, 0.2, 1, 1.0)
    # a key, a value: `transport = "sr"` is the key, a table named transport the section
    assert flat_spec({"transport": "sr", "faults": [], "workload": "vgg16"}) == {
        "transport": "sr", "faults": [], "workload": "vgg16"}
    assert flat_spec({"transport": {"transport": "sr"}, "faults": {"faults": []}}) == {"transport": "sr", "faults": []}


def test_forms_mix_and_options_beside_a_sectioned_file_win_key_by_key(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('workers = 4\n[network.sim]\ncheck = "digest"\nlink_delay_us = 2.5\n')
    spec = load_experiment(path, {"sim": {"link_delay_us": 7.0}, "workers": 6})
    assert (spec.network.workers, spec.network.sim.check, spec.network.sim.link_delay_us) == (6, "digest", 7.0)


@pytest.mark.parametrize(("raw", "table", "says"), [
    ({"bww": 20}, "", "bww: no such key; did you mean bw_mbps (under [network])?"),
    ({"network": {"bww": 20}}, "", "network.bww: no such key; did you mean bw_mbps (under [network])?"),
    ({"size": 1024}, "", "size: no such key; did you mean size_bytes (under [workload])?"),
    ({"frobnicate": 1}, "", "frobnicate: no such key (a run's keys, section by section: docs/specs.md)"),
    ({"workload": {"workers": 4}}, "", "workers belongs under [network], not [workload]"),
    ({"measurement": {"name": "x"}}, "", "name belongs at the top of the run, not [measurement]"),
    ({"check": "digest"}, "", "check belongs in sim = { check = ... } under [network], not the top level"),
    ({"transport": {"loss_budget": 0.1}}, "",
     "loss_budget belongs in dlcp = { loss_budget = ... } under [transport], not [transport]"),
    ({"workers": 4, "network": {"workers": 8}}, "",
     "workers is given twice, at the top level and under [network]: keep one"),
    ({"network": {"workload": {"scale": 0.5}}}, "", "[network.workload]: sections do not nest; give [workload] beside "
     "[network]"),
    ({"faults": {"kind": "link-down"}}, "", "faults = { kind = ... }: faults is a list"),
    ({"repeat": 3}, "", "repeat is a compare spec's key (gradswitch compare), not an experiment's"),
    ({"repeat": 3}, "defaults", "repeat belongs at the top level of a compare spec (it applies to every run), not "
     "[defaults]"),
    ({"measurement": {"repeat": 3}}, "defaults", "repeat belongs at the top level of a compare spec (it applies to "
     "every run), not [defaults.measurement]"),
    ({"baselines": ["x"]}, "runs", "baselines belongs at the top level of a compare spec (it applies to every run), "
     "not a run ([[runs]])"),
    ({"workload": {"workers": 4}}, "defaults", "workers belongs under [defaults.network], not [defaults.workload]"),
    ({"sim": {"chek": "digest"}}, "", "sim.chek: no such key; did you mean check?"),
])
def test_a_key_in_the_wrong_place_is_one_line_saying_where_it_belongs(raw, table, says):
    with pytest.raises(SpecError) as e:
        spec_from_dict(raw, table=table)
    (line,) = str(e.value).splitlines()
    assert line.startswith(says), line


def test_every_problem_of_a_table_is_a_line_of_its_own():
    with pytest.raises(SpecError) as e:
        spec_from_dict({"bww": 1, "workload": {"workers": 4}, "sim": {"chek": "x"}})
    assert str(e.value).splitlines() == ["bww: no such key; did you mean bw_mbps (under [network])?",
                                         "workers belongs under [network], not [workload]"]


def test_every_shipped_spec_is_sectioned():
    """gradswitch/specs/ shows the form to write: every run key of [defaults], [matrix] and [[runs]] in its section
    (only a run's name at its top)."""
    for path in sorted(EXPERIMENTS.glob("*.toml")):
        raw = read_toml(path)
        tables = [("defaults", raw.get("defaults", {})), ("matrix", raw.get("matrix", {}))]
        tables += [("runs", r) for r in raw.get("runs", [])]
        for where, table in tables:
            flat = [k for k, v in table.items() if not (k in SECTIONS and isinstance(v, dict)) and k != "name"]
            assert not flat, f"{path.name} [{where}]: {flat} outside their sections " \
                             f"({', '.join(f'{k}: [{SECTION_OF.get(k)}]' for k in flat)})"
        assert load_spec(path).runs


def test_a_compare_spec_sectioned_and_flat_loads_the_same_runs_named_in_the_files_order(tmp_path):
    flat, sectioned = tmp_path / "flat.toml", tmp_path / "sectioned.toml"
    flat.write_text('[defaults]\nbw_mbps = 20\niterations = 2\n[matrix]\nalgo = ["ring", "ps"]\nworkers = [2, 4]\n'
                    '[[runs]]\nname = "sr"\ntransport = "sr"\nworkers = 3\n')
    sectioned.write_text('[defaults.network]\nbw_mbps = 20\n[defaults.measurement]\niterations = 2\n'
                         '[matrix.algorithm]\nalgo = ["ring", "ps"]\n[matrix.network]\nworkers = [2, 4]\n'
                         '[[runs]]\nname = "sr"\ntransport.transport = "sr"\nnetwork.workers = 3\n')
    a, b = load_spec(flat), load_spec(sectioned)
    assert a.runs == b.runs
    assert [r.label for r in b.runs] == ["ring-n2", "ring-n4", "ps-n2", "ps-n4", "sr"]


@pytest.mark.parametrize(("text", "says"), [
    ('[defaults]\nrepeat = 3\n[[runs]]\nname = "x"\n',
     "repeat belongs at the top level of a compare spec (it applies to every run), not [defaults]"),
    ('bw_mbps = 20\n[[runs]]\nname = "x"\n',
     "bw_mbps belongs under [defaults.network] (every run) or in a run, not at the top level of a compare spec"),
    ('[network]\nworkers = 2\n[[runs]]\nname = "x"\n',
     "[network] belongs under [defaults] ([defaults.network]: every run) or in a run, not at the top level"),
    ('[[runs]]\nname = "x"\nworkload.workers = 2\n', "run 'x': workers belongs under [runs.network], not "
     "[runs.workload]"),
    ('[[runs]]\nname = "x"\nbww = 2\n', "run 'x': bww: no such key; did you mean bw_mbps (under [runs.network])?"),
    ('[[runs]]\nname = "x"\nworkers = 2\nnetwork.workers = 4\n', "run 'x': workers is given twice, at a run "
     "([[runs]]) and under [runs.network]: keep one"),
    ('repeet = 3\n[[runs]]\nname = "x"\n', "repeet: no such key; did you mean repeat?"),
])
def test_gradswitch_compare_says_where_a_misplaced_key_belongs_in_one_line(tmp_path, text, says):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as e:
        load_spec(path)
    assert str(e.value) == f"{path}: {says}"
    result = run_cli("compare", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: {path}: {says}"]


@pytest.mark.parametrize(("text", "says"), [
    ("bww = 20\n", "bww: no such key; did you mean bw_mbps (under [network])?"),
    ("[workload]\nworkers = 4\n", "workers belongs under [network], not [workload]"),
    ("workers = 4\n[network]\nworkers = 8\n", "workers is given twice, at the top level and under [network]: keep one"),
    ("repeat = 3\nworkers = 4\n", "repeat is a compare spec's key (gradswitch compare), not an experiment's"),
    ('[network]\nsim = { chek = "digest" }\n', "sim.chek: no such key; did you mean check?"),
])
def test_gradswitch_experiment_spec_says_where_a_misplaced_key_belongs_in_one_line(tmp_path, text, says):
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as e:
        load_experiment(path)
    assert str(e.value) == f"{path}: {says}"
    result = run_cli("experiment", "--spec", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: {path}: {says}"]


def test_the_keys_a_sectioned_file_gave_are_its_fields(tmp_path):
    """What a trace's run refuses by name (`given`) sees a sectioned file's keys, not its sections."""
    assert set(flat_spec(read_toml(_write(tmp_path, SECTIONED)))) == {
        "name", "workers", "topo", "bw_mbps", "sim", "workload", "size_bytes", "algo", "transport", "dlcp",
        "loss_pct", "faults", "iterations"}


def _write(folder: Path, text: str) -> Path:
    path = folder / "run.toml"
    path.write_text(text)
    return path


def test_code_reads_a_spec_by_its_sections_and_builds_one_by_the_keys_flat_names():
    """ExperimentSpec holds its name and one object per section (SECTION_CLASSES, whose fields are SECTIONS); .of
    and .but place each key, by its flat name, in its section; an unknown key is refused with the nearest one."""
    spec = ExperimentSpec.of(algo=Algorithm.PS, workers=8, bw_mbps=20.0, transport=Mode.SR, workload="vgg16",
                             faults=(), iterations=3, name="x")
    assert (spec.name, spec.algorithm.algo, spec.network.workers, spec.network.bw_mbps, spec.transport.transport,
            spec.workload.workload, spec.measurement.iterations) == ("x", "ps", 8, 20.0, "sr", "vgg16", 3)
    assert spec == spec_from_dict({"algo": "ps", "workers": 8, "bw_mbps": 20, "transport": "sr",
                                   "workload": "vgg16", "iterations": 3, "name": "x"})
    changed = spec.but(workers=4, seed=9)
    assert (changed.network.workers, changed.measurement.seed, changed.algorithm) == (4, 9, spec.algorithm)
    assert spec.but(network=NetworkSpec(workers=2)).network == NetworkSpec(workers=2)  # a whole section
    assert [spec.get(k) for k in ("workers", "transport", "name")] == [8, "sr", "x"]
    for bad in (lambda: ExperimentSpec.of(bww=20), lambda: spec.but(bww=20), lambda: spec.get("bww")):
        with pytest.raises(TypeError, match="bww: no such key; did you mean bw_mbps"):
            bad()
    assert set(SECTIONS) == set(SECTION_CLASSES) == {"network", "workload", "algorithm", "transport", "faults",
                                                     "measurement"}
    assert all(SECTIONS[name] == tuple(f.name for f in fields(cls)) for name, cls in SECTION_CLASSES.items())


def test_a_section_checks_its_own_values_and_the_spec_what_concerns_several():
    assert NetworkSpec(workers=0).problems() == ["workers = 0: give at least 1 worker"]
    assert TransportSpec(window=0).problems() == ["window = 0: at least 1 packet in flight"]
    assert MeasurementSpec(iterations=0).problems() == ["iterations = 0: run at least 1 iteration"]
    assert AlgorithmSpec(netreduce_k=2).problems() == ["netreduce_k = 2: k of N is NetReduce's (set algo = netreduce)"]
    assert NetworkSpec(workers=200).problems() == []  # how many a ring holds depends on the algorithm: the spec's
    assert "a ring has at most 128 workers" in "\n".join(ExperimentSpec.of(workers=200).problems())


def test_files_keep_the_spec_flat_and_read_it_back():
    """results.json, summary.json and a trace run's record keep `spec` flat (every key at its top, the layout before
    sections): no format changes, and a saved spec reads back as the spec it was."""
    spec = spec_from_dict({"algo": "netreduce", "workers": 6, "sim": {"check": "digest"}, "topo": "leafspine",
                           "faults": ["link-down:leaf1-spine1@2"], "dlcp": {"priority": True, "loss_budget": 0.2},
                           "name": "saved"}, ExperimentSpec.of(sim=SimOptions(check=Check.EXACT)))
    saved = spec_json(spec)
    assert set(saved) == {*RUN_KEYS, *SECTION_OF} and saved["workers"] == 6 and saved["sim"]["check"] == "digest"
    assert "network" not in saved and same_spec(saved, spec) and not same_spec(saved, spec.but(workers=4))
    assert spec_from_dict(saved) == spec and spec_json(spec_from_dict(saved)) == saved
