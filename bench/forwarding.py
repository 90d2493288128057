"""Packets per second one BMv2 switch forwards with gradswitch.p4 vs a one-table program.

Both programs run on the same simple_switch_grpc build in the same run, fed the same plain UDP
packets through `--use-files` in a closed loop: never more than WINDOW packets beyond what the
switch has written out, enough to keep every BMv2 thread busy between the feeder's checks (one
a millisecond, reading only what is new in the output pcap), and its queues deep enough that
none is dropped. The rate is taken from the output pcap's timestamps after the first WARMUP
packets: BMv2 builds the packet headers and metadata (PHV) of each packet in flight once, about
a million instructions each, and reuses them after. (Fed open loop, a switch drops what its
queues cannot hold and the rate of what survives swings from run to run; measured over a tenth
of a second, so did the figure.) The hosts' kernel plays no part. Prints both rates, their ratio
and what limited each, and writes bench/results/NAME.json.

    python -m bench.forwarding [--packets 60000] [--runs 5] [--bmv2 PATH] [--name forwarding]
                               [--compiled JSON P4INFO]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.common import NO_ENGINE, Limits, MachineMeter, bmv2_option, save, use_bmv2
from bench.programs import Program, compiled_option, gradswitch, one_table, plain_udp
from gradswitch.control.bmv2_thrift import Bmv2Thrift
from gradswitch.control.p4rt import P4Info
from gradswitch.control.pcap import PcapTail, read_timed
from gradswitch.control.trace_replay import TraceSwitch
from gradswitch.net.bmv2 import one_switch_user_at_a_time
from gradswitch.protocol.polling import wait_until

WINDOW = 256  # packets in flight at most
WARMUP = 10000  # output packets left out of the rate (PHVs built once per packet in flight)


def rate(program: Program, packets: list[bytes], run_dir: Path) -> tuple[float, Limits]:
    """Packets per second out of the switch in its steady state, and what limited it (no links)."""
    sw = TraceSwitch([1, 2], run_dir=run_dir)
    sw.start(program.entries, P4Info.from_file(program.p4info), program.p4info, program.json)
    out = PcapTail(sw.out_path(2))
    try:
        with Bmv2Thrift(sw.address.thrift_port) as thrift:
            thrift.set_all_queue_depths(WINDOW + 64)  # the whole window fits a queue: nothing is dropped
        with MachineMeter(sw.process.pid) as meter:
            sw.replay_paced(1, packets, out_port=2, ahead=WINDOW, interval=0.001)
            wait_until(lambda: out.poll() >= len(packets), 600, interval=0.01, what="every packet out")
    finally:
        out.close()
        sw.stop()
    stamps = [ts for ts, _ in read_timed(sw.out_path(2))]
    if len(stamps) != len(packets):
        raise RuntimeError(f"{len(packets) - len(stamps)} of {len(packets)} packets were not forwarded")
    limits = Limits(None, meter.cpu_idle, "none (pcap files in and out)", meter.process_cores)
    steady = stamps[WARMUP:]
    return (len(steady) - 1) / ((steady[-1] - steady[0]) / 1e6), limits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=60000, help=f"per run (the first {WARMUP} are a warm-up)")
    parser.add_argument("--name", default="forwarding", help="bench/results/NAME.json (default forwarding)")
    parser.add_argument("--runs", type=int, default=5, help="measure both programs this many times; the median ratio")
    compiled_option(parser)
    bmv2_option(parser)
    args = parser.parse_args()
    use_bmv2(args)
    packets = plain_udp(args.packets)
    ours = gradswitch(args.compiled)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        base = one_table(t)
        runs: list[dict[str, Any]] = []
        for i in range(args.runs):  # the two programs alternate, so that a change in the machine's load hits both
            ours_pps, ours_limits = rate(ours, packets, t / f"ours{i}")
            base_pps, base_limits = rate(base, packets, t / f"minimal{i}")
            print(f"gradswitch.p4:  {ours_pps:9.0f} packets/s   {ours_limits.line()}")
            print(f"one-table:      {base_pps:9.0f} packets/s   {base_limits.line()}", flush=True)
            runs.append({"gradswitch_pps": ours_pps, "minimal_pps": base_pps, "ratio": ours_pps / base_pps,
                         "gradswitch_limits": ours_limits.figures(), "minimal_limits": base_limits.figures()})
    ratio = statistics.median(float(r["ratio"]) for r in runs)
    each = ", ".join(f"{r['ratio']:.2f}" for r in runs)
    print(f"ratio:          {ratio:9.2f} (gradswitch / one-table, {args.packets} packets, same build, "
          f"median of {args.runs} run(s): {each})")
    path = save(args.name, {"packets": args.packets, "window": WINDOW, "warmup": WARMUP,
                            "gradswitch": {"json": str(args.compiled[0])}, "ratio": ratio, "runs": runs},
                engines=NO_ENGINE)
    print(f"written {path}")


if __name__ == "__main__":
    with one_switch_user_at_a_time():  # no test or other benchmark on the switches meanwhile
        main()
