"""Ring, NetReduce and PS on the simulator against answers computed by hand (ring at N = 4: 2(N-1)/N S/B plus
latency; NetReduce: S/B plus latency), every sum checked, exact and digest alike; loss recovered."""

from __future__ import annotations

import pytest

from gradswitch.experiment.spec import ExperimentSpec, Topo
from gradswitch.roce.qp import Mode
from gradswitch.sim.sim_settings import CheckMode, SimSettings
from gradswitch.workload.job import Algorithm
from gradswitch.workload.plan import allreduce_bound_s
from tests.ns3.helpers import ACK_WIRE, message_wires, run_spec

pytestmark = pytest.mark.ns3

S = 1 << 20
MBPS = 20
RATE = MBPS * 1e6
DELAY = 1e-6


def worker_times(result, job: int = 1) -> list[list[float]]:
    return [[it["time_s"] for it in n["iterations"]] for n in result.nodes[job].values() if n["role"] == "worker"]


def all_correct(result) -> bool:
    return result.ok() and all(it["correct"] for job in result.nodes.values() for n in job.values()
                               for it in n["iterations"])


def test_ring_of_four_takes_its_steps_plus_latency(tmp_path):
    """Each of the 2(N-1) = 6 steps moves a chunk of S/N (64 packets) from every worker to the next through s1:
    its bytes over the rate, one packet's store and forward and two delays, while every host also sends the
    ACKs of the chunk it receives (AckReq every window/4 = 8 packets) ahead of its data; then the last ACK."""
    cfgs, result = run_spec(ExperimentSpec.of(algo=Algorithm.RING, workers=4, size_bytes=S, bw_mbps=MBPS, iterations=3),
                            tmp_path)
    assert all_correct(result) and result.checks[1] == CheckMode.EXACT
    wires = message_wires(S // 4, cfgs[0].mtu)
    step = (sum(wires) + max(wires)) * 8 / RATE + 2 * DELAY
    acks_per_step = -(-len(wires) // max(1, cfgs[0].window // 4))
    lower = 6 * step
    upper = lower + (6 * acks_per_step + 2) * ACK_WIRE * 8 / RATE + 2 * DELAY
    bound = allreduce_bound_s(Algorithm.RING, 4, 0, S, RATE / 8)
    for times in worker_times(result):
        assert len(times) == 3
        for t in times:
            assert lower <= t <= upper
            assert t / bound < 1.04  # 2(N-1)/N S/B plus headers (1.4 %) and latency


def test_netreduce_of_four_takes_s_over_b_plus_latency(tmp_path):
    """Every worker sends S up and gets S down (the sum): 64 messages of 4 packets on each link, pipelined
    under credits, plus one packet's store and forward, two delays, and the ACK of every message sharing the
    links with the data."""
    _, result = run_spec(ExperimentSpec.of(algo=Algorithm.NETREDUCE, workers=4, size_bytes=S, bw_mbps=MBPS,
                                           iterations=3), tmp_path)
    assert all_correct(result) and result.checks[1] == CheckMode.EXACT
    messages = S // 16384
    wires = [w for _ in range(messages) for w in message_wires(16384, 4096)]
    lower = (sum(wires) + max(wires)) * 8 / RATE + 2 * DELAY
    upper = lower + (messages + 2) * ACK_WIRE * 8 / RATE + 2 * DELAY
    for times in worker_times(result):
        for t in times:
            assert lower <= t <= upper
            assert t / allreduce_bound_s(Algorithm.NETREDUCE, 4, 0, S, RATE / 8) < 1.03
    events = result.switches["s1"]["netreduce_events"]["1"]
    assert events["completion"] == 3 * messages * 4  # one per cell (packet) of every iteration
    assert events["contribution"] == 4 * events["completion"]


def test_ring_over_netreduce_is_two_n_minus_one_over_n(tmp_path):
    times = {}
    for algo in (Algorithm.RING, Algorithm.NETREDUCE):
        _, result = run_spec(ExperimentSpec.of(algo=algo, workers=4, size_bytes=S, bw_mbps=MBPS, iterations=2),
                             tmp_path / str(algo))
        times[algo] = max(max(t) for t in worker_times(result))
    assert times[Algorithm.RING] / times[Algorithm.NETREDUCE] == pytest.approx(1.5, rel=0.02)


@pytest.mark.parametrize("topo", [Topo.RACK, Topo.LEAFSPINE])
def test_parameter_server_sums_are_exact_and_near_n_s_over_b(tmp_path, topo):
    _, result = run_spec(ExperimentSpec.of(algo=Algorithm.PS, workers=4, size_bytes=S, bw_mbps=MBPS, iterations=2,
                                           topo=topo), tmp_path)
    assert all_correct(result)
    bound = allreduce_bound_s(Algorithm.PS, 4, 1, S, RATE / 8)
    for times in worker_times(result):
        for t in times:
            assert bound < t < 1.2 * bound
    server = result.nodes[1][4]
    assert server["role"] == "server" and server["keys_served"] == 2 * S // (64 << 10)


@pytest.mark.parametrize("algo", [Algorithm.RING, Algorithm.NETREDUCE, Algorithm.PS])
def test_exact_and_digest_checks_time_alike(tmp_path, algo):
    """What the packets carry (values, or digests only) changes no timing; both checks pass."""
    spec = ExperimentSpec.of(algo=algo, workers=4, size_bytes=256 << 10, bw_mbps=MBPS, iterations=2,
                             topo=Topo.LEAFSPINE)
    runs = {}
    for mode in (CheckMode.EXACT, CheckMode.DIGEST):
        _, result = run_spec(spec, tmp_path / str(mode), SimSettings(check=mode))
        assert all_correct(result) and result.checks[1] == mode
        runs[mode] = worker_times(result)
    assert runs[CheckMode.EXACT] == runs[CheckMode.DIGEST]


@pytest.mark.parametrize(("algo", "transport"), [
    (Algorithm.RING, Mode.GBN), (Algorithm.RING, Mode.SR), (Algorithm.NETREDUCE, Mode.GBN),
    (Algorithm.NETREDUCE, Mode.SR), (Algorithm.PS, Mode.GBN)])
def test_loss_is_recovered_and_every_sum_stays_exact(tmp_path, algo, transport):
    spec = ExperimentSpec.of(algo=algo, workers=4, size_bytes=256 << 10, bw_mbps=MBPS, iterations=3, loss_pct=2.0,
                             transport=transport, topo=Topo.LEAFSPINE)
    _, result = run_spec(spec, tmp_path, SimSettings(loss_pct=spec.faults.loss_pct))
    assert all_correct(result)
    resent = sum(n["stats"]["requester"].get("retransmitted", 0) for n in result.nodes[1].values())
    dropped = sum(sw["drops"].get("fault-injected", 0) for sw in result.switches.values())
    assert dropped > 0 and resent > 0


@pytest.mark.parametrize("algo", [Algorithm.RING, Algorithm.NETREDUCE])
def test_a_crashed_worker_stops_its_job_and_hangs_nothing(tmp_path, algo):
    from gradswitch.workload.job import Crash

    spec = ExperimentSpec.of(algo=algo, workers=4, size_bytes=256 << 10, bw_mbps=MBPS, iterations=4,
                             crash=Crash(node=2, after=1))
    _, result = run_spec(spec, tmp_path)
    assert not result.ok() and not result.time_limit_hit
    crashed = result.nodes[1][2]
    assert "crashed after iteration 1" in crashed["error"] and len(crashed["iterations"]) == 2
    for nid in (0, 1, 3):
        assert not result.nodes[1][nid]["ok"] and "stopped" in result.nodes[1][nid]["error"]
