"""Running gradswitch-sim on one run: write its configuration, start it, read its results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mininet_topos.topology import Topology
from ns3sim.build import status
from ns3sim.config import run_config
from ns3sim.results import SimResult, parse
from ns3sim.settings import SimSettings
from workers.config import JobConfig


class SimError(RuntimeError):
    """The simulator did not run, or stopped with an error: says why."""


def simulate(config: dict[str, Any], out_dir: Path, settings: SimSettings | None = None,
             mpi: bool = False) -> dict[str, Any]:
    """Run the simulator on a configuration document; its results document. Writes out_dir/sim-config.json,
    sim-results.json and sim.log (the simulator's stderr)."""
    s = status(mpi)
    missing = s.missing()
    if missing:
        raise SimError(missing)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = out_dir / "sim-config.json"
    res_path = out_dir / "sim-results.json"
    log_path = out_dir / "sim.log"
    cfg_path.write_text(json.dumps(config, indent=1))
    timeout = settings.wall_limit_s if settings is not None else None
    progress = settings is not None and settings.progress_s > 0
    with log_path.open("w") as log:
        try:
            proc = subprocess.Popen([str(s.binary), "--config", str(cfg_path), "--out", str(res_path)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            assert proc.stderr is not None
            for line in proc.stderr:
                log.write(line)
                if progress:
                    sys.stderr.write(line)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise SimError(f"the simulator ran past its wall-clock limit ({timeout} s); see {log_path}") from None
    if proc.returncode != 0:
        tail = log_path.read_text().strip().splitlines()[-5:]
        raise SimError(f"gradswitch-sim exited with status {proc.returncode}: " + " / ".join(tail))
    result: dict[str, Any] = json.loads(res_path.read_text())
    return result


def run(topology: Topology, jobs: list[JobConfig], settings: SimSettings, out_dir: Path, ranks: int = 1,
        hostfile: Path | None = None) -> SimResult:
    """Simulate the jobs on the topology: per-node results in the BMv2 workers' schema (docs/simulator.md).

    ranks > 1 runs the MPI build under mpirun on that many ranks (hostfile: mpirun's --hostfile, for a
    cluster); one rank needs no MPI."""
    if ranks < 1:
        raise SimError(f"ranks {ranks}: at least 1")
    if ranks > 1 or hostfile is not None:
        raise NotImplementedError("ranks > 1 (MPI) is being built on branch i18-mpi (issue 18)")
    return parse(simulate(run_config(topology, jobs, settings), out_dir, settings), jobs)


def tables(topology: Topology, jobs: list[JobConfig], settings: SimSettings, out_dir: Path) -> dict[str, Any]:
    """The simulator's forwarding tables and NetReduce aggregation trees for a run (for tests)."""
    s = status()
    missing = s.missing()
    if missing:
        raise SimError(missing)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = out_dir / "sim-config.json"
    cfg_path.write_text(json.dumps(run_config(topology, jobs, settings), indent=1))
    proc = subprocess.run([str(s.binary), "--config", str(cfg_path), "--tables"], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise SimError(f"gradswitch-sim --tables: {proc.stderr.strip()}")
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def constants() -> dict[str, Any]:
    """The config.p4 constants the built simulator was compiled with."""
    s = status()
    missing = s.missing()
    if missing:
        raise SimError(missing)
    proc = subprocess.run([str(s.binary), "--constants"], capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(proc.stdout)
    return out
