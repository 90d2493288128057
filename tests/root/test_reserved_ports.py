"""A network's switch ports are never handed out as a connection's local port while it runs.

In a network namespace of its own (its ephemeral range and reserved ports are its own, the machine's
are not touched), the ephemeral range is narrowed to four ports and two of them reserved the way a
network reserves its switches' ports: connections get only the other two, and a third finds none.
Once released, the kernel hands the reserved ones out (so the first half is not luck).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from gradswitch.protocol.paths import REPO_ROOT
from tests.require import need_tool

pytestmark = pytest.mark.root

SCRIPT = textwrap.dedent("""
    import errno, json, socket, subprocess
    from pathlib import Path
    import tempfile
    from gradswitch.net import local_ports
    from gradswitch.net.local_ports import EphemeralReservation, RESERVED_PORTS
    local_ports.LEDGER = Path(tempfile.mkdtemp()) / "ledger"  # this namespace's, not the machine's

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    Path("/proc/sys/net/ipv4/ip_local_port_range").write_text("40000 40003")
    srv = socket.socket(); srv.bind(("127.0.0.1", 45000)); srv.listen(16)

    held = []

    def local_ports(n):
        got = []
        for _ in range(n):
            c = socket.socket()
            try:
                c.connect(("127.0.0.1", 45000))
            except OSError as e:
                got.append(errno.errorcode[e.errno]); c.close(); continue
            held.append(c); got.append(c.getsockname()[1])
        return got

    r = EphemeralReservation((40000, 40002, 9090))
    r.reserve()
    reserved = RESERVED_PORTS.read_text().strip()
    during = local_ports(3)
    r.release()
    released = RESERVED_PORTS.read_text().strip()
    after = local_ports(2)  # the two held still have the other two ports
    print(json.dumps({"reserved": reserved, "during": during, "released": released, "after": after}))
""")


def test_reserved_switch_ports_are_not_given_to_connections() -> None:
    unshare = need_tool("unshare", "util-linux")  # fails instead with GRADSWITCH_REQUIRE_TOOLCHAIN=1
    proc = subprocess.run([unshare, "-n", sys.executable, "-c", SCRIPT], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["reserved"] == "9090,40000,40002"
    assert sorted(result["during"][:2]) == [40001, 40003]
    assert result["during"][2] == "EADDRNOTAVAIL"  # none left: the reserved two were never offered
    assert result["released"] == ""
    assert sorted(result["after"]) == [40000, 40002]
