"""A user's mistake on the command line gets one `error:` line naming the value, what is allowed
and what to do, before anything starts: no traceback (unless -v), exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.topology.generators import MAX_HOSTS_PER_EDGE

GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]


def run(*args: str, env_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = None
    if env_dir is not None:
        import os

        env = dict(os.environ, GRADSWITCH_RUNTIME_DIR=str(env_dir))
    return subprocess.run([*GRADSWITCH, *args], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, env=env)


@pytest.mark.parametrize(("args", "says"), [
    (["experiment", "--workers", "0"], "workers = 0: give at least 1 worker"),
    (["experiment", "--algo", "netreduce", "--workers", "1"], "NetReduce needs at least 2 workers"),
    (["experiment", "--algo", "netreduce", "--workers", str(CONFIG.AGG_MAX_MEMBERS + 1)],
     f"NetReduce on BMv2 has at most {CONFIG.AGG_MAX_MEMBERS} workers (AGG_MAX_MEMBERS) (the simulator has no such "
     "limit: backend = ns3)"),
    (["experiment", "--topo", "fattree"], "topo = fattree: too many switches for BMv2 on one machine"),
    (["experiment", "--backend", "ns3", "--workload", "train-digits", "--dtype", "float32"],
     "workload = 'train-digits' computes its gradients in Python: it runs on BMv2 only (backend = bmv2)"),
    (["experiment", "--backend", "ns3", "--topo", "fattree", "--workers", "100", "--k", "4"],
     "topo = fattree for 100 hosts: k = 4: a 4-ary fat tree holds 16 hosts, not 100"),
    (["experiment", "--backend", "ns3", "--ranks", "0"], "ranks = 0: at least 1 (one process)"),
    (["experiment", "--loss", "150"], "loss_pct (--loss) = 150.0: a loss rate is 0 <= percent < 100"),
    (["experiment", "--workload", "nosuch"], "workload = 'nosuch': not one of synthetic, "),
    (["experiment", "--bw", "-5"], "bw_mbps (--bw) = -5.0 Mb/s: a link rate is above 0"),
    (["experiment", "--scale", "0"], "scale = 0.0: a layer-size fraction is 0 < scale <= 1"),
    (["experiment", "--iterations", "0"], "iterations = 0: run at least 1 iteration"),
    (["experiment", "--credits", str(CONFIG.AGG_MAX_CREDITS + 1), "--algo", "netreduce"],
     f"credits = {CONFIG.AGG_MAX_CREDITS + 1}: NetReduce credits are 1..{CONFIG.AGG_MAX_CREDITS}"),
    (["net", "--topo", "rack", "--hosts", "0"], f"hosts = 0: give 1..{MAX_HOSTS_PER_EDGE}"),
    (["net", "--topo", "leafspine", "--bw", "-5"], "bw = -5.0 Mb/s: a link rate is above 0"),
    (["net", "--topo", "leafspine", "--hosts-per-leaf", "300"], f"hosts per leaf = 300: give 1..{MAX_HOSTS_PER_EDGE}"),
    (["repl", "--direct", "--topo", "rack", "--hosts", "0"], f"hosts = 0: give 1..{MAX_HOSTS_PER_EDGE}"),
    (["net", "--topo", "rack", "--leaves", "3", "--hosts-per-side", "2"], "--leaves, --hosts-per-side: not an option "
     "of --topo rack (it takes --hosts, and --bw); leave it out or give the --topo it belongs to"),
    (["net", "--hosts", "4"], "--hosts: not an option of --topo leafspine (it takes --leaves, --spines, "
     "--hosts-per-leaf, and --bw)"),
    (["repl", "--topo", "rack", "--hosts", "4", "--bw", "10"], "--hosts, --bw: only with --direct (without it the "
     "REPL attaches to the running network, which has its own topology)"),
])
def test_a_bad_value_is_one_line_without_traceback(args, says):
    result = run(*args)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: {lines[0].removeprefix('error: ')}"], result.stderr  # exactly one line
    assert says in lines[0]
    assert "Traceback" not in result.stderr


def test_every_bad_value_is_named_at_once():
    result = run("experiment", "--workers", "0", "--loss", "150", "--scale", "2")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("error: ") for line in lines)
    assert [w for w in ("workers", "loss", "scale") if any(w in line for line in lines)] == ["workers", "loss", "scale"]


@pytest.mark.parametrize(("args", "says"), [
    (["experiment", "--size", "foo"], "argument --size: 'foo' is not a size"),
    (["experiment", "--algo", "nccl"], "argument --algo: invalid choice: 'nccl'"),
    (["experiment", "--workers", "four"], "argument --workers: invalid int value: 'four'"),
    (["net", "--log-level", "chatty"], "argument --log-level: invalid choice: 'chatty'"),
    (["net", "--topo", "fattree"], "argument --topo: invalid choice: 'fattree'"),  # the simulator's (experiment)
    (["experiment", "--backend", "omnet"], "argument --backend: invalid choice: 'omnet'"),
])
def test_a_malformed_option_is_one_line_pointing_at_help(args, says):
    result = run(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and lines[0].endswith("--help`)"), result.stderr


def test_a_bad_compare_spec_names_the_file_the_run_and_the_value(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('name = "bad"\n[[runs]]\nname = "x"\nworkers = 0\n[[runs]]\nname = "y"\nbw_mbps = "fast"\n')
    result = run("compare", str(spec))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {spec}: run 'y': bw_mbps = 'fast': a number"
    spec.write_text('name = "bad"\n[[runs]]\nname = "x"\nworkers = 0\nloss_pct = 200\n')
    result = run("compare", str(spec))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {spec}: run 'x': workers = 0: give at least 1 worker",
        f"error: {spec}: run 'x': loss_pct (--loss) = 200.0: a loss rate is 0 <= percent < 100"]


def test_repl_without_a_network_says_how_to_start_one(tmp_path):
    result = run("repl", "-c", "switches", env_dir=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: no running network under {tmp_path}; start one with `gradswitch net`"]
    missing = run("repl", "--run-dir", str(tmp_path / "nowhere"), env_dir=tmp_path)
    assert missing.returncode == 2 and "no running network there" in missing.stderr


def test_verbose_shows_the_traceback():
    result = run("-v", "experiment", "--workers", "0")
    assert result.returncode == 2
    assert "Traceback" in result.stderr and "error: workers = 0" in result.stderr
