"""Stopping and resuming a process returns once the kernel says it took effect (gradswitch/net/process_state.py),
checked on a real process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gradswitch.net.process_state import STOPPED, process_state, resume, stop


def test_stop_returns_once_stopped_and_resume_once_running_again():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for _ in range(20):  # a race would show on some round
            stop(busy.pid, "the busy loop")
            assert process_state(busy.pid) == STOPPED
            resume(busy.pid, "the busy loop")
            assert process_state(busy.pid) != STOPPED
    finally:
        busy.kill()
        busy.wait(timeout=10)


def test_a_process_that_does_not_stop_in_time_is_named(monkeypatch):
    busy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr("gradswitch.net.process_state.os.kill", lambda pid, sig: None)  # the signal lost
        with pytest.raises(TimeoutError, match="the sleeper to stop"):
            stop(busy.pid, "the sleeper", timeout=0.2)
    finally:
        monkeypatch.undo()
        busy.kill()
        busy.wait(timeout=10)
