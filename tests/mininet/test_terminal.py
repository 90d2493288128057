"""`gradswitch net` at a terminal: what a person typing at the `mininet>` prompt sees.

The command runs under a pseudo-terminal (pexpect), as in a shell; every step waits for the
next prompt with a deadline. The pty echoes what is typed, so each check looks for text only
the command's output contains (`echo $((6*7))x` prints `42x`; the echo shows `$((6*7))x`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest

from gradswitch.protocol.paths import REPO_ROOT
from tests.mininet.test_network import leftovers

pytestmark = pytest.mark.mininet

PROMPT = "mininet> "
REPL_PROMPT = "gradswitch> "


def spawn(args: list[str], run_dir: Path) -> pexpect.spawn:
    env = dict(os.environ, GRADSWITCH_RUNTIME_DIR=str(run_dir), TERM="dumb")
    child = pexpect.spawn(sys.executable, ["-m", "gradswitch.cli.main", *args], cwd=str(REPO_ROOT), env=env,
                          encoding="utf-8", timeout=30, dimensions=(50, 200))
    child.logfile_read = _Transcript()
    return child


class _Transcript:
    """What the terminal showed, for the failure message."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, data: str) -> None:
        self.text += data

    def flush(self) -> None:
        pass


def shown(child: pexpect.spawn) -> str:
    transcript: _Transcript = child.logfile_read
    return transcript.text[-3000:]


def command(child: pexpect.spawn, line: str, prompt: str = PROMPT, timeout: float = 30) -> str:
    """Type a line, wait for the next prompt; what the terminal showed in between (without the echo)."""
    child.sendline(line)
    child.expect_exact(prompt, timeout=timeout)
    before: str = child.before
    return before.replace("\r\n", "\n").split("\n", 1)[1] if "\n" in before.replace("\r\n", "\n") else ""


def test_mininet_cli_shows_what_commands_print(tmp_path):
    child = spawn(["net", "--topo", "rack", "--hosts", "3"], tmp_path)
    try:
        child.expect_exact(PROMPT, timeout=120)
        out = command(child, "h1 echo $((6*7))x")
        assert "42x" in out, shown(child)
        out = command(child, "h1 ping -c 2 h2")
        assert "2 packets transmitted, 2 received" in out, shown(child)
        out = command(child, "net")
        assert "h1 eth0:s1-eth1" in out and "s1 lo:" in out, shown(child)
        out = command(child, "pingall", timeout=60)
        assert "Results: 0% dropped (6/6 received)" in out, shown(child)
        # The REPL inside the Mininet CLI: one command, then the interactive one, left with Ctrl-D.
        out = command(child, "repl switches")
        assert "s1" in out and "(primary)" in out, shown(child)
        command(child, "repl", prompt=REPL_PROMPT)
        out = command(child, "entries s1 ipv4_routes", prompt=REPL_PROMPT)
        assert "(3 entries)" in out, shown(child)
        child.sendcontrol("d")
        child.expect_exact(PROMPT)
        assert child.before.replace("\r\n", "\n").endswith("\n"), "the mininet prompt must start on its own line"
        out = command(child, "h3 echo $((6*9))y")
        assert "54y" in out, shown(child)
        child.sendline("exit")
        child.expect(pexpect.EOF, timeout=60)
        child.close()
        assert child.exitstatus == 0, shown(child)
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert leftovers(tmp_path / "rack", ["s1", "h1", "h2", "h3"]) == []
