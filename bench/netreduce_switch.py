"""Switch-only NetReduce aggregation rate: contributions and values one BMv2 switch sums per second.

One simple_switch_grpc running gradswitch.p4 (the committed build) with a flat NetReduce job of
N workers, programmed exactly as the controller programs it; its ports are veth pairs whose
other ends are raw sockets of this process (no Mininet hosts, no RoCE stack, no shaping).
This process plays the N workers: cell after cell it sends the N contributions (valid packets
of the job, message after message as the workers build them) and keeps at most --window cells
waiting for their result. The loop is closed: a single-threaded switch fed faster than it can
work livelocks, so the load is paced by the switch's own results. A cell counts when worker
0's copy of its result comes back, and every result's payload is checked against the exact
sum. Reports contributions/s, values/s and switch packets/s (N contributions in and N result
copies out per cell), the CPU the switch process used (all threads, and its busiest thread:
the ingress thread when it is the limit) and the machine's idle CPU. Needs root and BMv2.

    python -m bench.netreduce_switch [--workers 4] [--seconds 10] [--window 16] [--bmv2 PATH] [--tag before-log]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bench.common import NO_ENGINE, Limits, bmv2_option, save, use_bmv2
from gradswitch.control.controls import all_base_entries
from gradswitch.control.netreduce_jobs import place_job
from gradswitch.control.p4rt import P4Info, SwitchAddress, SwitchSession
from gradswitch.experiment.cpu_load import CpuSample, cpu_sample
from gradswitch.hosts.netreduce import message_packet
from gradswitch.net.bmv2 import Bmv2Config, Bmv2Process, one_switch_user_at_a_time
from gradswitch.net.local_ports import free_ports
from gradswitch.protocol.netreduce import DEFAULT_CREDITS, ELEMENTS, PACKET_BYTES, PACKETS, JobLayout
from gradswitch.protocol.paths import BMV2_JSON, P4INFO
from gradswitch.protocol.qpn import qpn, udp_source_port
from gradswitch.roce.headers import ICRC_LEN
from gradswitch.roce.wire import build_frame, parse_frame
from gradswitch.topology.generators import rack

ETH_P_ALL = 0x0003
JOB = 1


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextmanager
def veths(count: int) -> Iterator[list[tuple[str, str]]]:
    """`count` veth pairs (switch end, our end), up, without IPv6 or offloads; removed on exit."""
    tag = f"gsnb{os.getpid() % 10000}"
    pairs = [(f"{tag}s{i}", f"{tag}h{i}") for i in range(count)]
    try:
        for sw, host in pairs:
            _ip("link", "add", sw, "type", "veth", "peer", "name", host)
            for dev in (sw, host):
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1"], capture_output=True)
                _ip("link", "set", dev, "mtu", "9000", "up")
                for opt in ("rx", "tx", "sg", "tso", "gso", "gro"):
                    subprocess.run(["ethtool", "-K", dev, opt, "off"], capture_output=True)
        yield pairs
    finally:
        for sw, _ in pairs:
            subprocess.run(["ip", "link", "del", sw], capture_output=True)


def payload(rank: int, k: int, i: int) -> np.ndarray:
    """Worker `rank`'s values for packet i of message k: wrapping sums and INT_MIN lanes included."""
    rnd = np.random.default_rng(1000 * rank + 10 * k + i)
    v = rnd.integers(-(2**31), 2**31, ELEMENTS, dtype=np.int64)
    v[0] = -(2**31)
    return v.astype(np.int32)


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of every thread of a process."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def measure(args: argparse.Namespace, run_dir: Path) -> dict[str, object]:
    n, credits = args.workers, args.credits
    topo = rack(hosts=n)
    hosts = [h.name for h in topo.hosts]
    layout = JobLayout(JOB, n, credits)
    if not 1 <= args.window <= credits * PACKETS:
        raise SystemExit(f"--window must be 1..{credits * PACKETS} (credits x packets per message): a worker "
                         "may not be further ahead than its credits")
    job = place_job(topo, JOB, hosts, credits, [])
    entries = all_base_entries(topo, "s1") + job.switches["s1"].entries
    # One period of the job's window: 2C messages; later messages reuse these frames (same cells,
    # same message numbers: every cell is fresh again once the other shadow copy has been used).
    period = layout.window_messages * PACKETS
    frames: list[list[bytes]] = []
    expected: list[bytes] = []
    for cell in range(period):
        k, i = divmod(cell, PACKETS)
        per_rank = []
        total = np.zeros(ELEMENTS, dtype=np.int64)
        for r in range(n):
            src, dst = topo.hosts[r], topo.hosts[layout.peer(r)]
            values = payload(r, k, i)
            total += values
            t = message_packet(layout, r, k, i, values.astype(">i4").tobytes())
            per_rank.append(build_frame(t, src.ip, dst.ip, src.mac, dst.mac, ident=cell,
                                        src_port=udp_source_port(qpn(r, layout.peer(r), JOB))))
        frames.append(per_rank)
        expected.append((((total + 2**31) % 2**32) - 2**31).astype(">i4").tobytes())
    with veths(n) as pairs:
        ports = {topo.attachment(h)[1]: pairs[r][0] for r, h in enumerate(hosts)}
        grpc_port, thrift_port = free_ports(2)
        proc = Bmv2Process(Bmv2Config("nrbench", 0, grpc_port, thrift_port, ports, run_dir, log_level=args.log_level))
        proc.start()
        try:
            with SwitchSession(SwitchAddress("nrbench", 0, grpc_port, thrift_port), P4Info.from_file(P4INFO)) as sess:
                sess.push_pipeline(P4INFO, BMV2_JSON, force=True)
                sess.insert(entries)
                socks = []
                for _, host_end in pairs:
                    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                    s.bind((host_end, 0))
                    socks.append(s)
                rx = socks[0]
                rx.settimeout(5.0)
                assert proc.pid is not None
                return _loop(args, proc.pid, socks, rx, frames, expected)
        finally:
            proc.stop()


def _loop(args: argparse.Namespace, pid: int, socks: list[socket.socket], rx: socket.socket,
          frames: list[list[bytes]], expected: list[bytes]) -> dict[str, object]:
    n = len(socks)
    period = len(frames)
    sent = done = 0
    wrong = 0
    warmup = 2 * period
    started = stopped = 0.0
    cpu0: dict[int, float] = {}
    machine0: CpuSample | None = None
    while True:
        while sent - done < args.window:
            for r, s in enumerate(socks):
                s.send(frames[sent % period][r])
            sent += 1
        try:
            frame = rx.recv(65536)
        except TimeoutError:
            raise SystemExit(f"no result for cell {done} within 5 s ({sent} sent): the switch lost a packet "
                             "(see its log)") from None
        if len(frame) < 64 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
            continue  # not a RoCE result (nothing else should come, but the kernel may talk)
        got = frame[-ICRC_LEN - PACKET_BYTES : -ICRC_LEN]
        if got != expected[done % period]:
            wrong += 1
        if done < period and not parse_frame(frame).icrc_ok:
            raise SystemExit(f"result {done} has a wrong ICRC")
        done += 1
        if done == warmup:
            started = time.monotonic()
            cpu0 = thread_cpu(pid)
            machine0 = cpu_sample()
        elif started and (time.monotonic() - started >= args.seconds):
            stopped = time.monotonic()
            break
    idle = machine0.idle_share_until(cpu_sample()) if machine0 else None
    cpu1 = thread_cpu(pid)
    elapsed = stopped - started
    cells = done - warmup
    per_thread = sorted(((cpu1[t] - cpu0.get(t, 0.0)) / elapsed for t in cpu1), reverse=True)
    rate = cells * n / elapsed
    return {"cells": cells, "seconds": elapsed, "wrong_results": wrong,
            "contributions_per_s": rate, "values_per_s": rate * ELEMENTS,
            "switch_packets_per_s": 2 * rate,  # N contributions in, N result copies out per cell
            "switch_cpu": sum(per_thread), "switch_busiest_thread_cpu": per_thread[0],
            "switch_threads_cpu": [round(x, 3) for x in per_thread if x >= 0.01],
            "machine_cpu_idle": idle,
            # no link: the switch's busiest thread or the machine limits it
            **Limits(None, idle, "none (unshaped veths to this process)", per_thread[0]).figures()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--credits", type=int, default=DEFAULT_CREDITS)
    parser.add_argument("--window", type=int, default=16, help="cells waiting for their result at most")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time (after two windows of warm-up)")
    parser.add_argument("--log-level", default="info", help="BMv2 -L (no effect on a build without logging macros)")
    bmv2_option(parser)
    parser.add_argument("--tag", default="", help="name suffix of the results file (e.g. before-log, after-nolog)")
    args = parser.parse_args()
    use_bmv2(args)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gradswitch-nrbench-") as tmp:
        r = measure(args, Path(tmp))
    print(f"{args.workers} workers, {ELEMENTS} values ({PACKET_BYTES} B) per packet, window {args.window} cells, "
          f"{r['seconds']:.1f} s, {r['cells']} cells, wrong results {r['wrong_results']}")
    print(f"contributions/s {r['contributions_per_s']:10.0f}   values/s {r['values_per_s']:12.0f}   "
          f"switch packets/s {r['switch_packets_per_s']:10.0f}")
    print(f"switch CPU {r['switch_cpu']:.2f} cores (threads {r['switch_threads_cpu']}), "
          f"machine idle {r['machine_cpu_idle']:.0%}: {r['limited_by']}")
    figures = {"workers": args.workers, "credits": args.credits, "window": args.window,
               "elements_per_packet": ELEMENTS, "payload_bytes": PACKET_BYTES, "log_level": args.log_level, **r}
    name = "-".join(x for x in ("netreduce-switch", args.tag) if x)
    print(f"written {save(name, figures, engines=NO_ENGINE, bmv2_log_level=args.log_level)}")


if __name__ == "__main__":
    with one_switch_user_at_a_time():  # no test or other benchmark on the switches meanwhile
        main()
