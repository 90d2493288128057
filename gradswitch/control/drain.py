"""A hung switch let go on goes through what it was sent while stopped before the controller takes it back.

A switch whose process is stopped (the switch-hang fault: SIGSTOP, gradswitch/control/fabric.py) reads nothing from
its ports, but the kernel keeps what its neighbours send it (its ports' packet rings) until they route around it.
Let go on (SIGCONT), it goes through that backlog: packets of before its hang. The controller takes it back by
pushing its pipeline again (its registers start empty) and every entry it held; a packet of the backlog that the
new pipeline reaches after that is taken as new. For NetReduce that is a contribution of a message of before the
job's fallback to ring landing in a cell that the controller has just cleared for the job's return: the cell then
holds an old message that never completes, refuses the job's next message there, and the workers' queue pairs
get no acknowledgement until they give up (gradswitch/hosts/fallback.py, docs/faults.md "A switch that hangs").

So before the push the old pipeline (whose registers the push throws away) goes through the backlog: the controller
sends the switch probes, packet-outs to its own CPU port that come back as packet-ins. BMv2 takes a packet-out into
the same input queue as its ports' packets, so a probe comes back once everything queued before it went through.
Probes follow one another until, for QUIET_S in a row, they went there and back while the switch counted no packet
in on any port (its rx counters, gradswitch/control/controls/port_counters.py): nothing of the backlog is left, not
even in the kernel's rings (the switch's reader moves what they hold into its input queue as soon as it goes on;
QUIET_S covers a reader a loaded machine left waiting for a round trip or two). A switch that keeps being sent
packets (a leaf whose hosts go on sending) is never quiet: after DRAIN_LIMIT_S the drain stops with the probes that
came back, which went through everything queued before them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from gradswitch.control.controls.port_counters import PORT_RX
from gradswitch.control.p4rt import SwitchSession
from gradswitch.protocol.p4_constants import CONFIG

log = logging.getLogger(__name__)

PROBE_ETHERTYPE = 0x88B5  # IEEE 802 local experimental: a frame no table of the pipeline acts on
PROBE_MAC = bytes.fromhex("020000000000")  # locally administered: no host's
PROBE_TAG = b"gradswitch drain probe "
PROBE_WAIT_S = 1.0  # a probe not back within this is sent again (a full input queue drops a packet-out too)
QUIET_S = 0.05  # quiet: probes there and back with no packet in, in a row, for this long
DRAIN_LIMIT_S = 5.0  # the longest a drain goes on for a switch that is never quiet


@dataclass(frozen=True)
class Drained:
    """What a drain saw (`quiet`: it ended on a probe's round trip with no packet in; else on DRAIN_LIMIT_S)."""

    packets: int  # packets the switch counted in on its ports from the first probe to the last
    counted: int  # packets its pipeline had counted in on its ports when the drain ended (since it was pushed)
    probes: int  # probes sent
    seconds: float
    quiet: bool

    def describe(self) -> str:
        how = f"in {self.seconds:.2f} s" if self.quiet else (f"not quiet after {self.seconds:.1f} s (it is still "
                                                              "being sent packets)")
        return f"{self.packets} packets it held gone through first ({self.probes} probes, {how})"


def probe_frame(number: int, nonce: bytes) -> bytes:
    """Probe `number` of a drain: an Ethernet frame naming the drain (nonce) and the probe."""
    return PROBE_MAC + PROBE_MAC + PROBE_ETHERTYPE.to_bytes(2, "big") + PROBE_TAG + nonce + number.to_bytes(4, "big")


def packets_in(session: SwitchSession) -> int:
    """Packets the switch's pipeline counted in on its ports (packet-outs are not counted)."""
    return sum(c.packets for c in session.read_counter(PORT_RX).values())


def _came_back(session: SwitchSession, frame: bytes, wait_s: float, clock: Callable[[], float]) -> bool:
    deadline = clock() + wait_s
    while (left := deadline - clock()) > 0:
        packet = session.next_packet_in(left)
        if packet is not None and frame in packet.payload:
            return True
    return False


def drain(session: SwitchSession, limit_s: float = DRAIN_LIMIT_S, clock: Callable[[], float] = time.monotonic
          ) -> Drained:
    """Probe the switch until probes came back with no packet in meanwhile for QUIET_S in a row, or limit_s passed
    (the module's docstring). The session must be the primary one, on the switch's pipeline of before its hang."""
    nonce = os.urandom(8)
    start = clock()
    first = last = packets_in(session)
    probes = 0
    quiet_since: float | None = None  # the start of the round trips in a row that saw no packet in
    while True:
        probes += 1
        frame = probe_frame(probes, nonce)
        sent = clock()
        session.send_packet_out(frame, egress_port=CONFIG.CPU_PORT)
        back = _came_back(session, frame, PROBE_WAIT_S, clock)
        now = packets_in(session)
        took = clock() - start
        quiet_since = (sent if quiet_since is None else quiet_since) if back and now == last else None
        if quiet_since is not None and clock() - quiet_since >= QUIET_S:
            return Drained(now - first, now, probes, took, True)
        if took >= limit_s:
            done = Drained(now - first, now, probes, took, False)
            log.warning("switch %s let go on: %s", session.name, done.describe())
            return done
        last = now
