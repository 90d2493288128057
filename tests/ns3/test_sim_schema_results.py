"""The results gradswitch-sim writes are what gradswitch/sim/sim_schema.py RESULTS defines (the keys C++ writes from
gs-keys.h and Python reads): for a ring with DLCP, loss and background TCP, a parameter server that trains, NetReduce
falling back to ring when its switch crashes and returning, a worker that crashes, an algo-write job and a graph
job in the network, every key of every object is the schema's, of its type, and none it requires is missing; and
together the runs write every key of the schema but a distributed run's; a run over 2 MPI ranks (the MPI build) writes
those too, and the same results as one process but for its cost. Its --tables and --constants outputs are the
schema's TABLES and CONSTANTS."""

from __future__ import annotations

from typing import Any

import pytest

from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import DlcpOptions, ExperimentSpec, Topo
from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.sim import sim_schema
from gradswitch.sim.graph_run import GraphTransport, job_config, placement, run_graph
from gradswitch.sim.ranks import MpiSync
from gradswitch.sim.run import constants, run, tables
from gradswitch.sim.sim_schema import CONFIG, CONSTANTS, RESULTS, TABLES, Document, Section, problems
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.faults import parse_fault
from gradswitch.topology.generators import rack
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, RankGraph, world_group
from gradswitch.workload.job import Algorithm, Crash, Device, Emulation
from tests.ns3.helpers import run_writes, write_job

pytestmark = pytest.mark.ns3

SPECS = {
    "ring-dlcp-loss-background": ExperimentSpec.of(
        algo=Algorithm.RING, workers=4, topo=Topo.LEAFSPINE, workload="resnet50", scale=0.002, iterations=2,
        bw_mbps=100, loss_pct=1.0, background_flows=2, dlcp=DlcpOptions(priority=True, drop=True)),
    "ps-training": ExperimentSpec.of(algo=Algorithm.PS, workers=2, workload="resnet50", scale=0.002, bw_mbps=100,
                                     iterations=2, emulate=Emulation(link_gbps=10, device=Device.V100, batch=32)),
    "netreduce-switch-crash": ExperimentSpec.of(
        algo=Algorithm.NETREDUCE, workers=4, topo=Topo.LEAFSPINE, size_bytes=1 << 20, bw_mbps=100, iterations=6,
        faults=(parse_fault("switch-crash:spine1@0.1,restart=0.2"),)),
    "ring-worker-crash": ExperimentSpec.of(algo=Algorithm.RING, workers=4, size_bytes=1 << 18, bw_mbps=100,
                                           iterations=3, crash=Crash(1, 0)),
}


def seen(doc: object, schema: Document, section: Section, out: set[tuple[str, str]]) -> None:
    """Every (section, key) of the schema `doc` holds."""
    if not isinstance(doc, dict):
        return
    for name, value in doc.items():
        out.add((section.id, name))
        key = next((k for k in section.keys if k.name == name), None)
        if key is None or value is None:
            continue
        items = {"object": [value], "objects": value if isinstance(value, list) else []}.get(key.type)
        if key.type == "map" and key.of not in sim_schema.TYPES and isinstance(value, dict):
            items = list(value.values())
        for item in items or []:
            seen(item, schema, schema.section(key.of), out)


def checked(raw: dict[str, Any], written: set[tuple[str, str]]) -> None:
    found = problems(raw, RESULTS)
    assert not found, "\n".join(found)
    seen(raw, RESULTS, RESULTS.top, written)


@pytest.fixture(scope="module")
def written() -> set[tuple[str, str]]:
    return set()


@pytest.mark.parametrize("name", SPECS)
def test_a_runs_results_are_the_schema(name, tmp_path, written):
    plan = plan_run(SPECS[name])
    settings = plan.sim_settings(False)
    result = run(plan.topology, list(plan.jobs), settings, tmp_path)
    checked(result.raw, written)
    if name == "netreduce-switch-crash":
        assert any("fallback" in n.get("netreduce", {}) for j in result.raw["jobs"] for n in j["nodes"])
    if name == "ring-worker-crash":
        assert any("error" in n for j in result.raw["jobs"] for n in j["nodes"])


def test_a_write_jobs_results_and_configuration_are_the_schema(tmp_path, written):
    topo = rack(2)
    job = write_job(1, "h1", "h2", [4096, 65536])
    raw = run_writes(topo, [job], tmp_path)
    checked(raw, written)
    found = [p for p in problems({"jobs": [job]}, CONFIG) if p.startswith("jobs[")]
    assert not found, found


def test_a_graph_jobs_results_in_the_network_are_the_schema(tmp_path, written):
    topo = rack(4)
    graph = JobGraph("ar", tuple(RankGraph(r, (CollectiveNode(0, "ar", CollectiveKind.ALL_REDUCE, "world", 1 << 16),))
                                 for r in range(4)), (world_group(4),))
    job = job_config(graph, placement(graph, topo), topo, GraphTransport(mtu=NETREDUCE_MTU, window=64))
    result = run_graph(graph, topo, SimSettings(), out_dir=tmp_path, job=job, in_network={CollectiveKind.ALL_REDUCE: 2})
    assert result.sim.ok()
    checked(result.sim.raw, written)


def test_together_the_runs_write_every_key_but_a_distributed_runs(written):
    if len(written) < 10:
        pytest.skip("runs this module's other tests first")
    distributed = {("results", "mpi"), ("results", "rank")} | {("mpi", k.name) for k in RESULTS.section("mpi").keys} | {
        ("rank", k.name) for k in RESULTS.section("rank").keys}
    never = {(s.id, k.name) for s, k in sim_schema.walk(RESULTS)} - written - distributed
    assert not never, f"keys of the schema no run wrote: {sorted(never)}"


def test_the_tables_and_constants_outputs_are_the_schema(tmp_path):
    plan = plan_run(SPECS["netreduce-switch-crash"])
    out = tables(plan.topology, list(plan.jobs), SimSettings(), tmp_path)
    assert out["netreduce_trees"] and out["switches"]
    found = problems(out, TABLES) + problems(constants(), CONSTANTS)
    assert not found, "\n".join(found)


@pytest.mark.ns3_mpi
@pytest.mark.parametrize("sync", list(MpiSync))
def test_a_distributed_runs_results_are_the_schema(tmp_path, sync):
    """Over 2 MPI ranks, with background TCP and a switch crash (Simulation::Merge sums them over the ranks): the
    schema's, `mpi` and its `per_rank` included, and the same results as one process but for the figures of cost."""
    spec = ExperimentSpec.of(algo=Algorithm.RING, workers=8, topo=Topo.FATTREE, size_bytes=1 << 18, bw_mbps=1000,
                             iterations=2, background_flows=1, faults=(parse_fault("switch-crash:core0_0@0.001"),))
    plan = plan_run(spec)
    settings = plan.sim_settings(False)
    many = run(plan.topology, list(plan.jobs), settings, tmp_path / "many", ranks=2, sync=sync).raw
    found = problems(many, RESULTS)
    assert not found, "\n".join(found)
    assert many["mpi"]["ranks"] == 2 and len(many["mpi"]["per_rank"]) == 2 and "rank" not in many
    one = run(plan.topology, list(plan.jobs), settings, tmp_path / "one").raw
    cost = {"wall_s", "events", "events_per_s", "packet_hops_per_s", "peak_rss_mb", "setup_rss_mb", "mpi"}
    assert {k: v for k, v in many.items() if k not in cost} == {k: v for k, v in one.items() if k not in cost}
