"""The same model sources build against ns-3 built with MPI (/opt/ns3-mpi, NS3_MPI defined, the mpi module
linked) and, as one MPI rank, simulate exactly what the one-process build does (issue 17 point 6;
partitioning over ranks is issue 18)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from mininet_topos.topologies import leafspine
from ns3sim.build import MPI_PREFIX, binary, build, status
from ns3sim.config import base_config
from ns3sim.settings import SimSettings
from tests.ns3.helpers import write_job

pytestmark = pytest.mark.ns3


def _mpi_missing() -> str | None:
    if not (MPI_PREFIX / "include" / "ns3" / "mpi-interface.h").exists():
        return f"{MPI_PREFIX} holds no ns-3 built with MPI (../shared/toolchain/install-ns3-mpi.sh)"
    if shutil.which("mpirun") is None:
        return "mpirun is not on PATH (Open MPI)"
    return None


@pytest.fixture(scope="module")
def mpi_binary():
    missing = _mpi_missing()
    if missing:
        if os.environ.get("GRADSWITCH_REQUIRE_NS3_MPI") == "1":
            pytest.fail(f"required but missing: {missing}")
        pytest.skip(missing)
    if status(mpi=True).missing():
        build(mpi=True)  # about a minute the first time
    return binary(mpi=True)


def test_the_mpi_build_links_the_mpi_module(mpi_binary):
    needed = subprocess.run(["readelf", "-d", str(mpi_binary)], capture_output=True, text=True, check=True).stdout
    assert "libns3.44-mpi.so" in needed and "libmpi" in needed
    assert "libns3.44-mpi.so" not in subprocess.run(["readelf", "-d", str(binary())], capture_output=True, text=True,
                                                    check=True).stdout


def test_one_rank_simulates_what_one_process_does(mpi_binary, tmp_path):
    topo = leafspine(2, 2, 2, bw_mbps=100)
    config = base_config(topo, SimSettings(), 10.0)
    config["jobs"] = [write_job(1, "h1", "h3", [1 << 18, 4096], iterations=2),
                      write_job(2, "h2", "h4", [1 << 18], iterations=2)]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    plain = subprocess.run([str(binary()), "--config", str(path)], capture_output=True, text=True, check=True)
    ranked = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "1", str(mpi_binary),
                             "--config", str(path)], capture_output=True, text=True, check=True, timeout=120)
    a, b = json.loads(plain.stdout), json.loads(ranked.stdout)
    assert a["jobs"] == b["jobs"] and a["switches"] == b["switches"] and a["events"] == b["events"]
    assert all(n["ok"] for job in a["jobs"] for n in job["nodes"])
