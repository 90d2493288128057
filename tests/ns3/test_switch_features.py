"""DLCP (priority, selective drop as trimming, spraying), flowlet switching, the ECMP seed, the RoCE class,
background TCP and TensorLights on the simulator."""

from __future__ import annotations

import pytest

from gradswitch.experiment.spec import DlcpOptions, ExperimentSpec, Topo
from gradswitch.roce.qp import Mode
from gradswitch.sim.sim_settings import CheckMode, DlcpSwitch, LoadBalance, SimSettings, TensorLightsSetting
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.job import Algorithm
from tests.ns3.helpers import background_of, run_spec

pytestmark = pytest.mark.ns3


def _dlcp_run(tmp_path, threshold: int, check: CheckMode = CheckMode.EXACT, spray: bool = False,
              algo: Algorithm = Algorithm.RING):
    hosts = DlcpPolicy(drop_min_layer_class=0, loss_budget=0.05, max_relative_error=1.0)
    opts = DlcpOptions(priority=True, drop=True, spray=spray, threshold_bytes=threshold, hosts=hosts)
    spec = ExperimentSpec.of(algo=algo, workers=4, size_bytes=256 << 10, bw_mbps=20, iterations=2, transport=Mode.SR,
                             dlcp=opts, topo=Topo.LEAFSPINE)
    settings = SimSettings(dlcp=DlcpSwitch(opts.priority, opts.drop, opts.spray, threshold), check=check)
    return run_spec(spec, tmp_path, settings)


@pytest.mark.parametrize("check", [CheckMode.EXACT, CheckMode.DIGEST])
def test_at_threshold_zero_every_droppable_packet_is_trimmed_and_zero_filled_within_budget(tmp_path, check):
    cfgs, result = _dlcp_run(tmp_path, threshold=0, check=check)
    assert result.ok()
    sw = result.switches
    # trimmed at the first switch (a leaf), never again (trimmed packets are not droppable)
    assert sw["leaf1"]["dlcp"][1]["dropped"] > 0 and sw["leaf2"]["dlcp"][1]["dropped"] > 0
    assert sw["spine1"]["dlcp"][1]["dropped"] == 0 and sw["spine2"]["dlcp"][1]["dropped"] == 0
    assert sw["leaf1"]["dlcp"][1]["kept"] == 0
    budget = cfgs[0].dlcp.loss_budget if cfgs[0].dlcp else 0.0
    # every packet a switch trimmed reaches its receiver, counted there as gradswitch/roce/qp.py counts it (nothing is
    # lost)
    trimmed = sum(node["stats"]["responder"].get("trimmed", 0) for node in result.nodes[1].values())
    assert trimmed == sum(s["dlcp"][1]["dropped"] for s in sw.values())
    for node in result.nodes[1].values():
        resp = node["stats"]["responder"]
        assert resp["zero_filled"] > 0 and resp["over_loss_budget"] > 0
        assert resp["trimmed_resent"] >= resp["over_loss_budget"]  # each NAKed for its payload
        assert resp["trimmed"] >= resp["zero_filled"] + resp["trimmed_resent"]
        assert resp["zero_filled"] <= budget * resp["accepted"] + 1
        for it in node["iterations"]:
            assert it["correct"]  # within max_relative_error (1.0 here)
            assert it["extra"]["zero_filled_packets"] >= 0
        assert sum(it["extra"]["relative_error"] for it in node["iterations"]) > 0  # the zeros changed the sums


def test_under_the_threshold_nothing_is_trimmed_and_every_sum_is_exact(tmp_path):
    _, result = _dlcp_run(tmp_path, threshold=1 << 30)
    assert result.ok()
    events = result.switches["leaf1"]["dlcp"][1]
    assert events["dropped"] == 0 and events["kept"] > 0 and events["classified"] > 0
    for node in result.nodes[1].values():
        assert node["stats"]["responder"].get("zero_filled", 0) == 0
        assert node["stats"]["responder"].get("trimmed", 0) == 0
        assert all(it["correct"] and it["wrong_elements"] == 0 for it in node["iterations"])


def _uplink_bytes(result, leaf: str) -> list[int]:
    """Bytes leaf sent to each spine (its ports 3 and 4 on a 2x2 leaf-spine with 2 hosts per leaf)."""
    return [result.switches[leaf]["ports"][p][2] for p in (3, 4)]


def test_spraying_spreads_one_flow_over_both_spines(tmp_path):
    _, plain = _dlcp_run(tmp_path / "ecmp", threshold=1 << 30)
    _, sprayed = _dlcp_run(tmp_path / "spray", threshold=1 << 30, spray=True)
    assert sprayed.ok()
    assert all(it["correct"] for n in sprayed.nodes[1].values() for it in n["iterations"])
    for leaf in ("leaf1", "leaf2"):
        a, b = _uplink_bytes(sprayed, leaf)
        assert min(a, b) > 0.35 * (a + b)
        a, b = _uplink_bytes(plain, leaf)  # one ring flow (and its peer's ACKs) per leaf: hashed mostly to one spine
        assert min(a, b) < 0.2 * (a + b)


def _ring_leafspine(tmp_path, settings: SimSettings):
    spec = ExperimentSpec.of(algo=Algorithm.RING, workers=4, size_bytes=256 << 10, bw_mbps=20, iterations=2,
                             topo=Topo.LEAFSPINE)
    return run_spec(spec, tmp_path, settings)[1]


def test_flowlets_with_no_gap_take_a_new_member_every_packet(tmp_path):
    result = _ring_leafspine(tmp_path, SimSettings(load_balance=LoadBalance.FLOWLET, flowlet_gap_us=0.0))
    assert result.ok()
    for leaf in ("leaf1", "leaf2"):
        a, b = _uplink_bytes(result, leaf)
        assert min(a, b) > 0.3 * (a + b)


def test_flowlets_with_a_long_gap_keep_their_path(tmp_path):
    result = _ring_leafspine(tmp_path, SimSettings(load_balance=LoadBalance.FLOWLET, flowlet_gap_us=1e9))
    for leaf in ("leaf1", "leaf2"):
        a, b = _uplink_bytes(result, leaf)
        assert min(a, b) < 0.2 * (a + b)


def test_the_ecmp_seed_draws_other_paths(tmp_path):
    paths = set()
    for seed in range(8):
        result = _ring_leafspine(tmp_path / str(seed), SimSettings(ecmp_seed=seed))
        paths.add(tuple(int(_uplink_bytes(result, leaf)[0] > _uplink_bytes(result, leaf)[1])
                        for leaf in ("leaf1", "leaf2")))
    assert len(paths) > 1


def _with_background(tmp_path, roce_class: bool, flows: int = 4):
    spec = ExperimentSpec.of(algo=Algorithm.RING, workers=4, size_bytes=512 << 10, bw_mbps=20, iterations=2,
                             topo=Topo.LEAFSPINE, background_flows=flows)
    return run_spec(spec, tmp_path, SimSettings(background=background_of(spec), roce_class=roce_class))[1]


def test_background_tcp_shares_the_fabric_and_the_roce_class_puts_rdma_first(tmp_path):
    quiet = _ring_leafspine(tmp_path / "quiet", SimSettings())
    fifo = _with_background(tmp_path / "fifo", roce_class=False)
    first = _with_background(tmp_path / "class", roce_class=True)
    for r in (fifo, first):
        assert r.ok() and r.background is not None
        assert r.background["goodput_mbps"] > 1.0
        assert all(it["correct"] for n in r.nodes[1].values() for it in n["iterations"])

    def slowest(r):
        return max(it["time_s"] for n in r.nodes[1].values() for it in n["iterations"])

    assert slowest(fifo) > 1.1 * slowest(quiet) * (512 / 256)  # bulk TCP in the same FIFO slows the ring
    assert slowest(first) < slowest(fifo)


def test_background_tcp_alone_fills_its_path(tmp_path):
    spec = ExperimentSpec.of(algo=Algorithm.RING, workers=2, size_bytes=4 << 10, bw_mbps=20, iterations=30,
                             topo=Topo.LEAFSPINE, background_flows=2)
    _, r = run_spec(spec, tmp_path, SimSettings(background=background_of(spec)))
    assert r.background is not None
    # a TCP segment of the MTU carries mtu / (mtu + 66) of the link
    assert r.background["goodput_mbps"] > 0.6 * 20 * 4096 / (4096 + 66)


def test_tensorlights_favours_one_colocated_servers_pulls(tmp_path):
    spec = ExperimentSpec.of(algo=Algorithm.PS, workers=2, size_bytes=512 << 10, bw_mbps=20, iterations=3, jobs=2,
                             colocate_servers=True, tensorlights=True)
    from tests.ns3.helpers import spec_jobs

    _, cfgs = spec_jobs(spec)
    servers = tuple((cfg.job_id, s.node_id) for cfg in cfgs for s in cfg.servers)
    host = cfgs[0].servers[0].host
    plain = run_spec(spec, tmp_path / "plain", SimSettings())[1]
    lights = run_spec(spec, tmp_path / "lights", SimSettings(tensorlights=TensorLightsSetting(host, servers)))[1]

    def jct(r, job: int):
        its = [it for n in r.nodes[job].values() for it in n["iterations"]]
        return max(it["end"] for it in its) - min(it["start"] for it in its)

    assert lights.ok() and plain.ok()
    assert jct(lights, 1) < 0.9 * jct(plain, 1)  # the favoured job's pulls go first
    assert jct(lights, 1) < jct(lights, 2)
