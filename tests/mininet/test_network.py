"""Mininet end to end: BMv2 fabrics programmed by the controller carry real traffic.

Reachability on rack and leafspine, UDP and TCP through the fabric, the fault-injection table
dropping the configured fraction and nothing else, clean teardown (also after SIGINT and
SIGTERM), and the REPL attached to a running network.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradswitch.experiment.testbed import Testbed
from gradswitch.net.bmv2 import GRPC_BASE_PORT, THRIFT_BASE_PORT
from gradswitch.net.fence import fence_tables, table_name
from gradswitch.net.local_ports import RESERVED_PORTS, parse_ports
from gradswitch.net.network import STATE_FILE, NetworkOptions
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.protocol.polling import wait_until
from gradswitch.topology.generators import leafspine, rack

pytestmark = pytest.mark.mininet

GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]


def leftovers(run_dir: Path, names: list[str]) -> list[str]:
    """BMv2 processes of this run and interfaces of these nodes that still exist."""
    left = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "simple_switch" in cmd and str(run_dir) in cmd:
                left.append(f"process {pid}: {cmd[:80]}")
    left += [f"interface {i}" for i in os.listdir("/sys/class/net") if any(i.startswith(n + "-") for n in names)]
    return left


def options(tmp_path: Path) -> NetworkOptions:
    return NetworkOptions(run_dir=tmp_path / "net")


def test_rack_full_reachability_and_clean_teardown(tmp_path):
    topo = rack(hosts=4)
    with Testbed(topo, options(tmp_path)) as net:
        reach = net.pingall()
        assert reach.full, reach.table()
    assert leftovers(tmp_path / "net", ["s1", "h1", "h2", "h3", "h4"]) == []
    assert not (tmp_path / "net" / STATE_FILE).exists()


def sender_script(dst: str, port: int, count: int, size: int = 1000, rate_pps: int = 1000) -> str:
    """Numbered datagrams, paced at `rate_pps` (1000 of 1 kB: 8 Mb/s, under the 20 Mb/s links, so
    what is lost is lost to the fabric's rules and not to a queue the blast overran)."""
    return textwrap.dedent(f"""
        import socket, time
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        start = time.monotonic()
        for i in range({count}):
            ahead = start + i / {rate_pps} - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)  # pacing, not synchronisation
            s.sendto(i.to_bytes(4, "big") + b"x" * {size}, ("{dst}", {port}))
    """)


def receiver_script(port: int, idle: float = 1.5) -> str:
    return textwrap.dedent(f"""
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind(("0.0.0.0", {port}))
        print("ready", flush=True)
        s.settimeout(20)
        seen = set()
        try:
            while True:
                data, _ = s.recvfrom(65535)
                seen.add(int.from_bytes(data[:4], "big"))
                s.settimeout({idle})
        except socket.timeout:
            pass
        print(len(seen), flush=True)
    """)


def udp_transfer(net: Testbed, src: str, dst: str, count: int, port: int = 5001) -> int:
    """Datagrams that arrived out of `count` sent (the receiver stops after an idle second)."""
    receiver = net.host(dst).popen([sys.executable, "-c", receiver_script(port)], stdout=subprocess.PIPE, text=True)
    assert receiver.stdout is not None
    assert receiver.stdout.readline().strip() == "ready"
    net.host(src).cmd(f"{sys.executable} -c '{sender_script(net.topo.host(dst).ip, port, count)}'")
    out, _ = receiver.communicate(timeout=60)
    return int(out.strip().splitlines()[-1])


# A transfer now and then loses a few datagrams inside a BMv2 that fell behind its veths (seen on this 2-core
# machine about 1 run in 5 with the code of either side of the move to gradswitch/, and more often unpaced: 5-90
# datagrams gone with no drop in any qdisc, socket or P4 counter): the machine, not the fabric. Each UDP claim
# below is judged on the first of up to this many transfers that the machine did not touch, and fails when none was.
UDP_ATTEMPTS = 3


def complete_transfers(net: Testbed, src: str, dst: str, count: int, port: int) -> list[int]:
    """Transfers of `count` datagrams until one arrives whole (at most UDP_ATTEMPTS): the counts that arrived."""
    got: list[int] = []
    while len(got) < UDP_ATTEMPTS and count not in got:
        got.append(udp_transfer(net, src, dst, count, port=port + 100 * len(got)))
    return got


def faulted_transfers(net: Testbed, switch: str, src: str, dst: str, count: int, port: int) -> list[tuple[int, int]]:
    """Transfers through a fault-injection rule until one where every datagram that did not arrive is one the
    rule counted (at most UDP_ATTEMPTS): (arrived, counted by the rule) of each."""
    out: list[tuple[int, int]] = []
    while len(out) < UDP_ATTEMPTS and not any(got + dropped == count for got, dropped in out):
        before = net.fabric.drops(switch).get("fault-injected", 0)
        got = udp_transfer(net, src, dst, count, port=port + 100 * len(out))
        out.append((got, net.fabric.drops(switch).get("fault-injected", 0) - before))
    return out


def test_leafspine_udp_tcp_and_fault_injection(tmp_path):
    # 20 Mb/s links: the links, not BMv2's packet rate, limit a blast of datagrams (docs/performance.md).
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2, bw_mbps=20)
    with Testbed(topo, options(tmp_path)) as net:
        reach = net.pingall()
        assert reach.full, reach.table()
        # UDP across the fabric, no loss configured: everything arrives.
        assert 500 in complete_transfers(net, "h1", "h4", 500, port=5001)
        # TCP across the fabric (iperf3, 2 s): data flows at a sensible rate.
        server = net.host("h3").popen(["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL)
        try:
            wait_until(lambda: "5201" in net.host("h3").cmd("ss -ltn"), 10, what="iperf3 to listen")
            out = net.host("h2").cmd("iperf3 -c 10.0.2.1 -p 5201 -t 2 -J")
            report = json.loads(out)
            mbps = report["end"]["sum_received"]["bits_per_second"] / 1e6
            assert 10 < mbps <= 21, mbps
        finally:
            server.wait(timeout=10)
        # Fault injection: 20% of UDP leaving leaf2 towards h4 (port 2), nothing else.
        switch, port = topo.attachment("h4")
        net.fabric.set_port_loss(switch, port, 0.20, direction="out", ip_protocol=17)
        sent = 3000
        transfers = faulted_transfers(net, switch, "h1", "h4", sent, port=5002)
        for got, dropped in transfers:
            # The rule drops its 20 % (counted by the switch: 4 sigma of a binomial of 3000 is 0.03) and never more
            # than went missing ...
            assert abs(dropped / sent - 0.20) < 0.04, f"the rule dropped {dropped} of {sent}, 0.20 configured"
            assert dropped <= sent - got, (dropped, sent, got)
        # ... and, in a transfer the machine left alone, exactly what went missing.
        assert any(got + dropped == sent for got, dropped in transfers), transfers
        # same sender, another port of leaf2: untouched
        assert 500 in complete_transfers(net, "h1", "h3", 500, port=5003)
        assert net.ping("h4", "h1")  # ICMP is not UDP: not dropped by the UDP-only rule
        net.fabric.set_port_loss(switch, port, 0.0, direction="out", ip_protocol=17)
        assert 300 in complete_transfers(net, "h1", "h4", 300, port=5004)
    names = [s.name for s in topo.switches] + [h.name for h in topo.hosts]
    assert leftovers(tmp_path / "net", names) == []


def _as_in_a_terminal() -> None:
    """The command starts with SIGINT, SIGTERM and SIGHUP at their defaults, as from a terminal: a suite started in
    the background (`(make test &)`, nohup) hands its children SIGINT and SIGHUP ignored, and Ctrl-C would then
    do nothing, as it should for a command run in the background."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _start_cli(args: list[str], run_dir: Path, stdin: int | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, GRADSWITCH_RUNTIME_DIR=str(run_dir))
    return subprocess.Popen(GRADSWITCH + args, cwd=REPO_ROOT, env=env, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=_as_in_a_terminal)


def stop_cli(proc: subprocess.Popen[str], run_dir: Path) -> None:
    """A test that failed leaves nothing running: SIGTERM (the network tears itself down), then
    SIGKILL and `gradswitch clean` of its run directory if it did not."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    env = dict(os.environ, GRADSWITCH_RUNTIME_DIR=str(run_dir))
    subprocess.run(GRADSWITCH + ["clean"], cwd=REPO_ROOT, env=env, capture_output=True, timeout=60, check=False)


def test_pingall_command_exits_zero_on_full_reachability(tmp_path):
    reserved = _reserved_ports()
    proc = _start_cli(["net", "--topo", "leafspine", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
                       "--pingall"], tmp_path)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    assert "12/12 host pairs reachable" in out
    assert parse_ports(_reserved_ports()) <= parse_ports(reserved)  # given back (and any an earlier run left)
    assert leftovers(tmp_path / "leafspine", ["leaf1", "leaf2", "spine1", "spine2", "h1", "h2", "h3", "h4"]) == []


def _reserved_ports() -> str:
    return RESERVED_PORTS.read_text()


def _hold_port(port: int, time_wait: bool) -> list[socket.socket]:
    """A connection whose local port is `port`, open or closed into TIME-WAIT: what a controller's or a
    probe's connection given that port by the kernel leaves (gradswitch/net/local_ports.py)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    client = socket.socket()  # no SO_REUSEADDR, as a client's (with it, a listener's bind would pass)

    def bound() -> bool:  # a TIME-WAIT an earlier test left there goes within 60 s
        try:
            client.bind(("127.0.0.1", port))
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            return False
        return True

    wait_until(bound, 70, interval=0.5, what=f"port {port} to be free for the test's connection")
    client.connect(srv.getsockname())
    accepted, _ = srv.accept()
    if not time_wait:
        return [srv, client, accepted]
    client.close()  # closed first: the client's end keeps the port for 60 s
    wait_until(lambda: accepted.recv(1) == b"", 10, what="the close to arrive")
    accepted.close()
    srv.close()
    return []


def test_a_switch_port_held_by_an_open_connection_is_named_and_nothing_is_left(tmp_path):
    reserved = _reserved_ports()
    held = _hold_port(GRPC_BASE_PORT, time_wait=False)
    try:
        proc = _start_cli(["net", "--topo", "rack", "--hosts", "2", "--pingall"], tmp_path)
        out, _ = proc.communicate(timeout=120)
    finally:
        srv, client, accepted = held
        accepted.close()  # closed first: its end, not the switch port's, is left in TIME-WAIT
        wait_until(lambda: client.recv(1) == b"", 10, what="the close to arrive")
        client.close()
        srv.close()
    assert proc.returncode == 2, out
    assert f"\nerror: s1: port {GRPC_BASE_PORT} is held by a connection (ESTAB 127.0.0.1:{GRPC_BASE_PORT} -> " \
           "127.0.0.1:" in out, out
    assert "timed out" not in out  # at once, not after the switch's 30 s
    assert leftovers(tmp_path / "rack", ["s1", "h1", "h2"]) == []
    assert parse_ports(_reserved_ports()) <= parse_ports(reserved)  # given back


def test_a_switch_port_in_time_wait_is_waited_for(tmp_path):
    """What failed CI once: leaf2's gRPC port was some closed connection's local port, in TIME-WAIT."""
    reserved = _reserved_ports()
    _hold_port(GRPC_BASE_PORT, time_wait=True)
    proc = _start_cli(["net", "--topo", "rack", "--hosts", "2", "--pingall"], tmp_path)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    assert f"s1: port {GRPC_BASE_PORT} is held by a closed connection in TIME-WAIT" in out
    assert "2/2 host pairs reachable" in out
    assert leftovers(tmp_path / "rack", ["s1", "h1", "h2"]) == []
    assert parse_ports(_reserved_ports()) <= parse_ports(reserved)  # given back


def test_ctrl_c_during_bring_up_leaves_nothing_behind(tmp_path):
    proc = _start_cli(["net", "--topo", "leafspine", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
                       "--pingall"], tmp_path)
    names = ["leaf1", "leaf2", "spine1", "spine2", "h1", "h2", "h3", "h4"]
    try:
        # Interrupt as soon as the network exists (the state file is written before the switches start).
        wait_until(lambda: (tmp_path / "leafspine" / STATE_FILE).exists() or proc.poll() is not None, 120,
                   what="the network to be built")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "interrupted: everything was torn down" in out
    assert leftovers(tmp_path / "leafspine", names) == []


def test_sigterm_to_the_interactive_network_tears_it_down(tmp_path):
    proc = _start_cli(["net", "--topo", "rack", "--hosts", "3"], tmp_path, stdin=subprocess.PIPE)
    try:
        wait_until(lambda: (tmp_path / "rack" / "control.sock").exists() or proc.poll() is not None, 120,
                   what="the network to come up")
        assert proc.poll() is None, proc.communicate()[0]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert leftovers(tmp_path / "rack", ["s1", "h1", "h2", "h3"]) == []
    assert not (tmp_path / "rack" / STATE_FILE).exists()


def test_clean_removes_what_a_killed_run_left(tmp_path):
    proc = _start_cli(["net", "--topo", "rack", "--hosts", "2"], tmp_path, stdin=subprocess.PIPE)
    wait_until(lambda: (tmp_path / "rack" / "control.sock").exists() or proc.poll() is not None, 120,
               what="the network to come up")
    proc.kill()  # no chance to clean up
    proc.wait(timeout=10)
    assert leftovers(tmp_path / "rack", ["s1", "h1", "h2"]) != []
    assert table_name(tmp_path / "rack") in fence_tables()  # the management-port fence (gradswitch/net/fence.py)
    assert {GRPC_BASE_PORT, THRIFT_BASE_PORT} <= parse_ports(_reserved_ports())  # out of the ephemeral range
    clean = _start_cli(["clean"], tmp_path)
    out, _ = clean.communicate(timeout=60)
    assert clean.returncode == 0, out
    assert "removed switch s1" in out and "management-port fence" in out
    assert leftovers(tmp_path / "rack", ["s1", "h1", "h2"]) == []
    assert table_name(tmp_path / "rack") not in fence_tables()
    assert "removed reserved ports" in out and not {GRPC_BASE_PORT, THRIFT_BASE_PORT} & parse_ports(_reserved_ports())


def test_repl_attaches_to_the_running_controller(tmp_path):
    proc = _start_cli(["net", "--topo", "rack", "--hosts", "2", "--bw", "10"], tmp_path, stdin=subprocess.PIPE)
    try:
        wait_until(lambda: (tmp_path / "rack" / "control.sock").exists() or proc.poll() is not None, 120,
                   what="the network to come up")
        assert proc.poll() is None
        commands = ["switches", "insert s1 acl_rules protocol=17 l4_dst_port=9999 priority=3 -> drop",
                    "entries s1 acl_rules", "ports s1", "insert s1 nope x=1 -> y", "entries s1 faults",
                    "delete s1 acl_rules protocol=17 l4_dst_port=9999 priority=3", "entries s1 acl_rules",
                    "job create 3 h1 h2 credits=2", "jobs", "job status 3", "dlcp 3 priority=on", "dlcp 3 spray=on",
                    "dlcp 3", "dlcp 3 priority=off", "dlcp thresholds", "dlcp thresholds 1=500 6=0",
                    "dlcp thresholds 1=x", "dlcp thresholds default", "job teardown 3",
                    "job create 4 h1 h2 k=1 deadline_ms=20", "job teardown 4", "jobs"]
        repl = _start_cli(["repl", *[a for c in commands for a in ("-c", c)]], tmp_path)
        out, _ = repl.communicate(timeout=60)
        assert repl.returncode == 0, out
        assert "(primary)" in out  # the controller's session, which made the write
        assert "inserted on s1: acl_rules[protocol=17 l4_dst_port=9999 priority=3] -> drop()" in out
        assert "acl_rules[protocol=17&&&0xff l4_dst_port=9999&&&0xffff priority=3] -> drop()" in out
        assert "error: no table 'nope'" in out
        assert "error: table name 'faults' is ambiguous" in out  # raised in the controller, shown here
        assert "deleted on s1: acl_rules[protocol=17 l4_dst_port=9999 priority=3]\n" in out
        assert "(0 entries)" in out
        assert "job 3: workers h1, h2, rkey 0x4e520003" in out and "s1       flat   cells 0..15" in out
        assert "job 3: 2 workers (h1, h2), credits 2, aggregation at s1" in out
        assert "cells in use 0/16  no events" in out
        assert "job 3: priority\n" in out and "job 3: priority+spray\n" in out and "job 3: spray\n" in out
        # 10 Mb/s: low priorities drop at 16 KiB of queue (more than 10 ms), middle ones at 32 KiB
        defaults = "s1: 0=16384 1=16384 2=16384 3=32768 4=32768 5=32768\n"
        assert out.count(defaults) == 2  # shown, then restored by `default`
        assert "s1: 0=16384 1=500 2=16384 3=32768 4=32768 5=32768 6=0\n" in out
        assert "error: BYTES 'x' is not a whole number (give 0..4294967295)" in out
        assert "job 3 torn down" in out and out.rstrip().endswith("(no NetReduce jobs)")
        assert "job 4: workers h1, h2" in out and "  partial sums: 1 of 2 or those in after 20 ms" in out
        assert proc.stdin is not None
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        proc.wait(timeout=60)
        assert proc.returncode == 0
    finally:
        stop_cli(proc, tmp_path)
    assert leftovers(tmp_path / "rack", ["s1", "h1", "h2"]) == []


def test_a_second_network_is_refused_naming_the_first(tmp_path):
    """The machine's switch ports are held (here by this test session); a network started by
    someone else says who holds them at once, instead of colliding on ports and interfaces."""
    from gradswitch.net.bmv2 import LOCK_HOLDER_ENV

    env = {k: v for k, v in os.environ.items() if k != LOCK_HOLDER_ENV}  # not a child of the holder
    env["GRADSWITCH_RUNTIME_DIR"] = str(tmp_path)
    result = subprocess.run(GRADSWITCH + ["net", "--topo", "rack", "--hosts", "2", "--pingall"], cwd=REPO_ROOT,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    holder = f"error: this machine's switch ports are in use by pid {os.getpid()} ("
    assert len(lines) == 1 and lines[0].startswith(holder), lines
    assert lines[0].endswith("wait for it to finish or stop it (gradswitch clean removes what a killed one left)")
    assert leftovers(tmp_path / "rack", ["s1", "h1", "h2"]) == []
