"""The RoCE engine on real raw sockets between two network namespaces (no switch).

Checks what only real sockets show: the raw IPv4 path (IP_HDRINCL with our ICRC), the BPF
filter (RoCE only, and only the job's QPs when asked), no ICMP port-unreachable replies, and
that a corrupted ICRC is dropped and counted by the receiver while the connection survives.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from gradswitch.net.vethpair import veth_pair
from gradswitch.protocol.paths import REPO_ROOT

pytestmark = pytest.mark.root

RECEIVER = textwrap.dedent("""
    import json, sys, time
    from gradswitch.roce.engine import Engine, RawSocketLink
    from gradswitch.roce.qp import QpConfig
    job = int(sys.argv[1])
    link = RawSocketLink("eth0", "10.99.0.2", job=job)
    eng = Engine(link, "10.99.0.2")
    eng.register(7, 1 << 16)
    qp = eng.connect(QpConfig(qpn=job << 16 | 0x22, remote_qpn=job << 16 | 0x11, mtu=1024), "10.99.0.1")
    print("ready", flush=True)
    eng.run_until(lambda: len(qp.responder.completions) >= 3, 20, "three messages")
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        eng.poll(0.05)
    print(json.dumps({"completions": len(qp.responder.completions), "drops": eng.stats.drops,
                      "data": bytes(eng.regions[7].buffer[:9]).hex()}), flush=True)
""")

SENDER = textwrap.dedent("""
    import sys
    from gradswitch.roce.engine import Engine, RawSocketLink
    from gradswitch.roce.headers import Bth, Opcode, Transport
    from gradswitch.roce.qp import QpConfig
    from gradswitch.roce.wire import build_ipv4
    job = int(sys.argv[1])
    link = RawSocketLink("eth0", "10.99.0.1", job=job)
    eng = Engine(link, "10.99.0.1")
    qp = eng.connect(QpConfig(qpn=job << 16 | 0x11, remote_qpn=job << 16 | 0x22, mtu=1024), "10.99.0.2")
    # Noise first: another job's QP (filtered out by the receiver's BPF), a corrupted ICRC.
    other = Transport(Bth(Opcode.SEND_ONLY, (job + 1) << 16 | 0x22, 0), b"x" * 8)
    link.send(build_ipv4(other, "10.99.0.1", "10.99.0.2", ident=1), "10.99.0.2")
    bad = bytearray(build_ipv4(Transport(Bth(Opcode.SEND_ONLY, job << 16 | 0x22, 0), b"y" * 8), "10.99.0.1",
                               "10.99.0.2", ident=2))
    bad[-1] ^= 0xFF
    link.send(bytes(bad), "10.99.0.2")
    for i in range(3):
        qp.requester.post_write(bytes([i]) * 3000 if i < 2 else b"hello RoCE", 0, 7, imm=i)
    eng.run_until(lambda: qp.requester.idle(), 20, "acknowledgements")
    print("sent", flush=True)
""")


def test_engine_over_raw_sockets_between_namespaces():
    with veth_pair() as (a, b):
        receiver = subprocess.Popen(b.command([sys.executable, "-c", RECEIVER, "5"]), cwd=REPO_ROOT,
                                    stdout=subprocess.PIPE, text=True)
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        icmp = subprocess.Popen(a.command(["tcpdump", "-n", "-i", "eth0", "-c", "1", "icmp"]),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        sent = subprocess.run(a.command([sys.executable, "-c", SENDER, "5"]), cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        out, _ = receiver.communicate(timeout=60)
        icmp.terminate()
        icmp_out, _ = icmp.communicate(timeout=10)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["completions"] == 3
    assert report["data"] == b"hello RoCE"[:9].hex()
    assert report["drops"] == {"bad-icrc": 1}  # the other job's packet never reached the engine
    assert "unreachable" not in icmp_out


RESOLVE = textwrap.dedent("""
    import json, sys, time
    from gradswitch.roce.engine import Engine, RawSocketLink
    from gradswitch.roce.qp import QpConfig
    from gradswitch.roce.resolve import ResolveError
    eng = Engine(RawSocketLink("eth0", "10.99.0.1"), "10.99.0.1")
    eng.connect(QpConfig(qpn=0x11, remote_qpn=0x22), sys.argv[1])
    start = time.monotonic()
    try:
        eng.resolve_peers(float(sys.argv[2]))
        error = None
    except ResolveError as e:
        error = str(e)
    print(json.dumps({"error": error, "seconds": time.monotonic() - start}), flush=True)
""")


def neighbour(side, ip: str) -> str:
    return subprocess.run(side.command(["ip", "-4", "neigh", "show", ip]), capture_output=True, text=True).stdout


def run_resolve(side, peer: str, timeout: float) -> dict[str, object]:
    done = subprocess.run(side.command([sys.executable, "-c", RESOLVE, peer, str(timeout)]), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_a_peer_is_resolved_before_the_first_packet_and_an_absent_one_is_named():
    """Address resolution before the first packet: the kernel holds packets to a neighbour it has yet to resolve
    and sends them out of order when the reply comes. The engine resolves each QP's peer first, as a RoCE NIC does at
    connection set-up; a peer that never answers is named within the timeout."""
    with veth_pair() as (a, b):
        assert "lladdr" not in neighbour(a, b.ip)  # a fresh namespace knows nobody
        report = run_resolve(a, b.ip, 5.0)
        assert report["error"] is None
        mac = subprocess.run(b.command(["cat", "/sys/class/net/eth0/address"]), capture_output=True,
                             text=True).stdout.strip()
        assert f"lladdr {mac}" in neighbour(a, b.ip) and "REACHABLE" in neighbour(a, b.ip)
        report = run_resolve(a, "10.99.0.9", 0.5)  # on the subnet, nobody there
    assert "10.99.0.9 did not answer on eth0 within 0.5 s" in str(report["error"])
    assert 0.5 <= float(str(report["seconds"])) < 2.0
