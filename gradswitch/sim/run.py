"""Running gradswitch-sim on one run: write its configuration, start it, read its results."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradswitch.formats import check_format
from gradswitch.sim import instructions
from gradswitch.sim.ranks import MpiLaunch, MpiSync, PartitionError, partition
from gradswitch.sim.results import RESULTS_FORMAT, SimResult, parse
from gradswitch.sim.sim_config import run_config
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.model import Topology
from gradswitch.workload.job import JobConfig

if TYPE_CHECKING:
    from gradswitch.sim.build import Status


class SimError(RuntimeError):
    """The simulator did not run, or stopped with an error: says why."""


def built(mpi: bool = False) -> Status:
    """The simulator, ready to run (an installed package builds it into the user's cache on first use)."""
    # Imported here: `python -m gradswitch.sim.build` would otherwise find itself imported already by the package.
    from gradswitch.sim.build import BuildError, ensure_built

    try:
        s = ensure_built(mpi)
    except BuildError as e:
        raise SimError(str(e)) from None
    missing = s.missing()
    if missing:
        raise SimError(missing)
    return s


def mpirun_command(launch: MpiLaunch, binary: Path) -> list[str]:
    """mpirun starting the MPI build on launch.ranks ranks: here (oversubscribed where the ranks outnumber the
    cores: Open MPI then yields the core while a rank waits) or on a cluster's hostfile."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise SimError("mpirun is not on PATH: install Open MPI (apt install openmpi-bin libopenmpi-dev) to run on "
                       "more than one rank")
    cmd = [mpirun, "-np", str(launch.ranks)]
    if launch.hostfile is not None:
        cmd += ["--hostfile", str(launch.hostfile)]
    elif launch.ranks > (os.cpu_count() or 1):
        cmd += ["--oversubscribe"]
    if os.geteuid() == 0:
        cmd += ["--allow-run-as-root"]
    return [*cmd, str(binary)]


def stop(proc: subprocess.Popen[str]) -> None:
    """End the simulator: mpirun passes SIGTERM on to its ranks; SIGKILL if that is not enough."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def simulate(config: dict[str, Any], out_dir: Path, settings: SimSettings | None = None,
             mpi: bool = False, launch: MpiLaunch | None = None) -> dict[str, Any]:
    """Run the simulator on a configuration document; its results document. Writes out_dir/sim-config.json,
    sim-results.json and sim.log (the simulator's stderr). `launch`: under mpirun on that many ranks (the
    configuration's `mpi` section says which node is on which); `mpi`: the MPI build as one process. With
    GRADSWITCH_SIM_INSTRUCTIONS set (gradswitch/sim/instructions.py) the simulator's user-space instructions are
    counted, into out_dir/sim-instructions.json."""
    try:
        counter = instructions.counter_from_env()
    except instructions.CounterError as e:
        raise SimError(str(e)) from None
    s = built(mpi or launch is not None)
    command = [str(s.binary)] if launch is None else mpirun_command(launch, s.binary)
    out_dir.mkdir(parents=True, exist_ok=True)
    uncounted = None if counter is None else (
        "not counted under mpirun (one rank's process is counted, not several)" if launch is not None
        else instructions.missing_tool(counter))
    if counter is not None and uncounted is None:
        command = [*instructions.launcher(counter, out_dir), *command]
    cfg_path = out_dir / "sim-config.json"
    res_path = out_dir / "sim-results.json"
    log_path = out_dir / "sim.log"
    cfg_path.write_text(json.dumps(config, separators=(",", ":")))  # a machine file: compact
    timeout = settings.wall_limit_s if settings is not None else None
    progress = settings is not None and settings.progress_s > 0
    with log_path.open("w") as log:
        try:
            proc = subprocess.Popen([*command, "--config", str(cfg_path), "--out", str(res_path)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            assert proc.stderr is not None
            for line in proc.stderr:
                log.write(line)
                if progress:
                    sys.stderr.write(line)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            raise SimError(f"the simulator ran past its wall-clock limit ({timeout} s); see {log_path}") from None
    if counter is not None:
        instructions.write(out_dir, instructions.InstructionCount(counter, None, uncounted) if uncounted is not None
                           else instructions.counted(counter, out_dir))
    if proc.returncode != 0:
        lines = log_path.read_text().strip().splitlines()
        # the simulator's own error line (under mpirun, before MPI's report of the abort), else the last lines
        errors = [line for line in lines if line.startswith("error: ")]
        said = errors[:1] if errors else lines[-5:]
        raise SimError(f"gradswitch-sim exited with status {proc.returncode}: " + " / ".join(said))
    if not res_path.exists():
        raise SimError(f"gradswitch-sim wrote no {res_path}; see {log_path}")
    return check_format(json.loads(res_path.read_text()), res_path, "simulator's results", RESULTS_FORMAT)


def run(topology: Topology, jobs: list[JobConfig], settings: SimSettings, out_dir: Path, ranks: int = 1,
        hostfile: Path | None = None, sync: MpiSync = MpiSync.BARRIER) -> SimResult:
    """Simulate the jobs on the topology: per-node results in the BMv2 workers' schema (docs/simulator.md).

    ranks > 1 runs the MPI build (build/ns3-mpi) under mpirun on that many ranks, the topology cut by
    gradswitch.sim.ranks.partition (hostfile: mpirun's --hostfile, for a cluster; sync: barrier or null messages);
    the results are the same document one rank writes. One rank needs no MPI."""
    if ranks < 1:
        raise SimError(f"ranks = {ranks}: give 1 (one process, the default) or more (MPI)")
    if hostfile is not None and ranks == 1:
        raise SimError(f"hostfile {hostfile}: only for a run on more than one rank (give ranks)")
    if hostfile is not None and not hostfile.is_file():
        raise SimError(f"hostfile {hostfile}: no such file")
    config = run_config(topology, jobs, settings)
    launch = None
    if ranks > 1:
        try:
            config["mpi"] = partition(topology, jobs, ranks).config(sync)
        except PartitionError as e:
            raise SimError(str(e)) from None
        launch = MpiLaunch(ranks, hostfile)
    return parse(simulate(config, out_dir, settings, launch=launch), jobs)


def read(out_dir: Path, jobs: list[JobConfig]) -> SimResult:
    """The result of a run that finished before, from what it left in out_dir (sim-results.json): what `run`
    returned then, for reports that gained a figure since (the simulator is not run again)."""
    path = out_dir / "sim-results.json"
    try:
        raw: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SimError(f"{path}: no simulator results to read ({e})") from None
    return parse(raw, jobs, path)


def tables(topology: Topology, jobs: list[JobConfig], settings: SimSettings, out_dir: Path) -> dict[str, Any]:
    """The simulator's forwarding tables and NetReduce aggregation trees for a run (for tests)."""
    return config_tables(run_config(topology, jobs, settings), out_dir)


def config_tables(config: Mapping[str, Any], out_dir: Path) -> dict[str, Any]:
    """The simulator's forwarding tables and NetReduce aggregation trees for a configuration it would run (a graph
    run's too: gradswitch.sim.graph_run.config; for tests)."""
    s = built()
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = out_dir / "sim-config.json"
    cfg_path.write_text(json.dumps(config, separators=(",", ":")))
    proc = subprocess.run([str(s.binary), "--config", str(cfg_path), "--tables"], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise SimError(f"gradswitch-sim --tables: {proc.stderr.strip()}")
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def constants() -> dict[str, Any]:
    """The config.p4 constants the built simulator was compiled with."""
    s = built()
    proc = subprocess.run([str(s.binary), "--constants"], capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(proc.stdout)
    return out
