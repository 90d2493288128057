"""What the wheel ships besides code (pyproject.toml's package-data) covers every file the code reads, the folders
are found the same way in a checkout, and the compiled program is what its stamp says p4c made of the sources.
tests/package/test_wheel.py builds the wheel and runs it from outside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import gradswitch.sim.build as sim_build
from gradswitch.cli import doctor, p4_compile
from gradswitch.cli.p4_compile import BuildError, BuildStamp, build_program, sources_digest, stale_reasons
from gradswitch.experiment.shipped_specs import EXPERIMENTS, shipped_spec
from gradswitch.protocol.paths import (
    BMV2_JSON,
    CHECKOUT,
    P4_STAMP,
    P4INFO,
    P4SRC,
    REPO_ROOT,
    PackageDataError,
    package_folder,
)
from gradswitch.workload.gradients import MODELS_DIR

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PACKAGE_DATA: dict[str, list[str]] = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"][
    "setuptools"]["package-data"]


def shipped(package: str, under: str = "") -> set[Path]:
    """The files setuptools puts in the wheel as package's data (its patterns, globbed in the checkout), those
    under its folder `under` only when given."""
    folder = REPO_ROOT.joinpath(*package.split("."))
    found = {p.resolve() for pattern in PACKAGE_DATA[package] for p in folder.glob(pattern) if p.is_file()}
    return {p for p in found if p.is_relative_to((folder / under).resolve())}


def test_the_checkout_is_a_checkout():
    assert CHECKOUT == REPO_ROOT


@pytest.mark.parametrize(("package", "name", "root_folder"), [
    ("gradswitch", "p4src", "gradswitch/p4src"), ("gradswitch", "specs", "gradswitch/specs"),
    ("gradswitch.sim", "ns3", "gradswitch/sim/ns3"), ("gradswitch.workload", "models", "gradswitch/workload/models"),
])
def test_shipped_folders_are_the_checkouts_folders(package, name, root_folder):
    assert package_folder(package, name) == REPO_ROOT / root_folder


def test_a_missing_folder_is_one_line_naming_it():
    with pytest.raises(PackageDataError, match=r"gradswitch.protocol/nothing: not a folder"):
        package_folder("gradswitch.protocol", "nothing")


def test_the_wheel_ships_the_p4_program_and_its_build():
    needed = {p.resolve() for p in P4SRC.rglob("*.p4")} | {BMV2_JSON, P4INFO, P4_STAMP}
    assert needed - shipped("gradswitch", "p4src") == set()


def test_the_wheel_ships_the_simulators_sources():
    needed = {p.resolve() for p in sim_build.sources() if p != sim_build.CONFIG_P4}
    assert len(needed) > 20
    assert needed - shipped("gradswitch.sim", "ns3") == set()


def test_the_wheel_ships_the_specs_and_the_model_profiles():
    assert {p.resolve() for p in EXPERIMENTS.glob("*.toml")} - shipped("gradswitch", "specs") == set()
    assert {p.resolve() for p in MODELS_DIR.glob("*.json")} - shipped("gradswitch.workload.models") == set()
    assert shipped_spec("baselines") == EXPERIMENTS / "baselines.toml" == shipped_spec("baselines.toml")
    assert shipped_spec("no-such-spec") is None


def test_the_committed_program_is_what_its_stamp_says():
    assert stale_reasons() == []
    assert BuildStamp.read().p4c_version.count(".") >= 2


def test_a_changed_source_makes_the_program_stale(tmp_path):
    copy = tmp_path / "p4src"
    shutil.copytree(P4SRC, copy)
    json_path, p4info_path = copy / "build" / BMV2_JSON.name, copy / "build" / P4INFO.name
    stamp = copy / "build" / P4_STAMP.name
    assert stale_reasons(stamp, json_path, p4info_path, copy) == []
    assert sources_digest(copy) == sources_digest()
    config = copy / "include" / "config.p4"
    config.write_text(config.read_text() + "\n// changed\n")
    assert any("P4 sources" in r for r in stale_reasons(stamp, json_path, p4info_path, copy))
    p4info_path.write_text(p4info_path.read_text() + "\n")
    assert any(P4INFO.name in r for r in stale_reasons(stamp, json_path, p4info_path, copy))
    stamp.write_text(json.dumps({"format": 99}))
    assert any("not a build stamp" in r for r in stale_reasons(stamp, json_path, p4info_path, copy))
    json_path.unlink()
    assert any("missing" in r for r in stale_reasons(stamp, json_path, p4info_path, copy))


def test_an_installed_package_does_not_build_into_site_packages(monkeypatch):
    monkeypatch.setattr(p4_compile, "CHECKOUT", None)
    with pytest.raises(BuildError, match="belongs to the installed package") as e:
        build_program()
    assert len(str(e.value).splitlines()) == 1


def test_an_installed_package_builds_the_simulator_in_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(sim_build, "CHECKOUT", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert sim_build.build_dir() == tmp_path / "gradswitch" / f"ns3-{sim_build.sources_digest()[:16]}"
    assert sim_build.build_dir(mpi=True).name.startswith("ns3-mpi-")
    assert sim_build.binary().parent == sim_build.build_dir()
    built = sim_build.build_dir()
    for program in (sim_build.BINARY_NAME, sim_build.QP_SCRIPT_NAME):
        (built / program).parent.mkdir(parents=True, exist_ok=True)
        (built / program).touch()
    os.utime(built / sim_build.BINARY_NAME, (0, 0))  # older than every source: named by their hash, still current
    assert sim_build.status().built and sim_build.status().missing() is None
    shutil.rmtree(built)
    monkeypatch.setattr(sim_build, "NLOHMANN_JSON", tmp_path / "no-such-json.hpp")
    monkeypatch.setattr("gradswitch.sim.build.shutil.which",
                        lambda tool: None if tool == "cmake" else "/usr/bin/" + tool)
    assert sim_build.status().missing() == (f"building the ns-3 simulator needs cmake, {tmp_path}/no-such-json.hpp "
                                            "(nlohmann-json3-dev): apt install cmake g++ nlohmann-json3-dev")
    monkeypatch.setattr(sim_build, "wheel_prefix", lambda: None)
    missing = sim_build.status().missing()
    assert missing == f"the ns-3 simulator needs the ns3 wheel: pip install --no-deps {sim_build.WHEEL}"


def test_a_checkout_builds_the_simulator_in_build_ns3():
    assert sim_build.build_dir() == REPO_ROOT / "build" / "ns3"
    assert sim_build.build_dir(mpi=True) == REPO_ROOT / "build" / "ns3-mpi"


def test_doctor_json_is_the_report(monkeypatch):
    report = doctor.doctor()
    raw = json.loads(report.to_json())
    assert raw["format"] == doctor.REPORT_FORMAT
    assert raw["ok"] == report.ok
    program = next(c for c in raw["checks"] if c["name"] == "compiled program")
    assert program["ok"] and program["required"]
    monkeypatch.setattr(doctor, "program_checks",
                        lambda: [doctor.Check("compiled program", False, "stale", "every switch", required=True)])
    assert not doctor.doctor().ok


def test_compare_finds_a_shipped_spec_by_name_from_any_directory(tmp_path, monkeypatch):
    from gradswitch.experiment.compare import load_spec

    monkeypatch.chdir(tmp_path)  # no gradswitch/specs/ here: the name alone finds the shipped file
    assert load_spec(Path("netreduce")).runs and load_spec(Path("gradswitch/specs/netreduce.toml")).runs
