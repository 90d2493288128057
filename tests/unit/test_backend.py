"""One spec, two backends: what `backend = "ns3"` lifts and what it still refuses, its
topologies (fattree, leafspine3), dilation 1 at the simulated rate, windows and credits that cover the
bandwidth-delay product at 100 Gb/s while the testbed's rates keep BMv2's, and the compare table's backend
column. The simulated runs themselves are in tests/ns3/test_orchestration.py."""

from __future__ import annotations

from typing import Any, cast

import pytest

from gradswitch.experiment.compare import CompareSpec, combine, headline, lower_is_better, write_markdown
from gradswitch.experiment.placement import bdp_packets, job_config, place, topology_for, widest_hops
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.spec import (
    MAX_SIM_CREDITS,
    Backend,
    Check,
    ExperimentSpec,
    SimOptions,
    Topo,
    spec_from_dict,
)
from gradswitch.hosts.ring import MAX_WORKERS as RING_MAX_WORKERS
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.qpn import MAX_NODES
from gradswitch.topology.generators import fattree, leafspine, leafspine3, rack
from gradswitch.workload.job import Algorithm

NS3 = Backend.NS3


@pytest.mark.parametrize(("spec", "says"), [
    (ExperimentSpec.of(algo=Algorithm.RING, workers=RING_MAX_WORKERS + 1), "a ring has at most"),
    (ExperimentSpec.of(algo=Algorithm.NETREDUCE, workers=CONFIG.AGG_MAX_MEMBERS + 1), "AGG_MAX_MEMBERS"),
    (ExperimentSpec.of(algo=Algorithm.PS, workers=MAX_NODES), "nodes fit a job's QP numbers"),
    (ExperimentSpec.of(algo=Algorithm.NETREDUCE, workers=4, credits=CONFIG.AGG_MAX_CREDITS + 1), "AGG_MAX_CREDITS"),
    (ExperimentSpec.of(algo=Algorithm.NETREDUCE, workers=2, jobs=CONFIG.AGG_MAX_JOBS), "jobs ="),
])
def test_bmv2_limits_are_lifted_on_the_simulator(spec, says):
    problems = spec.problems()
    assert len(problems) >= 1 and says in problems[0] and "backend = ns3" in problems[0]
    big = spec_from_dict({"backend": "ns3", "topo": "fattree"}, spec)
    assert big.problems() == []


def test_the_simulator_still_refuses_what_it_cannot_run():
    digits = ExperimentSpec.of(backend=NS3, workload="train-digits",
                               dtype=spec_from_dict({"dtype": "float32"}).workload.dtype)
    assert any("runs on BMv2 only" in p for p in digits.problems())
    assert ExperimentSpec.of(backend=NS3, algo=Algorithm.NETREDUCE, workers=1).problems() == [
        "workers = 1: NetReduce needs at least 2 workers"]
    assert ExperimentSpec.of(backend=NS3, credits=MAX_SIM_CREDITS + 1, algo=Algorithm.NETREDUCE).problems()
    (rack_line,) = ExperimentSpec.of(backend=NS3, workers=300).problems()
    assert rack_line.startswith("topo = rack for 300 hosts:") and "1..253" in rack_line
    (k_line,) = ExperimentSpec.of(backend=NS3, topo=Topo.FATTREE, workers=100, k=4).problems()
    assert "a 4-ary fat tree holds 16 hosts" in k_line
    assert ExperimentSpec.of(backend=NS3, k=4).problems() == ["k = 4: only a fat tree has a k (topo = fattree)"]
    bad_delay = ExperimentSpec.of(backend=NS3, sim=SimOptions(link_delay_us=-1))
    assert any("sim link_delay_us" in p for p in bad_delay.problems())


def test_fat_trees_and_three_tiers_are_the_simulators():
    (line,) = ExperimentSpec.of(topo=Topo.FATTREE).problems()
    assert line.startswith("topo = fattree: too many switches for BMv2") and "--backend ns3" in line
    assert ExperimentSpec.of(topo=Topo.LEAFSPINE3, backend=NS3).problems() == []


def test_ranks_are_the_simulators():
    assert ExperimentSpec.of(ranks=2).problems() == ["ranks = 2: MPI ranks are the simulator's (backend = ns3)"]
    assert ExperimentSpec.of(ranks=2, backend=NS3).problems() == []
    assert ExperimentSpec.of(ranks=0, backend=NS3).problems() == ["ranks = 0: at least 1 (one process)"]
    assert ExperimentSpec.of(backend=NS3, hostfile="hosts").problems() == [
        "hostfile = hosts: only for a run on more than one MPI rank (give ranks)"]
    assert ExperimentSpec.of(backend=NS3, ranks=2, hostfile="hosts").problems() == []


def test_topologies_of_a_spec():
    topo = ExperimentSpec.of(backend=NS3, topo=Topo.FATTREE, workers=256).topology()
    assert topo == fattree(256)
    assert topo.params["k"] == 12  # 12^3 / 4 = 432 hosts; k = 10 holds 250
    assert ExperimentSpec.of(backend=NS3, topo=Topo.FATTREE, workers=16, k=8).topology() == fattree(16, k=8)
    spec = ExperimentSpec.of(backend=NS3, topo=Topo.LEAFSPINE3, workers=1024, pods=4, leaves=8, spines=4, superspines=8,
                             algo=Algorithm.NETREDUCE)
    assert spec.problems() == []
    assert spec.topology() == leafspine3(4, 8, 4, 8, 32)
    assert len(spec.topology().hosts) == 1024
    assert ExperimentSpec.of(workers=4).topology() == rack(4)


def test_on_the_simulator_an_emulated_cluster_runs_at_its_links_rate():
    raw = {"backend": "ns3", "bw_mbps": 100_000, "workload": "resnet50", "emulate": {"device": "v100", "batch": 32}}
    spec = spec_from_dict(raw)
    assert spec.workload.emulate is not None and spec.workload.emulate.link_gbps == 100.0 and spec.dilation == 1.0
    kept = spec_from_dict({**raw, "emulate": {"link_gbps": 10, "batch": 32}, "bw_mbps": 20, "scale": 0.008})
    assert kept.dilation == pytest.approx(4.0)  # a cross-validation spec keeps the BMv2 run's dilation
    bmv2 = spec_from_dict({**raw, "backend": "bmv2", "bw_mbps": 20, "scale": 0.008})
    assert bmv2.workload.emulate is not None and bmv2.workload.emulate.link_gbps == 25.0


def test_widest_paths():
    assert widest_hops(rack(4)) == 2
    assert widest_hops(leafspine(2, 2, 2)) == 4
    assert widest_hops(fattree(16)) == 6
    assert widest_hops(leafspine3(2, 2, 2, 2, 2)) == 6


def test_windows_and_credits_cover_the_bandwidth_delay_product_only_where_needed():
    fast = ExperimentSpec.of(backend=NS3, topo=Topo.FATTREE, workers=128, bw_mbps=100_000, algo=Algorithm.NETREDUCE)
    topo = topology_for(fast)
    needed = bdp_packets(fast.network, topo, 4096)
    assert needed > 64  # a window of 32 cannot fill a 100 Gb/s path across the tree (docs/simulator.md)
    cfg = job_config(fast, 1, place(fast, topo).jobs[0], topo)
    assert cfg.window >= needed and cfg.credits * CONFIG.AGG_PACKETS_PER_MESSAGE >= needed
    for backend in Backend:  # at the testbed's rates a window of 32 covers it: the simulator's job is BMv2's
        slow = ExperimentSpec.of(backend=backend, topo=Topo.LEAFSPINE, workers=4, bw_mbps=20, algo=Algorithm.NETREDUCE)
        slow_topo = topology_for(slow)
        assert bdp_packets(slow.network, slow_topo, 4096) < slow.transport.window
        cfg = job_config(slow, 1, place(slow, slow_topo).jobs[0], slow_topo)
        bmv2 = job_config(slow.but(backend=Backend.BMV2), 1,
                          place(slow, slow_topo).jobs[0], slow_topo)
        assert cfg == bmv2


def test_sim_options_come_from_a_toml_table():
    spec = spec_from_dict({"backend": "ns3", "sim": {"switch_delay_us": 30, "check": "digest", "queue_bytes": 65536}})
    assert spec.network.sim == SimOptions(check=Check.DIGEST, switch_delay_us=30.0, queue_bytes=65536)
    assert spec_from_dict({"sim": {"switch_delay_us": 30}}).problems() == []  # a spec run on both: BMv2 ignores it


def _report(backend: str, median: float) -> Results:
    summary = {"median_s": median, "p99_s": median, "algbw_mbps": 1.0, "lower_bound_s": 0.5, "ratio_to_bound": 2.0,
               "correct": True}
    return cast(Results, {"backend": backend, "summary": summary, "ok": True, "retransmissions": 0, "bytes_on_wire": 1,
                          "headline_extra": {"check": "exact", "machine_bound": False,
                                             **({"events_per_s": 1e6, "wall_s": 2.0} if backend == "ns3" else {})}})


def test_compare_rows_say_their_backend(tmp_path):
    bmv2, ns3 = headline(_report("bmv2", 1.0)), headline(_report("ns3", 1.05))
    assert ns3["backend"] == "ns3" and bmv2["backend"] == "bmv2"
    heads: dict[str, list[dict[str, Any] | None]] = {"bmv2": [bmv2], "ns3": [ns3]}
    summary = {name: combine(h) for name, h in heads.items()}
    assert summary["ns3"]["backend"] == "ns3" and summary["ns3"]["events_per_s"] == 1e6
    runs = [ExperimentSpec(name="bmv2"), ExperimentSpec.of(name="ns3", backend=NS3)]
    write_markdown(CompareSpec("mixed", runs), summary, {"bmv2": [], "ns3": []}, tmp_path)
    table = (tmp_path / "report.md").read_text().splitlines()
    header = next(line for line in table if line.startswith("| run"))
    assert header.split(" | ")[1] == "backend"
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1] for line in table if line.startswith("| bmv2")
            or line.startswith("| ns3")}
    assert rows == {"bmv2": "bmv2", "ns3": "ns3"}


def test_rates_per_second_are_higher_is_better():
    assert not lower_is_better("events_per_s") and not lower_is_better("packet_hops_per_s")
    assert lower_is_better("wall_s") and lower_is_better("median_s")
