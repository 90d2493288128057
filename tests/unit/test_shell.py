"""`gradswitch shell`: which switch, with which election id, and p4runtime-shell's command line (no network:
tests/mininet/test_shell.py drives the shell against a running one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradswitch.cli.shell import ShellError, ShellTarget, find_network, shell_command, target
from gradswitch.control.p4rt.session import (
    CONTROLLER_ELECTION_ID,
    REPL_ELECTION_ID,
    SHELL_ELECTION_ID,
    SHELL_PRIMARY_ELECTION_ID,
)
from gradswitch.net.network import STATE_FILE
from gradswitch.protocol.paths import REPO_ROOT


def network(run_dir: Path, controller_pid: int) -> Path:
    run_dir.mkdir(parents=True)
    switches = {"leaf1": {"device_id": 1, "grpc_port": 50052, "thrift_port": 9091, "pid": 0},
                "spine1": {"device_id": 3, "grpc_port": 50054, "thrift_port": 9093, "pid": 0}}
    (run_dir / STATE_FILE).write_text(json.dumps({"controller_pid": controller_pid, "switches": switches}))
    return run_dir


def test_election_ids_backup_below_controller_and_repl_primary_above():
    assert SHELL_ELECTION_ID < REPL_ELECTION_ID < CONTROLLER_ELECTION_ID < SHELL_PRIMARY_ELECTION_ID


def test_target_reads_the_running_network(tmp_path):
    run_dir = network(tmp_path / "leafspine", os.getpid())
    assert target(run_dir, "spine1") == ShellTarget("spine1", 3, "127.0.0.1:50054")
    with pytest.raises(ShellError, match=r"^no switch 'leaf9' in the running network: give one of leaf1, spine1$"):
        target(run_dir, "leaf9")


def test_shell_attaches_without_pushing_a_pipeline():
    to = ShellTarget("leaf1", 1, "127.0.0.1:50052")
    backup = shell_command(Path("/venv/bin/python"), to, primary=False)
    assert backup == ["/venv/bin/python", "-m", "p4runtime_sh", "--grpc-addr", "127.0.0.1:50052", "--device-id", "1",
                      "--election-id", "0,25"]
    assert "--config" not in backup
    assert shell_command(Path("/p"), to, primary=True)[-1] == ",".join(map(str, SHELL_PRIMARY_ELECTION_ID))


def test_find_network_takes_only_a_live_one(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADSWITCH_RUNTIME_DIR", str(tmp_path))
    with pytest.raises(ShellError, match="no running network under"):
        find_network(None)
    network(tmp_path / "gone", 2**22 + 1)  # above pid_max's default: no such process
    with pytest.raises(ShellError, match="no running network under"):
        find_network(None)
    live = network(tmp_path / "rack", os.getpid())
    assert find_network(None) == live
    with pytest.raises(ShellError, match=r"--run-dir .*nowhere: no running network there"):
        find_network(tmp_path / "nowhere")


def test_cli_names_the_switches_in_one_line(tmp_path):
    run_dir = network(tmp_path / "rack", os.getpid())
    proc = subprocess.run([sys.executable, "-m", "gradswitch.cli.main", "shell", "leaf9", "--run-dir", str(run_dir)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr) == (2, "error: no switch 'leaf9' in the running network: "
                                                 "give one of leaf1, spine1\n")
