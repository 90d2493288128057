"""The switches' management ports kept free: out of the kernel's ephemeral range, and waited for when held.

BMv2 listens for P4Runtime on 127.0.0.1:50051 + device id, inside Linux's default ephemeral port
range (32768-60999). Any outgoing TCP connection on the machine (a controller's, a readiness probe's,
a test's) may be given one of those as its local port, and while that socket lives, in TIME-WAIT for
60 s after it closes too, the switch's bind fails with "Address already in use": the switch never
listens and the network does not come up. Nothing was listening there, so a check for a listener
does not see it.

So a network reserves its switches' ports (net.ipv4.ip_local_reserved_ports of the root namespace,
where the switches listen) before they start, and gives back the ones it added when it stops;
`gradswitch clean` gives them back after a run killed outright (the state file records them).
A run killed where no `gradswitch clean` of its own directory follows (a test's temporary folder, a machine that
went on with another run directory) would leave its ports reserved for good: so the ports gradswitch reserved and
has not given back are also kept in a ledger beside the machine lock (LEDGER, in the kernel's own notation), and
the next network, which holds the machine lock and so is the only gradswitch network running, takes those still
reserved over as its own and gives them back when it stops. A port someone else reserved is never in the ledger,
and never given back.

A reserved port is never handed out for a connection again, but a socket from before the reservation
may still hold it: `wait_port_free` waits for one in TIME-WAIT (the kernel frees it within 60 s) and
refuses one in any other state at once, naming it.

A switch that needs no known address (a trace replay, a benchmark) takes its ports from `free_ports`:
distinct ports below the ephemeral range, which the kernel never hands to a connection, so no
connection can take one between the choice and the switch's bind (CI failed once when two calls
for "the kernel's choice of a free port" returned the same port for gRPC and Thrift).
"""

from __future__ import annotations

import errno
import logging
import random
import shutil
import socket
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gradswitch.protocol.polling import wait_until

log = logging.getLogger(__name__)

RESERVED_PORTS = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")  # of the namespace that reads it
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LEDGER = Path("/tmp/gradswitch-reserved-ports")  # beside the machine lock (gradswitch/net/bmv2.py MACHINE_LOCK)
UNASSIGNED_FLOOR = 20000  # free_ports chooses at or above this, above the networks' fixed ports (9090 + id)
TIME_WAIT_S = 60.0  # Linux's TCP_TIMEWAIT_LEN: how long a closed connection keeps its local port
ANY_ADDRESS = "0.0.0.0"  # Thrift listens on every address; gRPC on 127.0.0.1


def parse_ports(text: str) -> set[int]:
    """The ports of a reserved-ports value: "50051-50053,9090" -> {50051, 50052, 50053, 9090}."""
    ports: set[int] = set()
    for item in text.replace("\n", "").split(","):
        item = item.strip()
        if not item:
            continue
        first, _, last = item.partition("-")
        ports.update(range(int(first), int(last or first) + 1))
    return ports


def format_ports(ports: Iterable[int]) -> str:
    """The reserved-ports value of a set of ports, consecutive ports as one range."""
    ranges: list[list[int]] = []
    for port in sorted(set(ports)):
        if ranges and port == ranges[-1][1] + 1:
            ranges[-1][1] = port
        else:
            ranges.append([port, port])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _write(path: Path, ports: set[int]) -> None:
    path.write_text(format_ports(ports) + "\n")  # a newline: the kernel ignores an empty write (none left)


def ledger_of(path: Path) -> Path:
    """The ledger of gradswitch's reservations in the setting `path`: LEDGER for the machine's, a file beside any
    other (a test's)."""
    return LEDGER if path == RESERVED_PORTS else path.with_name(path.name + ".gradswitch")


def _ledger(path: Path) -> set[int]:
    try:
        return parse_ports(ledger_of(path).read_text())
    except (OSError, ValueError):
        return set()  # none yet, or unreadable: nothing is taken over


def _write_ledger(path: Path, ports: set[int]) -> None:
    try:
        ledger_of(path).write_text(format_ports(ports) + "\n")
    except OSError as e:
        log.warning("could not record the switches' reserved ports in %s (%s); a run killed outright may leave "
                    "them reserved until `gradswitch clean`", ledger_of(path), e.strerror or e)


def release_ports(ports: Iterable[int], path: Path = RESERVED_PORTS) -> list[int]:
    """Give back `ports` to the ephemeral range; returns those that were reserved."""
    current = parse_ports(path.read_text())
    released = sorted(current & set(ports))
    if released:
        _write(path, current - set(released))
    ledger = _ledger(path)
    if ledger & set(ports):
        _write_ledger(path, ledger - set(ports))
    return released


@dataclass
class EphemeralReservation:
    """A network's switch ports, kept out of the ephemeral range while it runs."""

    ports: tuple[int, ...]
    path: Path = RESERVED_PORTS
    added: tuple[int, ...] = ()  # the ports this reservation added (others were reserved already)

    def reserve(self) -> None:
        """Reserve the ports; where the setting cannot be written (a read-only /proc/sys), say so and go on:
        `wait_port_free` still catches a port a connection was given."""
        try:
            current = parse_ports(self.path.read_text())
            new = set(self.ports) - current
            if new:
                _write(self.path, current | new)
        except OSError as e:
            log.warning("could not keep the switches' ports out of the ephemeral range (%s: %s); a connection may "
                        "still be given one as its local port", self.path, e.strerror or e)
            return
        # The caller holds the machine lock: what the ledger names and is still reserved, a run killed outright left.
        still = _ledger(self.path) & current
        left = still - set(self.added)
        if left:
            log.info("took over the reserved ports %s an earlier run killed outright left; given back when this "
                     "network stops", format_ports(left))
        _write_ledger(self.path, still | new)
        self.added = tuple(sorted(set(self.added) | new | left))

    def release(self) -> None:
        if self.added:
            release_ports(self.added, self.path)
            self.added = ()


def port_free(port: int, address: str) -> bool:
    """Whether a listener could bind address:port now (with SO_REUSEADDR, as BMv2's servers do)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return False
            raise
        return True


def ephemeral_range(path: Path = EPHEMERAL_RANGE) -> tuple[int, int]:
    """The kernel's range of local ports for connections, both ends included ("32768\t60999")."""
    low, high = path.read_text().split()
    return int(low), int(high)


def free_ports(n: int, path: Path = EPHEMERAL_RANGE, floor: int = UNASSIGNED_FLOOR) -> tuple[int, ...]:
    """n distinct TCP ports no socket holds now, from floor up to the ephemeral range.

    Chosen at random in that band, so two replays started together rarely try the same port. Where the
    ephemeral range leaves no room below it, the ports come from the kernel, all held open until the
    last is chosen so they are distinct (a connection could then still take one before the switch binds).
    """
    low, _ = ephemeral_range(path)
    band = list(range(floor, low))
    random.shuffle(band)
    chosen = list(_first_free(band, n))
    if len(chosen) == n:
        return tuple(chosen)
    held: list[socket.socket] = []
    try:
        while len(chosen) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            s.bind((ANY_ADDRESS, 0))
            chosen.append(int(s.getsockname()[1]))
    finally:
        for s in held:
            s.close()
    return tuple(chosen)


def _first_free(candidates: Iterable[int], n: int) -> Iterator[int]:
    found = 0
    for port in candidates:
        if found == n:
            return
        if port_free(port, ANY_ADDRESS):  # on every address: conflicts with a socket on any one of them
            found += 1
            yield port


@dataclass(frozen=True)
class PortHolder:
    """One TCP socket whose local port is the one asked about (a line of `ss -tanp`)."""

    state: str  # ss's name: ESTAB, TIME-WAIT, CLOSE-WAIT, ...
    local: str
    peer: str
    process: str  # ss's users:(...) column, "" when the socket has no process (TIME-WAIT)

    def __str__(self) -> str:
        return f"{self.state} {self.local} -> {self.peer}" + (f" {self.process}" if self.process else "")


def port_holders(port: int) -> list[PortHolder]:
    """The TCP sockets of this namespace bound to local port `port` ([] when ss is missing)."""
    if shutil.which("ss") is None:
        return []
    out = subprocess.run(["ss", "-tanpH", "state", "all", f"sport = :{port}"], capture_output=True, text=True,
                         check=False).stdout
    holders = []
    for line in out.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) >= 5:
            holders.append(PortHolder(fields[0], fields[3], fields[4], fields[5] if len(fields) > 5 else ""))
    return holders


class PortHeldError(RuntimeError):
    """A switch's port is bound by a socket that is not going away by itself."""


def wait_port_free(port: int, address: str, owner: str, timeout: float = TIME_WAIT_S + 5) -> None:
    """Return once a switch could listen on address:port. A port held only by connections in TIME-WAIT
    is waited for (one line says so); held otherwise, or still held after `timeout`, PortHeldError
    names the sockets."""
    if port_free(port, address):
        return
    holders = port_holders(port)
    lasting = [h for h in holders if h.state != "TIME-WAIT"]
    named = "; ".join(map(str, holders)) or "a socket ss does not show"
    if lasting:
        raise PortHeldError(f"{owner}: port {port} is held by a connection ({named}); close it, or stop "
                            "what holds it, and start again")
    log.warning("%s: port %d is held by a closed connection in TIME-WAIT (%s); waiting up to %.0f s for the "
                "kernel to free it", owner, port, named, timeout)
    try:
        wait_until(lambda: port_free(port, address), timeout, interval=0.25, what=f"port {port} to be freed")
    except TimeoutError as e:
        still = "; ".join(map(str, port_holders(port))) or "a socket ss does not show"
        raise PortHeldError(f"{owner}: port {port} is still held ({still}): {e}") from None
