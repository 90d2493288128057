"""Links, ports and queues against answers computed by hand: one message over two store-and-forward links,
a strict-priority queue served first, tail drop exactly at a queue's byte limit."""

from __future__ import annotations

import pytest

from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.generators import rack
from tests.ns3.helpers import deliveries, message_wires, run_writes, store_and_forward_s, write_job

pytestmark = pytest.mark.ns3


@pytest.mark.parametrize(("size", "mtu", "mbps", "delay_s"), [
    (1 << 20, 4096, 20, 1e-6),
    (10_000, 1024, 100_000, 5e-6),
    (4, 256, 1000, 0.0),
    (3 * 4096, 4096, 10, 2e-3),
])
def test_one_message_takes_its_bytes_over_the_rate_plus_the_delays(tmp_path, size, mtu, mbps, delay_s):
    """h1 -> s1 -> h2: the receiver has the whole message (size + headers)/rate + one packet's store and
    forward + 2 delays after it was posted, every iteration."""
    topo = rack(2, bw_mbps=mbps)
    result = run_writes(topo, [write_job(1, "h1", "h2", [size], mtu=mtu, iterations=3)], tmp_path,
                        SimSettings(link_delay_s=delay_s))
    want = store_and_forward_s(size, mtu, mbps * 1e6, delay_s)
    got = [d["delivered"] - d["posted"] for d in deliveries(result, 1)]
    assert len(got) == 3
    for t in got:
        assert t == pytest.approx(want, rel=1e-9, abs=len(message_wires(size, mtu)) * 1e-12)
    worker = next(n for n in result["jobs"][0]["nodes"] if n["node_id"] == 1)
    assert all(it["correct"] for it in worker["iterations"])


def _two_writers(tmp_path, priority: bool, size: int = 256 << 10):
    """h1 (job 1) and h2 (job 2) write `size` bytes each to h3 at once: s1's port to h3 takes both; job 1's
    packets are in the front layers' class, at DLCP priority 6 when priority is on, else both at 0."""
    topo = rack(3, bw_mbps=100)
    dlcp = {"priority": True, "drop": False, "spray": False} if priority else None
    jobs = [write_job(1, "h1", "h3", [size], layer_class=0, dlcp=dlcp), write_job(2, "h2", "h3", [size])]
    result = run_writes(topo, jobs, tmp_path)
    return [deliveries(result, j)[0]["delivered"] for j in (1, 2)], result


def test_a_higher_priority_queue_is_served_first(tmp_path):
    (first, second), result = _two_writers(tmp_path / "on", priority=True)
    size, rate = 256 << 10, 100e6
    alone = store_and_forward_s(size, 4096, rate, 1e-6)
    both = 2 * sum(message_wires(size, 4096)) * 8 / rate
    # job 1 as if alone but for the job 2 packet on the wire when its first packet came, and h3's ACKs
    assert alone <= first <= alone + 2 * 4170 * 8 / rate
    assert second >= both
    events = result["switches"]["s1"]["dlcp"]["1"]
    assert events["classified"] > 0


def test_without_priority_the_two_share_the_port(tmp_path):
    (first, second), _ = _two_writers(tmp_path / "off", priority=False)
    alone = store_and_forward_s(256 << 10, 4096, 100e6, 1e-6)
    assert first > 1.8 * alone  # interleaved with job 2's packets: the test above can fail
    assert second > 1.8 * alone


def test_a_queue_drops_at_its_byte_limit_and_the_transport_recovers(tmp_path):
    """Two senders into one port whose queue holds 5 full packets: it fills to the limit, and only then drops
    (its fullest is within one packet of the limit and never over it); go-back-N resends, the data arrive whole."""
    limit = 5 * 4154
    topo = rack(3, bw_mbps=100)
    jobs = [write_job(1, "h1", "h3", [256 << 10]), write_job(2, "h2", "h3", [256 << 10])]
    result = run_writes(topo, jobs, tmp_path, SimSettings(queue_bytes=limit))
    port = result["switches"]["s1"]["ports"]["3"]
    assert port["drops"] > 0
    assert limit - 4170 < port["max_queue_bytes"] <= limit
    assert result["switches"]["s1"]["drops"]["queue-full"] == port["drops"]
    for job in result["jobs"]:
        receiver = next(n for n in job["nodes"] if n["node_id"] == 1)
        assert receiver["ok"] and all(it["correct"] for it in receiver["iterations"])
        sender = next(n for n in job["nodes"] if n["node_id"] == 0)
        assert sender["stats"]["requester"]["retransmitted"] > 0


def test_a_queue_deep_enough_drops_nothing(tmp_path):
    topo = rack(3, bw_mbps=100)
    jobs = [write_job(1, "h1", "h3", [256 << 10]), write_job(2, "h2", "h3", [256 << 10])]
    result = run_writes(topo, jobs, tmp_path, SimSettings(queue_bytes=1 << 20))
    assert result["switches"]["s1"]["ports"]["3"]["drops"] == 0
    assert result["switches"]["s1"]["ports"]["3"]["max_queue_bytes"] > 5 * 4154
