"""The bulk TCP background traffic's goodput over the jobs' window.

The background flows (gradswitch/experiment/network_settings.py starts them: iperf3 between two hosts
on different edge switches) share the links with the jobs. A run that speeds the jobs up by
starving them should show it: `background_goodput_mbps` is the bytes the receiving host's TCP
sockets took in, in order, from the go to the end of the jobs (`bytes_received` of every
socket of the iperf3 server, from `ss -ti` in the receiver's namespace, read at both times),
over that time.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from typing import Any

SOCKET = re.compile(r"^\S+\s+\S+\s+(?P<local>\S+)\s+(?P<peer>\S+)")
BYTES_RECEIVED = re.compile(r"\bbytes_received:(\d+)")


def ss_command(port: int) -> list[str]:
    """Established TCP sockets of a server port, with TCP info, no header (one socket: two lines)."""
    return ["ss", "-tinH", "state", "established", f"( sport = :{port} )"]


def parse_bytes_received(ss_output: str) -> dict[str, int]:
    """Per socket (local and peer address), the bytes it received in order, from `ss -tinH state
    established`: each socket is a line of queues and addresses and an indented line of TCP info.
    A socket without `bytes_received` (nothing received yet) has 0."""
    out: dict[str, int] = {}
    current: str | None = None
    for line in ss_output.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            m = SOCKET.match(line)
            current = f"{m['local']} {m['peer']}" if m else None
            if current is not None:
                out[current] = 0
        elif current is not None and (got := BYTES_RECEIVED.search(line)):
            out[current] = int(got.group(1))
    return out


def received_since(before: dict[str, int], after: dict[str, int]) -> int:
    """Bytes received between two readings: a socket opened since counts from zero (all its bytes
    came after the first reading); one closed since is not counted."""
    return sum(v - before.get(k, 0) for k, v in after.items())


@dataclass
class GoodputMeter:
    """The background flows' goodput between `start()` (the go) and `stop()` (the jobs' end)."""

    host: Any  # the receiving Mininet host
    port: int
    _before: dict[str, int] | None = None
    _started: float = 0.0
    goodput_mbps: float | None = None
    received_bytes: int | None = None
    seconds: float | None = None

    def _read(self) -> dict[str, int]:
        proc = self.host.popen(ss_command(self.port), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(ss_command(self.port))} on {self.host.name} failed: {err.strip()}")
        return parse_bytes_received(out)

    def start(self) -> None:
        self._before = self._read()
        self._started = time.monotonic()

    def stop(self) -> float | None:
        if self._before is None:
            return None
        after = self._read()
        self.seconds = time.monotonic() - self._started
        self.received_bytes = received_since(self._before, after)
        self.goodput_mbps = self.received_bytes * 8 / self.seconds / 1e6 if self.seconds > 0 else None
        return self.goodput_mbps
