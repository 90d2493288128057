"""A misbehaving host: mutated RoCE v2 packets aimed at a NetReduce job's switch and workers.

`python -m tests.mininet.fuzz JOB_CONFIG COUNT SEED` (run in a Mininet host that is not a member)
builds valid packets of the job (first, middle and last packets on its connections, ACKs)
and sends mutations of them through a raw socket: random bit flips, truncations and
extensions, and targeted changes of the opcode, PSN, QP, rkey, address, lengths and source
address. The switch must refuse them without touching any job's sums and the workers must
drop what reaches them; the job's results stay exact.
"""

from __future__ import annotations

import random
import socket
import sys
import time
from pathlib import Path

from gradswitch.hosts.netreduce import layout_of_config, message_packet
from gradswitch.protocol.netreduce import PACKET_BYTES, PACKETS
from gradswitch.protocol.qpn import qpn, udp_source_port
from gradswitch.roce.headers import Aeth, Bth, Opcode, Transport
from gradswitch.roce.wire import build_ipv4
from gradswitch.workload.job import JobConfig


def templates(cfg: JobConfig) -> list[tuple[bytes, str]]:
    """Valid packets of the job's connections (as the members would send them), with their destination."""
    workers = cfg.workers
    lay = layout_of_config(cfg)
    out = []
    for r, w in enumerate(workers):
        p = lay.peer(r)
        dst = workers[p].ip
        for k in range(3):
            for i in range(PACKETS):
                t = message_packet(lay, r, k, i, bytes(PACKET_BYTES))
                out.append((build_ipv4(t, w.ip, dst, src_port=udp_source_port(qpn(r, p, cfg.job_id))), dst))
        ack = Transport(Bth(Opcode.ACKNOWLEDGE, qpn(r, p, cfg.job_id), lay.initial_psn), aeth=Aeth.ack(0))
        out.append((build_ipv4(ack, workers[p].ip, w.ip), w.ip))
    return out


def mutate(packet: bytes, rnd: random.Random) -> bytes:
    data = bytearray(packet)
    kind = rnd.randrange(6)
    if kind == 0:  # bit flips anywhere after the IP header
        for _ in range(rnd.randint(1, 4)):
            pos = rnd.randrange(20, len(data))
            data[pos] ^= 1 << rnd.randrange(8)
    elif kind == 1:  # truncate
        data = data[: rnd.randrange(28, len(data))]
    elif kind == 2:  # extend
        data += bytes(rnd.randrange(1, 64))
    elif kind == 3:  # opcode
        data[28] = rnd.choice([0x00, 0x04, 0x07, 0x0A, 0x0C, 0x11, 0x64, rnd.randrange(256)])
    elif kind == 4:  # PSN / QP / reserved bits
        pos = rnd.choice([33, 34, 35, 37, 38, 39, 36])
        data[pos] = rnd.randrange(256)
    else:  # RETH fields (address, rkey, length) when present
        if len(data) > 60:
            pos = rnd.randrange(40, 56)
            data[pos] = rnd.randrange(256)
    length = len(data)
    if kind in (1, 2) and rnd.random() < 0.5:  # sometimes keep the IP total length consistent
        data[2:4] = length.to_bytes(2, "big")
    return bytes(data)


def main() -> int:
    cfg = JobConfig.load(Path(sys.argv[1]))
    count, seed = int(sys.argv[2]), int(sys.argv[3])
    rnd = random.Random(seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    pool = templates(cfg)
    sent = 0
    for n in range(count):
        packet, dst = rnd.choice(pool)
        try:
            sock.sendto(mutate(packet, rnd), (dst, 0))
            sent += 1
        except OSError:
            pass  # the kernel refuses some mutations (bad lengths): that is fine
        if n % 200 == 199:
            time.sleep(0.02)  # stay below what the shaped link carries
    print(sent, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
