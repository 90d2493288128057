"""RoCE transport throughput of one sender/receiver pair: through one BMv2 switch vs a bare veth pair.

Both sides run the same userspace RC transport (bench/transport_peer.py: 64 KiB WRITEs,
acknowledged end to end) in network namespaces; the only difference is what joins them: one
BMv2 switch running gradswitch.p4 (a Mininet `rack` of two hosts), or one veth pair. Links
are unshaped unless --bw is given, so the figure is the cost of the switch (and of Python).
Prints goodput per path and mode and the ratio switch / direct measured in one run; writes
bench/results/transport.json. Needs root and BMv2.

    python -m bench.transport [--bytes 8MiB] [--mtu 1024] [--modes gbn,sr] [--bw MBPS] [--bmv2 PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import NO_ENGINE, Limits, MachineMeter, bmv2_option, save, use_bmv2
from gradswitch.cli.main import parse_size
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.bmv2 import one_switch_user_at_a_time
from gradswitch.net.network import NetworkOptions
from gradswitch.net.vethpair import veth_pair
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.roce.wire import ROCE_OVERHEAD
from gradswitch.topology.generators import rack

Popen = Callable[[str, list[str]], "subprocess.Popen[str]"]  # (side, argv) -> process




def transfer(popen: Popen, ips: tuple[str, str], args: argparse.Namespace, mode: str,
             switch_pid: int | None = None) -> dict[str, Any]:
    """One transfer a -> b; returns the sender's figures with goodput and what limited it."""
    common = ["--bytes", str(args.bytes), "--mtu", str(args.mtu), "--mode", mode]
    peer = [sys.executable, "-m", "bench.transport_peer"]
    receiver = popen("b", [*peer, "recv", ips[1], ips[0], *common])
    try:
        assert receiver.stdout is not None
        line = receiver.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"receiver did not start: {line!r} {receiver.stderr.read() if receiver.stderr else ''}")
        with MachineMeter(switch_pid) as meter:
            sender = popen("a", [*peer, "send", ips[0], ips[1], *common])
            out, err = sender.communicate(timeout=600)
        if sender.returncode != 0:
            raise RuntimeError(f"sender failed: {err}")
        receiver.communicate(timeout=60)
    finally:
        if receiver.poll() is None:
            receiver.kill()
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["goodput_mbps"] = result["bytes"] * 8 / result["seconds"] / 1e6
    # The data's link (sender to receiver) carries every payload byte plus each packet's headers.
    load = (result["goodput_mbps"] * (1 + ROCE_OVERHEAD / args.mtu) / args.bw) if args.bw else None
    result["limits"] = Limits(load, meter.cpu_idle, "unshaped veths", meter.process_cores).figures()
    return result


def run_direct(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    with veth_pair(rate_mbps=args.bw) as (a, b):
        sides = {"a": a, "b": b}

        def popen(side: str, argv: list[str]) -> subprocess.Popen[str]:
            return subprocess.Popen(sides[side].command(argv), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)

        return transfer(popen, (a.ip, b.ip), args, mode)


def run_switched(net: Testbed, args: argparse.Namespace, mode: str) -> dict[str, Any]:
    hosts = {"a": "h1", "b": "h2"}

    def popen(side: str, argv: list[str]) -> subprocess.Popen[str]:
        proc: subprocess.Popen[str] = net.host(hosts[side]).popen(
            argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/local/bin:/usr/bin:/bin"})
        return proc

    return transfer(popen, (net.topo.host("h1").ip, net.topo.host("h2").ip), args, mode,
                    net.net.get("s1").switch_pid)


def _limits(result: dict[str, Any]) -> Limits:
    return Limits.of_figures(result["limits"], "unshaped veths")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=parse_size, default=parse_size("8MiB"))
    parser.add_argument("--mtu", type=int, default=1024, choices=(256, 1024, 4096))
    parser.add_argument("--modes", default="gbn,sr")
    parser.add_argument("--bw", type=float, help="shape both paths to this rate (Mb/s)")
    bmv2_option(parser)
    args = parser.parse_args()
    use_bmv2(args)
    modes = args.modes.split(",")
    figures: dict[str, Any] = {"bytes": args.bytes, "mtu": args.mtu, "bw_mbps": args.bw, "modes": {}}
    with Testbed(rack(hosts=2, bw_mbps=args.bw), NetworkOptions(run_dir=Path("/tmp/gradswitch-bench-transport"))
                     ) as net:
        switched = {m: run_switched(net, args, m) for m in modes}
    for mode in modes:
        direct = run_direct(args, mode)
        ratio = switched[mode]["goodput_mbps"] / direct["goodput_mbps"]
        figures["modes"][mode] = {"switch": switched[mode], "direct": direct, "ratio": ratio}
        print(f"{mode}: through BMv2 {switched[mode]['goodput_mbps']:8.1f} Mb/s "
              f"({switched[mode]['retransmitted']} retransmitted), direct veth {direct['goodput_mbps']:8.1f} Mb/s "
              f"({direct['retransmitted']} retransmitted), ratio {ratio:.2f}")
        for path, result in (("through BMv2", switched[mode]), ("direct veth", direct)):
            print(f"  {path}: {_limits(result).line()}")
    links = f"links at {args.bw:g} Mb/s" if args.bw else "unshaped"
    print(f"{args.bytes / 2**20:.0f} MiB per transfer, MTU {args.mtu}, {links}, same machine, one run")
    print(f"written {save('transport', figures, engines=NO_ENGINE)}")


if __name__ == "__main__":
    with one_switch_user_at_a_time():  # no test or other benchmark on the switches meanwhile
        main()
