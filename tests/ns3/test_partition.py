"""Cutting a run over MPI ranks (gradswitch.sim.ranks): by ns-3's rule only across point-to-point links, a
fat tree by pod, a leaf-spine by leaf, the top tier dealt round robin, every rank holding some of the jobs'
nodes; and what gradswitch.sim.run refuses before anything starts. Pure Python: no simulator needed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gradswitch.sim import SimSettings
from gradswitch.sim.ranks import MpiLaunch, MpiSync, PartitionError, partition, pieces
from gradswitch.sim.run import SimError, mpirun_command, run
from gradswitch.topology.generators import dumbbell, fattree, leafspine, leafspine3, rack
from gradswitch.topology.model import Topology
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role


def job(topo: Topology, hosts: list[str], algo: Algorithm = Algorithm.RING) -> JobConfig:
    nodes = tuple(Node(i, Role.WORKER, h, topo.host(h).ip) for i, h in enumerate(hosts))
    return JobConfig(algo=algo, nodes=nodes, iterations=1, size_bytes=1 << 16, mtu=4096)


def every_host(topo: Topology) -> JobConfig:
    return job(topo, [h.name for h in topo.hosts])


def test_a_fat_tree_is_cut_by_pod_and_its_cores_dealt_over_the_ranks():
    topo = fattree(16)  # k = 4: pods of 2 edges, 2 aggregation switches and 4 hosts; 4 cores
    p = partition(topo, [every_host(topo)], 2)
    for pod in range(4):
        members = [f"edge{pod}_0", f"edge{pod}_1", f"agg{pod}_0", f"agg{pod}_1"]
        members += [h.name for h in topo.hosts if topo.attachment(h.name)[0] in members]
        assert {p.rank_of[n] for n in members} == {pod // 2}, pod
    assert [p.rank_of[c] for c in ("core0_0", "core0_1", "core1_0", "core1_1")] == [0, 1, 0, 1]
    # only links between an aggregation switch and a core of another rank are cut: never a host's link
    cut = [lk for lk in topo.links if p.rank_of[lk.a] != p.rank_of[lk.b]]
    assert cut and all({lk.a[:3], lk.b[:4]} == {"agg", "core"} for lk in cut)
    assert p.cut_links(topo) == len(cut) == 8
    assert p.job_nodes(topo, [every_host(topo)]) == [8, 8]


def test_four_ranks_on_a_k4_tree_own_a_pod_and_a_core_each():
    topo = fattree(16)
    p = partition(topo, [every_host(topo)], 4)
    for r in range(4):
        nodes = p.nodes_of(r)
        assert sum(n.startswith("core") for n in nodes) == 1
        assert {n.split("_")[0][-1] for n in nodes if n.startswith(("edge", "agg"))} == {str(r)}
    assert p.job_nodes(topo, [every_host(topo)]) == [4, 4, 4, 4]


def test_a_leaf_spine_is_cut_by_leaf():
    topo = leafspine(4, 2, 2)
    p = partition(topo, [every_host(topo)], 2)
    assert [p.rank_of[f"leaf{i}"] for i in range(1, 5)] == [0, 0, 1, 1]
    assert [p.rank_of[s] for s in ("spine1", "spine2")] == [0, 1]
    assert all(p.rank_of[h.name] == p.rank_of[topo.attachment(h.name)[0]] for h in topo.hosts)


def test_a_three_tier_leaf_spine_is_cut_by_pod():
    topo = leafspine3(pods=4, leaves_per_pod=2, spines_per_pod=2, superspines=2)
    parts, top = pieces(topo)
    assert top == ["superspine0", "superspine1"] and len(parts) == 4
    p = partition(topo, [every_host(topo)], 4)
    assert {p.rank_of[n] for n in ("leaf2_0", "leaf2_1", "spine2_0", "spine2_1")} == {2}


def test_a_dumbbell_is_cut_at_its_bottleneck_and_a_rack_not_at_all():
    topo = dumbbell(2)
    p = partition(topo, [every_host(topo)], 2)
    assert (p.rank_of["s1"], p.rank_of["s2"], p.cut_links(topo)) == (0, 1, 1)
    with pytest.raises(PartitionError, match="at most 1 ranks"):
        partition(rack(4), [every_host(rack(4))], 2)


def test_ranks_are_balanced_by_the_jobs_nodes_not_by_pods():
    topo = fattree(16)
    # 7 workers: h1, h5, h9 and h13 in pod 0 (hosts are dealt over the pods), h2, h3 and h4 one in each other pod
    hosts = ["h1", "h5", "h9", "h13", "h2", "h3", "h4"]
    p = partition(topo, [job(topo, hosts)], 2)
    assert p.job_nodes(topo, [job(topo, hosts)]) == [4, 3]
    assert p.rank_of["edge0_0"] == 0 and p.rank_of["edge1_0"] == 1


def test_every_rank_must_own_some_of_the_jobs_nodes_and_a_piece():
    topo = fattree(16)
    with pytest.raises(PartitionError, match="rank 1 would own none"):
        partition(topo, [job(topo, ["h1", "h5", "h9"])], 2)  # all in pod 0
    with pytest.raises(PartitionError, match="at most 4 ranks"):
        partition(topo, [every_host(topo)], 5)
    with pytest.raises(PartitionError, match="ranks = 0"):
        partition(topo, [every_host(topo)], 0)


def test_one_rank_owns_everything():
    topo = fattree(16)
    p = partition(topo, [every_host(topo)], 1)
    assert set(p.rank_of.values()) == {0} and len(p.rank_of) == len(topo.hosts) + len(topo.switches)
    assert p.config(MpiSync.BARRIER) == {"ranks": 1, "sync": "barrier", "rank_of": p.rank_of}


def test_run_refuses_what_it_cannot_do_before_anything_starts(tmp_path):
    topo = fattree(16)
    cfg = every_host(topo)
    with pytest.raises(SimError, match="ranks = 0"):
        run(topo, [cfg], SimSettings(), tmp_path, ranks=0)
    with pytest.raises(SimError, match="only for a run on more than one rank"):
        run(topo, [cfg], SimSettings(), tmp_path, hostfile=tmp_path / "hosts")
    with pytest.raises(SimError, match="no such file"):
        run(topo, [cfg], SimSettings(), tmp_path, ranks=2, hostfile=tmp_path / "hosts")
    with pytest.raises(SimError, match="at most 4 ranks"):
        run(topo, [cfg], SimSettings(), tmp_path, ranks=8)
    assert not list(tmp_path.iterdir())  # nothing was written, nothing started


def test_mpirun_is_oversubscribed_only_here_and_past_the_cores(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    binary = Path("/x/gradswitch-sim")
    cores = os.cpu_count() or 1
    few = mpirun_command(MpiLaunch(1 if cores == 1 else 2), binary)
    many = mpirun_command(MpiLaunch(cores + 1), binary)
    cluster = mpirun_command(MpiLaunch(cores + 1, Path("/etc/hosts.mpi")), binary)
    assert few[:3] == ["/usr/bin/mpirun", "-np", "1" if cores == 1 else "2"] and few[-1] == str(binary)
    assert "--oversubscribe" not in few and "--oversubscribe" in many
    assert cluster[3:5] == ["--hostfile", "/etc/hosts.mpi"] and "--oversubscribe" not in cluster
    assert ("--allow-run-as-root" in few) == (os.geteuid() == 0)


def test_the_mpi_tests_skip_with_a_reason_or_fail_when_required(monkeypatch, tmp_path, pytestconfig):
    """tests/conftest.py's ns3_mpi requirement: what is missing, named; GRADSWITCH_REQUIRE_NS3_MPI=1 requires it."""
    from tests.conftest import REQUIREMENTS, _required

    monkeypatch.setattr("gradswitch.sim.build.MPI_PREFIX", tmp_path)
    assert "holds no ns-3 built with MPI" in (REQUIREMENTS["ns3_mpi"]() or "")
    monkeypatch.setenv("GRADSWITCH_REQUIRE_NS3_MPI", "1")
    assert _required(pytestconfig, "ns3_mpi")
    monkeypatch.setenv("GRADSWITCH_REQUIRE_NS3_MPI", "0")
    monkeypatch.setenv("GRADSWITCH_REQUIRE_NS3", "1")
    assert not _required(pytestconfig, "ns3_mpi")
