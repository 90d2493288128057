"""Which BMv2 build runs, and whether it logs every packet: the probe against the builds' behaviour.

For each build installed here (PATH's, with logging macros; /opt/p4/bmv2-nolog's, without),
one UDP packet goes through a switch running at `-L trace`: a build with logging macros logs
its pipeline ("Processing packet received on port 1"), one without logs nothing of it, and
`Bmv2Build.logging` (found without running the switch) must say the same. The running switch's
memory map shows it loaded its own build's libraries (LD_LIBRARY_PATH), not the other build's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from gradswitch.control.p4rt import TableEntry
from gradswitch.control.trace_replay import TraceSwitch
from gradswitch.net.bmv2 import resolve_bmv2
from tests.conftest import BMV2_NOLOG

pytestmark = [pytest.mark.bmv2, pytest.mark.bmv2_nolog]

ROUTE = TableEntry("ipv4_routes", {"dst_addr": "10.0.1.2/32"}, "set_next_hop", {"port": 2, "dst_mac": 2})
PACKET = bytes(Ether(src="00:00:0a:00:01:01", dst="00:00:0a:00:01:02") / IP(src="10.0.1.1", dst="10.0.1.2")
               / UDP(sport=1, dport=9) / (b"x" * 20))


@pytest.mark.parametrize("chosen", [None, BMV2_NOLOG], ids=["path", "nolog"])
def test_logging_probe_agrees_with_what_the_build_logs(tmp_path, chosen):
    build = resolve_bmv2(chosen)
    assert build.logging == (chosen is None)  # PATH's is the packaged build, with logging macros
    sw = TraceSwitch([1, 2], run_dir=tmp_path, log_level="trace", executable=str(build.executable))
    sw.start([ROUTE])
    try:
        sw.replay([(1, PACKET)])
        sw.wait({2: 1})
        assert sw.process.pid is not None
        maps = Path(f"/proc/{sw.process.pid}/maps").read_text()
    finally:
        sw.stop()
    log = sw.process.config.log_file.read_text()
    assert ("Processing packet received on port 1" in log) == build.logging, log[-2000:]
    assert build.lib_dir is not None
    loaded = {line.split()[-1] for line in maps.splitlines() if "libbmpi" in line}
    assert loaded and all(path.startswith(f"{build.lib_dir}/") for path in loaded), loaded
