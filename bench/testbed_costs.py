"""The testbed's own costs, measured once, for the ns-3 model of it (docs/simulator.md, "Cross-validation").

The simulator stands for the testbed when it is given what the testbed itself adds besides its links:

- `switch_delay_us`: what one BMv2 switch adds to a packet's way, unloaded. Ping (payload PACKET_BYTES, the
  size of a RoCE packet of MTU 4096) between two hosts through one BMv2 switch (a Mininet `rack`, unshaped
  links), against the same ping between two namespaces joined by a bare veth pair: half the difference of
  the median round trips (a round trip crosses the switch twice).
- `host_delay_us`: what a Python host adds to each message it receives before the next one leaves. A RoCE
  ping-pong of one-packet WRITEs with immediate (the userspace transport of gradswitch/hosts/,
  gradswitch/roce/engine.py) over the
  bare veth pair, against the kernel's ping of the same size there: half the difference of the medians.
- A check, not an input: the same RoCE ping-pong through the switch, against the round trip the two costs
  predict (direct RoCE round trip + 2 x switch_delay).

Never fitted to the runs bench.crossval compares: those read this file. Needs root and BMv2 (run it on an
idle machine: `--quiet` holds /tmp/gradswitch-quiet meanwhile); writes bench/results/testbed-costs.json.

    python -m bench.testbed_costs [--rounds 300] [--bmv2 PATH] [--quiet]
    python -m bench.testbed_costs peer ping|pong LOCAL_IP PEER_IP --rounds N   (one side of the ping-pong)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.common import NO_ENGINE, RESULTS, MachineMeter, bmv2_option, save, use_bmv2
from gradswitch.experiment.tables.reading import load
from gradswitch.protocol.paths import REPO_ROOT

PACKET_BYTES = 4096  # payload of one RoCE packet at MTU 4096 (NetReduce's, and the compared runs')
ICMP_HEADER = 8
QUIET_FLAG = Path("/tmp/gradswitch-quiet")  # other helpers pause their heavy work while it exists
COSTS = RESULTS / "testbed-costs.json"
JOB = 11
RKEY = 0xC057
PING_QPN, PONG_QPN = JOB << 16 | 0x0101, JOB << 16 | 0x0202
RTT = re.compile(r"time=([\d.]+) ms")

Popen = Callable[[list[str]], "subprocess.Popen[str]"]  # argv -> the process running it on one side (its namespace)


@contextlib.contextmanager
def quiet_machine(enabled: bool) -> Iterator[None]:
    """Hold /tmp/gradswitch-quiet while measuring (removed on the way out, also after an error)."""
    if not enabled:
        yield
        return
    QUIET_FLAG.write_text(f"{sys.argv[0]} pid {__import__('os').getpid()}\n")
    try:
        yield
    finally:
        QUIET_FLAG.unlink(missing_ok=True)


# ---- the ping-pong's two sides (run in the hosts' namespaces) ----


def peer(role: str, local_ip: str, peer_ip: str, rounds: int, ifname: str) -> None:
    """ping: post a one-packet WRITE with immediate, wait for the peer's, `rounds` times; prints one JSON line
    with every round trip. pong: answer each arriving message with one of its own."""
    from gradswitch.roce.engine import Engine, RawSocketLink
    from gradswitch.roce.qp import Mode, QpConfig

    engine = Engine(RawSocketLink(ifname, local_ip, job=JOB), local_ip)
    engine.register(RKEY, PACKET_BYTES)
    ping = role == "ping"
    cfg = QpConfig(qpn=PING_QPN if ping else PONG_QPN, remote_qpn=PONG_QPN if ping else PING_QPN, mode=Mode.GBN,
                   mtu=PACKET_BYTES, window=32, rto=0.5, peer=peer_ip)
    qp = engine.connect(cfg, peer_ip)
    engine.resolve_peers(10.0)
    payload = bytes(PACKET_BYTES)
    received = 0

    def arrived() -> bool:
        nonlocal received
        received += len(engine.recv_completions(qp))
        return received > 0

    if not ping:
        print("ready", flush=True)
    rtts = []
    for i in range(rounds):
        if ping:
            start = time.monotonic()
            qp.requester.post_write(payload, 0, RKEY, imm=i)
            engine.run_until(arrived, 30.0, f"reply {i}")
            rtts.append(time.monotonic() - start)
        else:
            engine.run_until(arrived, 60.0, f"message {i}")
            qp.requester.post_write(payload, 0, RKEY, imm=i)
        received -= 1
    engine.run_until(qp.requester.idle, 30.0, "the last acknowledgement")
    end = time.monotonic() + 0.2  # answer the peer's last retransmissions, if any
    while time.monotonic() < end:
        engine.poll(0.05)
    print(json.dumps({"rtt_s": rtts, "retransmitted": qp.requester.counters["retransmitted"]}), flush=True)


# ---- measurements ----


def ping_rtts(side: Popen, dst_ip: str, rounds: int) -> list[float]:
    """Round trips (s) of the kernel's ping with a PACKET_BYTES payload, one every 10 ms."""
    proc = side(["ping", "-n", "-c", str(rounds), "-i", "0.01", "-s", str(PACKET_BYTES - ICMP_HEADER), dst_ip])
    out, err = proc.communicate(timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"ping {dst_ip} failed: {err.strip()}")
    rtts = [float(m) / 1e3 for m in RTT.findall(out)]
    if len(rtts) < rounds * 0.9:
        raise RuntimeError(f"ping {dst_ip}: {len(rtts)} of {rounds} replies")
    return rtts[5:]  # the first few resolve addresses


def roce_rtts(ping_side: Popen, pong_side: Popen, ips: tuple[str, str], rounds: int, ifname: str) -> list[float]:
    """Round trips (s) of the RoCE ping-pong between two Python hosts."""
    run = [sys.executable, "-m", "bench.testbed_costs", "peer"]
    pong = pong_side([*run, "pong", ips[1], ips[0], "--rounds", str(rounds), "--ifname", ifname])
    try:
        assert pong.stdout is not None
        if pong.stdout.readline().strip() != "ready":
            raise RuntimeError(f"pong did not start: {pong.stderr.read() if pong.stderr else ''}")
        ping = ping_side([*run, "ping", ips[0], ips[1], "--rounds", str(rounds), "--ifname", ifname])
        out, err = ping.communicate(timeout=300)
        if ping.returncode != 0:
            raise RuntimeError(f"ping side failed: {err.strip()}")
        pong.communicate(timeout=60)
    finally:
        if pong.poll() is None:
            pong.kill()
    result = json.loads(out.strip().splitlines()[-1])
    rtts: list[float] = result["rtt_s"]
    return rtts[5:]


def summary(rtts: list[float]) -> dict[str, float]:
    return {"median_us": statistics.median(rtts) * 1e6, "p10_us": _quantile(rtts, 0.1) * 1e6,
            "p90_us": _quantile(rtts, 0.9) * 1e6, "n": len(rtts)}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(rounds: int) -> dict[str, Any]:
    from gradswitch.experiment.testbed import Testbed
    from gradswitch.net.network import NetworkOptions
    from gradswitch.net.vethpair import veth_pair
    from gradswitch.topology.generators import rack

    figures: dict[str, Any] = {"packet_bytes": PACKET_BYTES, "rounds": rounds}
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/local/bin:/usr/bin:/bin"}

    def pipes(argv: list[str], **kw: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

    with MachineMeter() as meter, veth_pair() as (a, b):
        sides: dict[str, Popen] = {s.ip: (lambda argv, s=s: pipes(s.command(argv))) for s in (a, b)}  # type: ignore[misc]
        figures["direct_ping"] = summary(ping_rtts(sides[a.ip], b.ip, rounds))
        figures["direct_roce"] = summary(roce_rtts(sides[a.ip], sides[b.ip], (a.ip, b.ip), rounds, a.ifname))
    figures["direct_cpu_idle"] = meter.cpu_idle
    with Testbed(rack(hosts=2), NetworkOptions(run_dir=Path("/tmp/gradswitch-bench-costs"))) as net:
        h1, h2 = net.topo.host("h1"), net.topo.host("h2")

        def in_host(name: str) -> Popen:
            def start(argv: list[str]) -> subprocess.Popen[str]:
                proc: subprocess.Popen[str] = net.host(name).popen(
                    argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                return proc
            return start

        with MachineMeter(net.net.get("s1").switch_pid) as meter:
            figures["switched_ping"] = summary(ping_rtts(in_host("h1"), h2.ip, rounds))
            figures["switched_roce"] = summary(roce_rtts(in_host("h1"), in_host("h2"), (h1.ip, h2.ip), rounds,
                                                         "eth0"))
        figures["switched_cpu_idle"] = meter.cpu_idle
    switch_us = (figures["switched_ping"]["median_us"] - figures["direct_ping"]["median_us"]) / 2
    host_us = (figures["direct_roce"]["median_us"] - figures["direct_ping"]["median_us"]) / 2
    predicted = figures["direct_roce"]["median_us"] + 2 * switch_us
    figures["costs"] = {"switch_delay_us": max(0.0, switch_us), "host_delay_us": max(0.0, host_us)}
    figures["check"] = {"switched_roce_predicted_us": predicted,
                        "switched_roce_measured_us": figures["switched_roce"]["median_us"],
                        "ratio": figures["switched_roce"]["median_us"] / predicted if predicted > 0 else None}
    return figures


def _build_of(doc: dict[str, Any]) -> str | None:
    found = doc.get("toolchain", {}).get("bmv2", {}).get("path")
    return str(found) if found else None


def measured_with(path: Path = COSTS) -> str | None:
    """The simple_switch_grpc the costs were measured with (None: not recorded)."""
    try:
        return _build_of(load(path.parent, path.name))
    except (OSError, ValueError):
        return None


def load_costs(path: Path = COSTS, bmv2: str | None = None) -> dict[str, float]:
    """The measured costs (switch_delay_us, host_delay_us) bench.crossval gives the simulator; with `bmv2` (the
    simple_switch_grpc the runs will use) only costs measured with that same build."""
    try:
        doc = load(path.parent, path.name)
        costs: dict[str, float] = doc["costs"]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"error: {path}: no measured costs ({e}); run `python -m bench.testbed_costs` first") from None
    measured = _build_of(doc)
    if bmv2 is not None and measured != bmv2:
        raise SystemExit(f"error: {path}: costs measured with BMv2 {measured}, the runs would use {bmv2}: run "
                         f"`python -m bench.testbed_costs --bmv2 {bmv2}` first (a switch's cost depends on its build)")
    return costs


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "peer":
        p = argparse.ArgumentParser(prog="python -m bench.testbed_costs peer")
        p.add_argument("role", choices=("ping", "pong"))
        p.add_argument("local_ip")
        p.add_argument("peer_ip")
        p.add_argument("--rounds", type=int, required=True)
        p.add_argument("--ifname", default="eth0")
        a = p.parse_args(sys.argv[2:])
        peer(a.role, a.local_ip, a.peer_ip, a.rounds, a.ifname)
        return
    parser = argparse.ArgumentParser(prog="python -m bench.testbed_costs", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300, help="round trips per measurement (default 300)")
    parser.add_argument("--quiet", action="store_true", help=f"hold {QUIET_FLAG} while measuring")
    bmv2_option(parser)
    args = parser.parse_args()
    use_bmv2(args)
    from gradswitch.net.bmv2 import one_switch_user_at_a_time

    with one_switch_user_at_a_time(), quiet_machine(args.quiet):
        figures = measure(args.rounds)
    c = figures["costs"]
    for name in ("direct_ping", "direct_roce", "switched_ping", "switched_roce"):
        f = figures[name]
        print(f"{name:<14} median {f['median_us']:8.1f} us (p10 {f['p10_us']:.1f}, p90 {f['p90_us']:.1f}; {f['n']})")
    print(f"switch_delay_us {c['switch_delay_us']:.1f}, host_delay_us {c['host_delay_us']:.1f}; switched RoCE "
          f"round trip measured / predicted {figures['check']['ratio']:.2f}; CPU idle {figures['direct_cpu_idle']:.0%}"
          f" (direct), {figures['switched_cpu_idle']:.0%} (switched)")
    print(f"written {save('testbed-costs', figures, engines=NO_ENGINE)}")


if __name__ == "__main__":
    main()
