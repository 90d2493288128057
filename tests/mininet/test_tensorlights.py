"""TensorLights' HTB tree on a host: installed, effective, rotated and removed cleanly."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.net.tensorlights import ServerClass, TensorLights, source_port_match
from gradswitch.topology.generators import rack

pytestmark = pytest.mark.mininet

BLAST = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    s.bind(("0.0.0.0", int(sys.argv[1])))
    end = time.monotonic() + float(sys.argv[3])
    while time.monotonic() < end:
        s.sendto(b"x" * 1000, (sys.argv[2], 4791))
""")

ACK = textwrap.dedent("""
    import socket, sys
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", int(sys.argv[1])))
    for _ in range(5):
        s.sendto(bytes([0x11]) + bytes(15), (sys.argv[2], 4791))
""")

COUNT = textwrap.dedent("""
    import socket, sys
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 4791))
    s.settimeout(8)
    got = 0
    print("ready", flush=True)
    try:
        while True:
            got += len(s.recv(2000))
            s.settimeout(1.0)
    except socket.timeout:
        pass
    print(got, flush=True)
""")


def test_tensorlights_classes_favour_one_server_and_go_away(tmp_path):
    topo = rack(hosts=3, bw_mbps=10.0)
    with Testbed(topo, NetworkOptions(run_dir=tmp_path / "net")) as net:
        h1 = net.host("h1")
        servers = [ServerClass(4, 1), ServerClass(4, 2)]  # two jobs' parameter servers on h1
        lights = TensorLights(h1, "eth0", 10.0, servers)
        lights.install()
        classes = h1.cmd("tc class show dev eth0")
        assert re.search(r"class htb 1:9 parent 1:1 leaf 9: prio 0 ", classes), classes  # the host's ACKs
        assert re.search(r"class htb 1:10 parent 1:1 leaf 10: prio 1 ", classes), classes
        assert re.search(r"class htb 1:11 parent 1:1 leaf 11: prio 2 ", classes), classes
        filters = h1.cmd("tc filter show dev eth0")
        for s in servers:
            value, mask = source_port_match(s.job, s.node_id)
            assert f"match {value:04x}0000/{mask:04x}0000 at 20" in filters  # u32 on the UDP source port

        def share(favoured: int) -> float:
            lights.favour(favoured)
            counters = [net.host(h).popen([sys.executable, "-c", COUNT], stdout=subprocess.PIPE, text=True)
                        for h in ("h2", "h3")]
            for c in counters:
                assert c.stdout is not None and c.stdout.readline().strip() == "ready"
            blasts = [h1.popen([sys.executable, "-c", BLAST, str(source_port_match(s.job, s.node_id)[0]),
                                topo.host(dst).ip, "3"]) for s, dst in zip(servers, ("h2", "h3"), strict=True)]
            for b in blasts:
                b.wait(timeout=30)
            got = [int(c.communicate(timeout=30)[0].split()[-1]) for c in counters]
            return got[favoured] / sum(got)

        # A server's RoCE ACK (BTH opcode 0x11) from its own source port goes to the ACK class, not the server's.
        ack = h1.popen([sys.executable, "-c", ACK, str(source_port_match(4, 2)[0]), topo.host("h2").ip])
        assert ack.wait(timeout=30) == 0
        assert re.search(r"class htb 1:9 .*\n Sent \d+ bytes 5 pkt", h1.cmd("tc -s class show dev eth0"))

        assert share(0) > 0.8  # the favoured server's traffic takes (almost) the whole link
        assert share(1) > 0.8  # and the other way round after a change of favourite
        lights.remove()
        assert "htb" not in h1.cmd("tc qdisc show dev eth0")
        assert "1:10" not in h1.cmd("tc class show dev eth0")
