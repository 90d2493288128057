"""Compare specs load into the runs they describe; the report and summary are assembled from
the experiments' results (here produced by a stand-in runner: the experiments themselves
run in tests/mininet)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from gradswitch.experiment import summary_file
from gradswitch.experiment.compare import load_spec, run_compare
from gradswitch.experiment.links import shaped_directions, usage
from gradswitch.experiment.placement import (
    PACKET_OVERHEAD,
    QUEUE_SHARE,
    fan_in,
    incast_window,
    job_config,
    min_rto,
    place,
    topology_for,
)
from gradswitch.experiment.report import busiest_link_load, fabric_link_loads, uplink_imbalance
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.shipped_specs import EXPERIMENTS
from gradswitch.experiment.spec import DlcpOptions, ExperimentSpec, RingOrder, SpecError, Topo, spec_from_dict
from gradswitch.net.shaping import ShaperStats
from gradswitch.protocol.queues import buffer_bytes
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.job import Algorithm, Role, Scheduling, Sync

PS, RING, NETREDUCE = Algorithm.PS, Algorithm.RING, Algorithm.NETREDUCE


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_committed_spec_loads(path):
    spec = load_spec(path)
    assert spec.runs
    for run in spec.runs:
        run.validate()
        topology_for(run)  # enough hosts for the placement


def test_matrix_and_named_runs():
    dlcp = load_spec(EXPERIMENTS / "dlcp-contention")  # without .toml, as the README's command table writes it
    assert [r.label for r in dlcp.runs] == ["baseline-fifo", "baseline-class", "drop", "priority", "priority+drop",
                                            "priority+drop+spray", "alone"]
    assert not dlcp.runs[0].transport.roce_class
    assert all(r.transport.roce_class for r in dlcp.runs[1:] if r.label != "drop")
    assert dlcp.runs[5].transport.dlcp == DlcpOptions(priority=True, drop=True, spray=True,
                                                      hosts=DlcpPolicy(loss_budget=0.2))
    # training throughput, with the best host-side scheduling in every run
    assert all(r.workload.emulate is not None and r.algorithm.sync == Sync.LAYER
               and r.algorithm.scheduling == Scheduling.PRIORITY for r in dlcp.runs)
    spray = load_spec(EXPERIMENTS / "dlcp-spray")
    assert spray.repeat_varies == ("seed", "ecmp_seed") and spray.baselines_within == ("ring_order",)
    assert {r.label: r.transport.dlcp.spray for r in spray.runs}["random-spray"]
    speedup = load_spec(EXPERIMENTS / "training-speedup")
    assert len(speedup.runs) == 36 and "vgg16-leafspine-netreduce-priority" in {r.label for r in speedup.runs}
    assert {r.dilation for r in speedup.runs} == {4.0}
    base = load_spec(EXPERIMENTS / "baselines.toml")
    assert [r.label for r in base.runs] == ["ring-n2", "ring-n4", "ps-n2", "ps-n4"]
    assert {r.workload.size_bytes for r in base.runs} == {1 << 20}
    tl = load_spec(EXPERIMENTS / "tensorlights.toml")
    assert {r.label for r in tl.runs} >= {"baseline", "tensorlights"}


def test_bad_specs_say_what_is_wrong(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[defaults]\nworkerz = 3\n[[runs]]\nname = "x"\n')
    with pytest.raises(SpecError, match=r"workerz: no such key; did you mean workers \(under \[defaults.network\]\)\?"):
        load_spec(bad)
    bad.write_text('[[runs]]\nname = "x"\n[[runs]]\nname = "x"\n')
    with pytest.raises(SpecError, match="run names repeat"):
        load_spec(bad)
    bad.write_text('[[runs]]\nname = "x"\nworkers = 0\n[[runs]]\nname = "y"\nalgo = "nccl"\n')
    with pytest.raises(SpecError, match="algo = 'nccl': one of ring, ps, netreduce"):
        load_spec(bad)
    bad.write_text('[[runs]]\nname = "x"\nworkers = 0\nloss_pct = 150\n')
    with pytest.raises(SpecError, match=r"(?s)run 'x': workers = 0.*run 'x': loss_pct \(--loss\) = 150"):
        load_spec(bad)
    bad.write_text('figurez = []\n[[runs]]\nname = "x"\n')
    with pytest.raises(SpecError, match="figurez: no such key; did you mean figures\\?"):
        load_spec(bad)
    with pytest.raises(SpecError, match="set transport = sr"):
        ExperimentSpec.of(dlcp=DlcpOptions(drop=True)).validate()


def test_placement_spreads_jobs_and_colocates_servers():
    spec = ExperimentSpec.of(algo=PS, workers=2, jobs=3, colocate_servers=True, topo=Topo.LEAFSPINE, background_flows=2)
    topo = topology_for(spec)
    p = place(spec, topo)
    servers = {n.host for nodes in p.jobs for n in nodes if n.role == Role.SERVER}
    assert servers == {p.server_host}
    workers = [n.host for nodes in p.jobs for n in nodes if n.role == Role.WORKER]
    assert len(set(workers)) == 6 and p.server_host not in workers
    assert p.background is not None and topo.attachment(p.background[0])[0] != topo.attachment(p.background[1])[0]
    # each 2-worker job has one worker on each leaf
    for nodes in p.jobs:
        leaves = {topo.attachment(n.host)[0] for n in nodes if n.role == Role.WORKER}
        assert leaves == {"leaf1", "leaf2"}


def fake_report(spec: ExperimentSpec, out: Path) -> Results:
    times = [0.5 + 0.1 * i for i in range(spec.measurement.iterations)]
    return cast(Results, {"name": spec.label,
            "spec": {"algo": spec.algorithm.algo, "workers": spec.network.workers, "topo": spec.network.topo,
                     "iterations": spec.measurement.iterations,
                     "bw_mbps": spec.network.bw_mbps, "loss_pct": 0, "transport": "gbn"},
            "step_bytes": spec.workload.size_bytes, "ok": True, "retransmissions": 0, "bytes_on_wire": 10,
                          "packets_on_wire": 1,
            "summary": {"median_s": sorted(times)[len(times) // 2], "p99_s": max(times), "correct": True,
                        "algbw_mbps": 1.0, "lower_bound_s": 0.4, "ratio_to_bound": 1.5,
                        "iterations_done": spec.measurement.iterations},
            "iterations": [], "errors": {}, "headline_extra": {"avg_jct_s": sum(times), "cpu_idle": 0.25},
            "bmv2": {"path": "/opt/p4/bmv2-nolog/bin/simple_switch_grpc", "version": "1.15.5-x",
                     "logging_macros": False, "lib_dir": None, "chosen_by": "GRADSWITCH_BMV2"}})


def test_compare_writes_summary_report_and_plot(tmp_path):
    spec = load_spec(EXPERIMENTS / "baselines.toml")
    summary = run_compare(spec, tmp_path, runner=fake_report, log=lambda s: None)
    saved = summary_file.read(tmp_path / "summary.json")
    assert saved == summary
    assert set(saved) == {"ring-n2", "ring-n4", "ps-n2", "ps-n4"}
    for headline in saved.values():
        assert {"median_s", "p99_s", "correct", "avg_jct_s", "cpu_idle"} <= set(headline)
        assert headline["bmv2"] == {"path": "/opt/p4/bmv2-nolog/bin/simple_switch_grpc", "version": "1.15.5-x",
                                    "logging_macros": False}  # which build ran, per run
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# baselines") and "| ring-n4 |" in report and "compare.png" in report
    assert "BMv2: /opt/p4/bmv2-nolog/bin/simple_switch_grpc 1.15.5-x, without logging macros." in report
    assert "| avg_jct_s | cpu_idle |" in report
    assert (tmp_path / "compare.png").stat().st_size > 1000


def test_min_rto_covers_a_full_shaped_queue():
    assert min_rto(32, 1024, None) == 0.05
    assert 0.1 < min_rto(32, 1024, 20) < 0.12  # a 250 kB queue at 2.5 MB/s, plus one window
    assert min_rto(32, 1024, 1) > 0.5  # the 64 KiB minimum buffer at 125 kB/s
    # a parameter server's packets and their acknowledgements each wait behind a full queue: two queues' time
    window_s = 32 * (1024 + PACKET_OVERHEAD) / 2.5e6
    assert min_rto(32, 1024, 20, queues=2) - window_s == pytest.approx(2 * (min_rto(32, 1024, 20) - window_s))


def test_a_spec_may_set_the_smallest_rto_for_both_backends():
    """min_rto_ms replaces the path's floor in the job's configuration (what the Python hosts and the
    simulator's queue pairs start from); out of range it is refused naming the field and what is allowed."""
    from gradswitch.sim.sim_config import transport_json

    spec = ExperimentSpec.of(algo=PS, workers=4, bw_mbps=20.0)
    topo = topology_for(spec)
    nodes = place(spec, topo).jobs[0]
    default = job_config(spec, 1, nodes, topo).rto
    assert default >= min_rto(1, spec.transport.mtu, 20.0) > 0.1  # a full shaped queue's time at least
    given = job_config(spec.but(min_rto_ms=600.0), 1, nodes, topo)
    assert given.rto == 0.6 and transport_json(given)["rto_s"] == 0.6
    for bad in (0.0, -5.0, 1500.0):
        with pytest.raises(SpecError, match=rf"min_rto_ms = {bad}: a timeout above 0 and at most 1000 ms"):
            spec.but(min_rto_ms=bad).validate()


def test_incast_windows_fit_the_shaped_queue():
    ps = ExperimentSpec.of(algo=PS, workers=8, bw_mbps=5.0)
    assert fan_in(ps) == 8
    window = incast_window(ps, 1024)
    room = buffer_bytes(5.0) * QUEUE_SHARE  # the rest of the queue is for ACKs and resends sharing the link
    assert window * 8 * (1024 + PACKET_OVERHEAD) <= room < (window + 1) * 8 * (1024 + PACKET_OVERHEAD)
    # 4 KiB packets: 8 windows of one packet fit a 64 KiB queue where 8 of four (a floor of 4) did not.
    assert incast_window(ps, 4096) * 8 * (4096 + PACKET_OVERHEAD) <= buffer_bytes(5.0)
    # One sender of 4 KiB packets: 11 of them, not the 15 that filled the queue (a go-back-N burst).
    assert incast_window(ExperimentSpec.of(algo=NETREDUCE, workers=8, bw_mbps=5.0), 4096) == 11
    colocated = ExperimentSpec.of(algo=PS, workers=2, jobs=4, colocate_servers=True, bw_mbps=5.0)
    assert fan_in(colocated) == 8 and incast_window(colocated, 1024) == window
    assert incast_window(ExperimentSpec.of(algo=RING, workers=8, bw_mbps=5.0), 1024) == 32  # one sender each
    assert incast_window(ExperimentSpec.of(algo=PS, workers=8), 1024) == 32  # unshaped: the spec's window


def test_ps_key_size_reaches_the_workers_and_is_checked():
    spec = ExperimentSpec.of(algo=PS, workers=2, size_bytes=64 << 10, ps_key_bytes=8 << 10)
    topo = topology_for(spec)
    cfg = job_config(spec, 1, place(spec, topo).jobs[0], topo)
    assert cfg.ps_key_bytes == 8 << 10
    with pytest.raises(SpecError, match=r"ps_key_bytes \(--ps-key\) = 1002: a key is a positive multiple of 4"):
        ExperimentSpec.of(algo=PS, ps_key_bytes=1002).validate()


@pytest.mark.parametrize("workers", [4, 8])
def test_ring_ranks_follow_the_leaves(workers):
    spec = ExperimentSpec.of(algo=RING, workers=workers, topo=Topo.LEAFSPINE)
    topo = topology_for(spec)
    leaves = [topo.attachment(n.host)[0] for n in place(spec, topo).jobs[0]]
    crossing = sum(leaves[i] != leaves[(i + 1) % workers] for i in range(workers))
    assert crossing == 2, leaves  # one hop up from each leaf, none sharing an uplink
    assert len(set(leaves)) == 2


def test_alternate_ring_order_crosses_the_fabric_at_every_hop():
    spec = ExperimentSpec.of(algo=RING, workers=8, topo=Topo.LEAFSPINE, spines=4, ring_order=RingOrder.ALTERNATE)
    topo = topology_for(spec)
    leaves = [topo.attachment(n.host)[0] for n in place(spec, topo).jobs[0]]
    assert all(leaves[i] != leaves[(i + 1) % 8] for i in range(8)), leaves  # 4 flows up from each leaf
    assert len(topo.switches) == 6


def test_fabric_link_loads_name_each_spine_and_measure_the_uplinks_imbalance():
    """Loads come from what each direction's shaper sent (gradswitch/experiment/links.py): the
    uplinks a collision loads, the idle ones, every fabric direction named by its ends."""
    topo = topology_for(ExperimentSpec.of(topo=Topo.LEAFSPINE, spines=4, bw_mbps=5.0))
    directions = shaped_directions(topo)
    assert {d.kind for d in directions} == {"uplink", "downlink", "from-host", "to-host"}
    sent = {"leaf1->spine1": 1_250_000, "leaf1->spine2": 1_250_000}  # 10 Mb in 2 s at 5 Mb/s: two spines full
    before = {d.name: (10.0, ShaperStats(500, 1, 0)) for d in directions}
    after = {d.name: (12.0, ShaperStats(500 + sent.get(d.name, 0), 1, 0)) for d in directions}
    links = usage(directions, before, after)
    loads = fabric_link_loads(links)
    assert loads["leaf1->spine1"] == pytest.approx(1.0) and loads["leaf1->spine3"] == 0.0
    assert len(loads) == 16 and "spine1->leaf2" in loads  # every direction of every fabric link
    assert uplink_imbalance(links) == pytest.approx(1.0 / (2.0 / 8))  # busiest / mean of 8 uplinks
    assert busiest_link_load(links) == pytest.approx(1.0)
    assert len(links) == len(directions) == 2 * len(topo.links)  # the hosts' links too, both ways


@pytest.mark.parametrize("workers, jobs", [(8, 1), (4, 2)])
def test_random_placement_draws_other_hosts_with_every_seed(workers, jobs):
    """ring_order = random: ranks on hosts drawn at random, the draw seeded by the spec's seed (a
    compare's repetitions use seed + index): the same seed gives the same placement, others differ."""
    base = ExperimentSpec.of(algo=RING, workers=workers, jobs=jobs, topo=Topo.LEAFSPINE, ring_order=RingOrder.RANDOM,
                             background_flows=2)
    topo = topology_for(base)

    def ranks(seed: int) -> list[list[str]]:
        return [[n.host for n in nodes] for nodes in place(base.but(seed=seed), topo).jobs]

    assert ranks(1) == ranks(1)
    drawn = {tuple(map(tuple, ranks(seed))) for seed in range(1, 11)}
    assert len(drawn) >= 8  # 10 seeds, (almost) as many placements
    for placement in drawn:
        hosts = [h for job in placement for h in job]
        assert len(hosts) == len(set(hosts)) == workers * jobs  # no host twice
    crossings = {sum(topo.attachment(job[i])[0] != topo.attachment(job[(i + 1) % workers])[0]
                     for i in range(workers)) for placement in drawn for job in placement}
    assert len(crossings) > 1, crossings  # some rings cross the fabric more often than others
    aware = place(base.but(ring_order=RingOrder.LEAVES), topo).jobs
    assert ranks(1) != [[n.host for n in nodes] for nodes in aware]
    with pytest.raises(SpecError, match="ring_order = 'spiral': one of leaves, alternate, random"):
        spec_from_dict({"ring_order": "spiral"})


def test_order_tolerant_receivers_wait_a_full_queue_after_a_message_end():
    """A DLCP job whose switches reorder (priorities, spraying): its order-tolerant receivers judge a
    hole a full shaped queue's time after its message's end (the most a packet can fall behind a
    later one of its message); the previous receivers a quarter of the RTO; no reordering, no wait."""
    from gradswitch.hosts.comm import Comm

    def comm(dlcp: dict[str, object]) -> Comm:
        spec = spec_from_dict({"algo": "ring", "workers": 2, "bw_mbps": 5.0, "transport": "sr", "dlcp": dlcp})
        topo = topology_for(spec)
        cfg = job_config(spec, 1, place(spec, topo).jobs[0], topo)
        return Comm(cfg, cfg.nodes[0], None)  # type: ignore[arg-type]

    full_queue = buffer_bytes(5.0) / (5e6 / 8)
    assert comm({"spray": True}).reorder_delay() == pytest.approx(full_queue)
    previous = comm({"spray": True, "order_tolerant": False})
    assert not previous.order_tolerant and previous.reorder_delay() == pytest.approx(previous.cfg.rto / 4)
    assert comm({"drop": True}).reorder_delay() == 0.0 and comm({"drop": True}).order_tolerant


def test_netreduce_rto_allows_for_the_slowest_worker_and_the_hierarchy():
    """NetReduce's ACK comes back once the slowest worker's contribution completed the cell and the
    result crossed every shaped link of the aggregation tree: 3 windows flat, 5 over a leaf-spine
    fabric (the partial's link up and the result's down), a window being credits x packets per message
    (32-packet go-back-N bursts from timeouts on leafspine N=8, credits 8)."""
    from gradswitch.protocol.netreduce import PACKETS

    def rto_over_window_time(spec: ExperimentSpec) -> float:
        topo = topology_for(spec)
        cfg = job_config(spec, 1, place(spec, topo).jobs[0], topo)
        assert spec.network.bw_mbps is not None
        in_flight = min(cfg.window, spec.algorithm.credits * PACKETS)  # credits, or the shaped queue's room
        window_s = in_flight * (cfg.mtu + PACKET_OVERHEAD) / (spec.network.bw_mbps * 1e6 / 8)
        return cfg.rto / window_s

    flat = ExperimentSpec.of(algo=NETREDUCE, workers=4, bw_mbps=20.0, credits=8)
    fabric = ExperimentSpec.of(algo=NETREDUCE, workers=8, bw_mbps=20.0, credits=8, topo=Topo.LEAFSPINE)
    assert rto_over_window_time(flat) == pytest.approx(3)
    assert rto_over_window_time(fabric) == pytest.approx(5)
    # Fewer credits, smaller windows: the queue term (a full shaped buffer plus a window) holds the floor.
    topo = topology_for(fabric)
    one_credit = job_config(fabric.but(credits=1), 1, place(fabric, topo).jobs[0], topo)
    assert one_credit.rto >= buffer_bytes(20.0) / 2.5e6


def test_a_job_is_configured_on_the_network_it_runs_on():
    """Specs sharing one network (bench.netreduce, compare) run on the biggest one's topology: a
    NetReduce job of 8 on the network a PS of 8 workers and a server needs is placed on its hosts
    and still aggregated in two levels (the RTO allows for them)."""
    netreduce = ExperimentSpec.of(algo=NETREDUCE, workers=8, bw_mbps=5.0, topo=Topo.LEAFSPINE)
    shared = topology_for(netreduce.but(algo=PS))
    on_shared = job_config(netreduce, 1, place(netreduce, shared).jobs[0], shared)
    own = topology_for(netreduce)
    on_own = job_config(netreduce, 1, place(netreduce, own).jobs[0], own)
    assert on_shared.rto == on_own.rto and len(shared.hosts) > len(own.hosts)
