"""`gradswitch shell SWITCH`: p4runtime-shell on a switch of a running network, checked through the controller.

The shell runs from its own virtual environment under the user's cache directory (made with
pip on first use, so the first run needs PyPI; later runs reuse it). It is fed statements on
stdin, one per line, as a user could pipe them, and every effect is read back through the
controller's own P4Runtime session: as a backup (the default) it reads the table and its write
is refused; with --primary its insert and delete reach the switch, and once it exits the
controller is primary again.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gradswitch.control.p4rt import TableEntry
from gradswitch.control.p4rt.entities import Lpm
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.protocol.polling import wait_until
from gradswitch.topology.generators import rack

pytestmark = [pytest.mark.mininet, pytest.mark.bmv2]

ROUTE = "10.99.0.0"
INSERT = [
    'te = table_entry["ipv4_routes"](action="set_next_hop")',
    f'te.match["hdr.ipv4.dst_addr"] = "{ROUTE}/16"',
    'te.action["port"] = "2"',
    'te.action["dst_mac"] = "00:00:0a:63:00:01"',
    "te.insert()",
    'print("INSERT-SENT")',
]
DELETE = [
    'te = table_entry["ipv4_routes"]',
    f'te.match["hdr.ipv4.dst_addr"] = "{ROUTE}/16"',
    "te.delete()",
    'print("DELETE-SENT")',
]
COUNT = 'print("ROUTES", len(list(table_entry["ipv4_routes"].read())))'


def shell(switch: str, lines: list[str], run_dir, *options: str) -> str:
    """Run `gradswitch shell` with these statements on stdin; what it printed (stdout and stderr)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, "-m", "gradswitch.cli.main", "shell", switch, "--run-dir", str(run_dir),
                           *options], input="\n".join([*lines, "exit"]) + "\n", cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def routes_to(session, prefix: str) -> list[TableEntry]:
    value = int.from_bytes(bytes(int(b) for b in prefix.split(".")), "big")
    return [e for e in session.read_table("ipv4_routes") if e.match.get("hdr.ipv4.dst_addr") == Lpm(value, 16)]


def test_shell_reads_as_backup_and_writes_as_primary(tmp_path):
    run_dir = tmp_path / "net"
    with Testbed(rack(hosts=2), NetworkOptions(run_dir=run_dir)) as net:
        session = net.fabric.session("s1")  # the controller's own
        routes = len(session.read_table("ipv4_routes"))
        assert routes > 0

        out = shell("s1", [COUNT, *INSERT], run_dir)
        assert "backup" in out and "You are not the primary client" in out
        assert f"ROUTES {routes}" in out  # the shell read the table the controller wrote
        assert "Not primary" in out  # the switch refused the backup's write
        assert routes_to(session, ROUTE) == [] and session.is_primary

        out = shell("s1", INSERT, run_dir, "--primary")
        assert "INSERT-SENT" in out and "Error" not in out, out[-4000:]
        (entry,) = routes_to(session, ROUTE)
        assert entry.action.endswith("set_next_hop") and entry.params == {"port": 2, "dst_mac": 0x00000A630001}
        wait_until(lambda: session.is_primary, 10, what="the switch to make the controller primary again")

        out = shell("s1", [*DELETE, COUNT], run_dir, "--primary")
        assert "DELETE-SENT" in out and f"ROUTES {routes}" in out, out[-4000:]
        assert routes_to(session, ROUTE) == []
        wait_until(lambda: session.is_primary, 10, what="the switch to make the controller primary again")
        session.insert([TableEntry("ipv4_routes", {"dst_addr": f"{ROUTE}/16"}, "drop_no_route")])  # it writes again
        assert len(routes_to(session, ROUTE)) == 1

