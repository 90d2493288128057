"""One side of the transport benchmark: a RoCE RC requester that writes N bytes, or its responder.

    python -m bench.transport_peer recv LOCAL_IP PEER_IP --bytes B [--mtu M --mode gbn|sr --window W]
    python -m bench.transport_peer send LOCAL_IP PEER_IP --bytes B [...]

The responder prints "ready", then one JSON line when the last write has arrived; the
requester posts the data as 64 KiB writes and prints one JSON line (seconds from the first
post to the last acknowledgement, packets, retransmissions) when every write is acknowledged.
"""

from __future__ import annotations

import argparse
import json
import time

from gradswitch.roce.engine import Engine, RawSocketLink
from gradswitch.roce.qp import Mode, QpConfig

JOB = 9
RKEY = 0xBE5C
WRITE_BYTES = 64 << 10
SENDER_QPN, RECEIVER_QPN = JOB << 16 | 0x0101, JOB << 16 | 0x0202


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=("send", "recv"))
    p.add_argument("local_ip")
    p.add_argument("peer_ip")
    p.add_argument("--bytes", type=int, default=16 << 20)
    p.add_argument("--mtu", type=int, default=1024)
    p.add_argument("--mode", choices=Mode.names(), default=str(Mode.GBN))
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--ifname", default="eth0")
    p.add_argument("--timeout", type=float, default=300.0)
    a = p.parse_args()
    engine = Engine(RawSocketLink(a.ifname, a.local_ip, job=JOB), a.local_ip)
    sender = a.role == "send"
    cfg = QpConfig(qpn=SENDER_QPN if sender else RECEIVER_QPN, remote_qpn=RECEIVER_QPN if sender else SENDER_QPN,
                   mode=Mode(a.mode), mtu=a.mtu, window=a.window, rto=0.05,
                   peer=a.peer_ip)
    writes = -(-a.bytes // WRITE_BYTES)
    if not sender:
        engine.register(RKEY, WRITE_BYTES)
        qp = engine.connect(cfg, a.peer_ip)
        engine.resolve_peers(10.0)
        print("ready", flush=True)
        done = 0

        def arrived() -> bool:
            nonlocal done
            done += len(engine.recv_completions(qp))
            return bool(done >= writes)

        engine.run_until(arrived, a.timeout, f"{writes} writes")
        end = time.monotonic() + 0.3  # answer the last retransmissions, if any
        while time.monotonic() < end:
            engine.poll(0.05)
        print(json.dumps({"writes": done, "drops": dict(engine.stats.drops)}), flush=True)
        return
    qp = engine.connect(cfg, a.peer_ip)
    engine.resolve_peers(10.0)
    payload = bytes(range(256)) * (WRITE_BYTES // 256)
    start = time.monotonic()
    for i in range(writes):
        qp.requester.post_write(payload, 0, RKEY, imm=i)
    engine.run_until(qp.requester.idle, a.timeout, "acknowledgements")
    seconds = time.monotonic() - start
    print(json.dumps({"seconds": seconds, "bytes": writes * WRITE_BYTES, "tx_packets": engine.stats.tx_packets,
                      "retransmitted": qp.requester.counters["retransmitted"]}), flush=True)


if __name__ == "__main__":
    main()
