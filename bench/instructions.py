"""Instructions per packet BMv2 spends on gradswitch.p4 and on the one-table program, counted by callgrind.

Wall-clock rates on a shared two-core machine move with everyone else's load; instruction
counts do not. The switch runs under `valgrind --tool=callgrind` fed a pcap of plain UDP
packets (bench/forwarding.py's), twice (n1 and n2 packets); the difference over n2 - n1 is
the cost of one packet, start-up and pipeline push cancelled out. The same difference per
BMv2 thread says which one limits the switch: the one that receives packets (and zeroes their
metadata: `PHV::reset_metadata`), ingress, egress or transmit. Packets are fed in a closed loop
(at most 10 beyond the output), as a switch in a steady state sees them: BMv2 then reuses the
packet headers and metadata (PHVs) of packets it has sent instead of building one per queued
packet, which for gradswitch.p4 costs 1.2 M instructions each (a warm-up, paid once per
packet in flight). Queues are made deep enough (Thrift) that no packet is dropped.
Needs valgrind and BMv2. Writes bench/results/NAME.json.

    python -m bench.instructions [--bmv2 PATH] [--programs gradswitch,one-table] [--name instructions]
                                 [--compiled JSON P4INFO]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.common import NO_ENGINE, Limits, MachineMeter, bmv2_option, save, use_bmv2
from bench.programs import Program, compiled_option, gradswitch, one_table, plain_udp
from gradswitch.control.bmv2_thrift import Bmv2Thrift
from gradswitch.control.p4rt import P4Info
from gradswitch.control.trace_replay import TraceSwitch
from gradswitch.net.bmv2 import one_switch_user_at_a_time

PARTS = {  # what callgrind_annotate calls each part of a packet's way (inclusive counts)
    "receive": "SimpleSwitch::receive_(", "reset_metadata": "bm::PHV::reset_metadata()",
    "ingress": "SimpleSwitch::ingress_thread()", "egress": "SimpleSwitch::egress_thread(",
    "transmit": "SimpleSwitch::transmit_thread()",
}


def count(program: Program, packets: list[bytes], work: Path) -> dict[str, int]:
    """Instructions of one run of the switch over these packets: in total and per part."""
    out = work / f"callgrind-{program.name}-{len(packets)}.out"
    sw = TraceSwitch([1, 2], run_dir=work / f"{program.name}-{len(packets)}", timeout=600,
                     launcher=("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"))
    sw.start(program.entries, P4Info.from_file(program.p4info), program.p4info, program.json)
    try:
        with Bmv2Thrift(sw.address.thrift_port) as thrift:
            thrift.set_all_queue_depths(100_000)  # no packet dropped at an egress queue
        sw.replay_paced(1, packets, out_port=2)  # steady state: few packets in flight, their PHVs reused
        sw.wait({2: len(packets)}, timeout=1800)
    finally:
        sw.stop()
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
                               capture_output=True, text=True, check=True).stdout
    total = re.search(r"^([\d,]+) .*PROGRAM TOTALS", annotated, re.M)
    if total is None:
        raise RuntimeError(f"no totals in {out}")
    counts = {"total": int(total.group(1).replace(",", ""))}
    for part, symbol in PARTS.items():
        line = next((ln for ln in annotated.splitlines() if symbol in ln), None)
        counts[part] = int(line.split()[0].replace(",", "")) if line else 0
    return counts


def per_packet(program: Program, n1: int, n2: int, work: Path) -> dict[str, float]:
    packets = plain_udp(n2)
    a, b = count(program, packets[:n1], work), count(program, packets, work)
    return {part: (b[part] - a[part]) / (n2 - n1) for part in a}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", default="gradswitch,one-table")
    parser.add_argument("--packets", default="200,1000", help="n1,n2 (n2 below BMv2's input buffer of 1024)")
    parser.add_argument("--name", default="instructions", help="bench/results/NAME.json")
    compiled_option(parser)
    bmv2_option(parser)
    args = parser.parse_args()
    use_bmv2(args)
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            raise SystemExit(f"error: {tool} is not on PATH (apt install valgrind)")
    n1, n2 = (int(x) for x in args.packets.split(","))
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, MachineMeter() as meter:
        work = Path(tmp)
        programs = {p.name: p for p in (gradswitch(args.compiled), one_table(work))}
        for name in args.programs.split(","):
            print(f"{name}: {n1} then {n2} packets under callgrind ...", flush=True)
            figures[name] = per_packet(programs[name], n1, n2, work)
    # Instruction counts do not depend on the machine's load; what it was is kept all the same.
    limits = Limits(None, meter.cpu_idle, "none (pcap files, the switch under callgrind)").figures()
    print(f"\n{'instructions per packet':<24}" + "".join(f"{p:>16}" for p in ("total", *PARTS)))
    for name, f in figures.items():
        print(f"{name:<24}" + "".join(f"{f[p]:>16,.0f}" for p in ("total", *PARTS)))
    print("receive includes reset_metadata; the switch's rate follows its busiest thread")
    program = {"json": str(args.compiled[0]), "p4info": str(args.compiled[1])}
    figures_doc = {'packets': [n1, n2], 'gradswitch': program, 'per_packet': figures, **limits}
    print(f"written {save(args.name, figures_doc, engines=NO_ENGINE)}")


if __name__ == "__main__":
    with one_switch_user_at_a_time():
        main()
