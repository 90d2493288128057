"""The same model sources build against ns-3 built with MPI (/opt/ns3-mpi, NS3_MPI defined, the mpi module
linked) and, as one MPI rank, simulate exactly what the one-process build does; what a
run on more ranks than it was configured for (or one built without MPI) says."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from gradswitch.sim.build import binary
from gradswitch.sim.ranks import MpiSync
from gradswitch.sim.sim_config import base_config
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.generators import leafspine
from tests.ns3.helpers import write_job

pytestmark = [pytest.mark.ns3, pytest.mark.ns3_mpi]


def _mpirun(np: int) -> list[str]:
    return [shutil.which("mpirun") or "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np)]


def _config(tmp_path, ranks: int = 1, rank_of: dict[str, int] | None = None):
    topo = leafspine(2, 2, 2, bw_mbps=100)
    config = base_config(topo, SimSettings(), 10.0)
    config["jobs"] = [write_job(1, "h1", "h3", [1 << 18, 4096], iterations=2),
                      write_job(2, "h2", "h4", [1 << 18], iterations=2)]
    if ranks > 1:
        config["mpi"] = {"ranks": ranks, "sync": str(MpiSync.BARRIER), "rank_of": rank_of or {}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    return path


def test_the_mpi_build_links_the_mpi_module():
    needed = subprocess.run(["readelf", "-d", str(binary(mpi=True))], capture_output=True, text=True, check=True).stdout
    assert "libns3.44-mpi.so" in needed and "libmpi" in needed
    assert "libns3.44-mpi.so" not in subprocess.run(["readelf", "-d", str(binary())], capture_output=True, text=True,
                                                    check=True).stdout


def test_one_rank_simulates_what_one_process_does(tmp_path):
    path = _config(tmp_path)
    plain = subprocess.run([str(binary()), "--config", str(path)], capture_output=True, text=True, check=True)
    ranked = subprocess.run([*_mpirun(1), str(binary(mpi=True)), "--config", str(path)], capture_output=True,
                            text=True, check=True, timeout=120)
    a, b = json.loads(plain.stdout), json.loads(ranked.stdout)
    assert a["jobs"] == b["jobs"] and a["switches"] == b["switches"] and a["events"] == b["events"]
    assert all(n["ok"] for job in a["jobs"] for n in job["nodes"])
    assert "mpi" not in b  # one rank: ns-3's sequential simulator, no MPI


ALL_ON_ONE_SIDE = {"h1": 0, "h2": 0, "leaf1": 0, "spine1": 0, "h3": 1, "h4": 1, "leaf2": 1, "spine2": 1}


def test_ranks_and_the_mpi_world_must_agree(tmp_path):
    two = _config(tmp_path, 2, ALL_ON_ONE_SIDE)
    alone = subprocess.run([str(binary(mpi=True)), "--config", str(two)], capture_output=True, text=True, timeout=60)
    assert alone.returncode == 2 and "mpi.ranks = 2 but this runs on 1 MPI rank(s)" in alone.stderr
    plain = subprocess.run([str(binary()), "--config", str(two)], capture_output=True, text=True, timeout=60)
    assert plain.returncode == 2 and "built without MPI" in plain.stderr
    one = _config(tmp_path)
    twice = subprocess.run([*_mpirun(2), str(binary(mpi=True)), "--config", str(one)], capture_output=True, text=True,
                           timeout=60)
    assert twice.returncode != 0 and "mpi.ranks = 1 but this runs on 2 MPI ranks" in twice.stderr


def test_a_bad_partition_names_itself(tmp_path):
    missing = {k: v for k, v in ALL_ON_ONE_SIDE.items() if k != "spine2"}
    proc = subprocess.run([*_mpirun(2), str(binary(mpi=True)), "--config", str(_config(tmp_path, 2, missing))],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "mpi.rank_of: spine2 has no rank" in proc.stderr
    beyond = dict(ALL_ON_ONE_SIDE, spine2=2)
    proc = subprocess.run([*_mpirun(2), str(binary(mpi=True)), "--config", str(_config(tmp_path, 2, beyond))],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "mpi.rank_of.spine2 = 2: ranks are 0..1" in proc.stderr
