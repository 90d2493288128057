"""The simulator's configuration is strict: gradswitch-sim reads the `format` it knows, requires every value
(the defaults are Python's alone: gradswitch/sim/sim_config.py writes them all), and refuses a key it does not know,
each with one line naming the file and the value, before anything is simulated (docs/simulator.md
"Configuration"). The same holds for gs-qp-script's scenarios."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.sim.build import binary, qp_script_binary
from gradswitch.sim.ranks import MpiSync
from gradswitch.sim.sim_config import FORMAT, run_config
from gradswitch.sim.sim_settings import Background, DlcpSwitch, SimSettings, TensorLightsSetting
from gradswitch.topology.faults import parse_fault
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.job import Algorithm, Crash, Device, Emulation
from tests.ns3.helpers import background_of, spec_jobs
from tests.ns3.qp_script import Message, Scenario, TransportSettings

pytestmark = pytest.mark.ns3

# Sections that may be left out (the feature is off); every other key of the document is required.
OPTIONAL = {"loss", "background", "tensorlights", "ecmp_probes", "mpi", "switch.faults", "jobs[0].reductions",
            "jobs[0].training", "jobs[0].dlcp", "jobs[0].crash", "fault_schedule"}
# Objects whose keys are names (switches, hosts), not keys of the format.
MAPS = {"switch.dlcp_thresholds", "mpi.rank_of"}


def full_config() -> dict[str, Any]:
    """A configuration with every section gradswitch.sim writes: PS jobs that train, colocated servers under
    TensorLights, DLCP with a crash on job 1, background TCP, loss, an MPI partition, faults of every kind, the test
    fault and an ECMP probe."""
    spec = ExperimentSpec.of(algo=Algorithm.PS, workers=2, workload="resnet50", scale=0.002, bw_mbps=20, iterations=2,
                             emulate=Emulation(link_gbps=10, device=Device.V100, batch=32), jobs=2,
                             colocate_servers=True, tensorlights=True, background_flows=2)
    topo, cfgs = spec_jobs(spec)
    cfgs[0] = replace(cfgs[0], dlcp=DlcpPolicy(drop=True), crash=Crash(1, 0))
    servers = tuple((cfg.job_id, s.node_id) for cfg in cfgs for s in cfg.servers)
    background = background_of(spec)
    assert background is not None
    settings = SimSettings(dlcp=DlcpSwitch(priority=True, drop=True), loss_pct=1.0,
                           background=Background(background.sender, background.receiver, flows=2),
                           tensorlights=TensorLightsSetting(cfgs[0].servers[0].host, servers, rotate_s=0.01),
                           faults=tuple(parse_fault(f) for f in (
                               "switch-crash:s1@0.5,restart=1", "link-flap:h1-s1@0.1", "worker-crash:1@0.2",
                               "slow-worker:0@0,factor=2,rate=5")))
    config = run_config(topo, cfgs, settings)
    names = [h.name for h in topo.hosts] + [s.name for s in topo.switches]
    config["mpi"] = {"ranks": 2, "sync": str(MpiSync.BARRIER), "rank_of": {n: i % 2 for i, n in enumerate(names)}}
    config["switch"]["faults"] = {"netreduce_double_add": 0}
    config["ecmp_probes"] = [{"switch": "s1", "src": "h2", "dst": "h3", "protocol": 17, "sport": 1, "dport": 4791}]
    return config


def check(config: dict[str, Any], tmp_path: Path, name: str = "run.json") -> tuple[int, str, Path]:
    """gradswitch-sim --check on the configuration: its exit status, its stderr, the file."""
    path = tmp_path / name
    path.write_text(json.dumps(config))
    proc = subprocess.run([str(binary()), "--config", str(path), "--check"], capture_output=True, text=True,
                          timeout=60)
    return proc.returncode, proc.stderr.strip(), path


def keys(doc: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any], str]]:
    """Every key of every object of the format (the first of each list): its path, its object and its name."""
    for key, value in doc.items():
        where = f"{path}.{key}" if path else key
        yield where, doc, key
        if where in MAPS:
            continue
        if isinstance(value, dict):
            yield from keys(value, where)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            yield from keys(value[0], f"{where}[0]")


def test_every_section_python_writes_is_taken(tmp_path):
    config = full_config()
    assert {"format", "scheduler", "wire", "loss", "background", "tensorlights", "mpi"} <= set(config)
    job = config["jobs"][0]
    assert {"training", "dlcp", "crash"} <= set(job) and "rwnd_bytes" in config["background"]
    status, stderr, _ = check(config, tmp_path)
    assert (status, stderr) == (0, "")


def test_another_format_is_refused_naming_the_file_the_value_and_the_format_read(tmp_path):
    config = full_config()
    config["format"] = FORMAT + 1
    status, stderr, path = check(config, tmp_path)
    assert status == 2
    assert stderr == (f"error: {path}: format = {FORMAT + 1}: this gradswitch-sim reads format {FORMAT} "
                      "(write the configuration with the gradswitch.sim of its checkout)")
    del config["format"]
    assert check(config, tmp_path)[1] == f"error: {path}: format is missing"


def test_an_unknown_key_at_the_top_is_refused_with_the_keys_known(tmp_path):
    config = full_config()
    config["seeed"] = 3
    status, stderr, path = check(config, tmp_path)
    assert status == 2 and len(stderr.splitlines()) == 1
    prefix = f'error: {path}: unknown key "seeed" (known: '
    assert stderr.startswith(prefix) and stderr.endswith(")")
    known = stderr[len(prefix):-1].split(", ")
    assert set(known) == set(full_config())  # the known keys are the ones gradswitch.sim writes, and only those


def test_an_unknown_key_in_a_job_is_refused_naming_where_it_was(tmp_path):
    config = full_config()
    config["jobs"][1]["transport"]["rto_mn"] = 0.5
    status, stderr, path = check(config, tmp_path)
    assert status == 2
    transport = ", ".join(sorted(config["jobs"][1]["transport"].keys() - {"rto_mn"}))
    assert stderr == f'error: {path}: jobs[1].transport: unknown key "rto_mn" (known: {transport})'
    config = full_config()
    config["jobs"][0]["training"]["ops"][3]["weight"] = 1
    assert check(config, tmp_path)[1].startswith(f'error: {path}: jobs[0].training.ops[3]: unknown key "weight"')


def test_a_missing_value_is_refused_naming_it(tmp_path):
    config = full_config()
    del config["switch"]["flowlet_gap_s"]
    status, stderr, path = check(config, tmp_path)
    assert (status, stderr) == (2, f"error: {path}: switch.flowlet_gap_s is missing")


def test_every_value_is_required_and_only_sections_are_optional(tmp_path):
    """No default on the C++ side: leaving out any key but an optional section is refused, naming it."""
    config = full_config()
    tried = []
    for where, obj, key in list(keys(config)):
        value = obj.pop(key)
        status, stderr, path = check(config, tmp_path)
        obj[key] = value
        if where in OPTIONAL:
            assert "is missing" not in stderr, (where, stderr)
        else:
            assert (status, stderr) == (2, f"error: {path}: {where} is missing"), where
        tried.append(where)
    assert len(tried) > 80 and "jobs[0].transport.rto_max_s" in tried and "background.min_rto_s" in tried


def test_a_wrong_type_is_refused_naming_the_value(tmp_path):
    config = full_config()
    config["jobs"][0]["iterations"] = "two"
    status, stderr, path = check(config, tmp_path)
    assert (status, stderr) == (2, f'error: {path}: jobs[0].iterations = "two": an integer of at least 0')


def test_a_transport_scenario_is_as_strict(tmp_path):
    doc = Scenario("strict", TransportSettings(), (Message(4096),)).to_json()
    doc["transport"]["rto"] = 1.0
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run([str(qp_script_binary()), "--scenario", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith('error: scenario.transport: unknown key "rto" (known: ')
    del doc["transport"]["rto"], doc["wire"]["sack"]
    path.write_text(json.dumps(doc))
    proc = subprocess.run([str(qp_script_binary()), "--scenario", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert (proc.returncode, proc.stderr.strip()) == (2, "error: scenario.wire.sack is missing")
