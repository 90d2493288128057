"""The simulator's build and the facts it shares with Python: config.p4's constants, the forwarding rule of
gradswitch/control/routing.py, the aggregation spine of gradswitch/control/controls/netreduce.py."""

from __future__ import annotations

import pytest

from gradswitch.control.controls.netreduce import plan_job
from gradswitch.control.routing import compute_routes
from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.protocol.netreduce import JobLayout
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.sim.build import status
from gradswitch.sim.graph_run import config, document
from gradswitch.sim.run import config_tables, constants, tables
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.generators import build_topology, fattree, leafspine, rack
from gradswitch.topology.model import Topology
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, RankGraph, world_group
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role

K = CollectiveKind

pytestmark = pytest.mark.ns3


def test_the_built_simulator_is_not_stale():
    assert status().missing() is None


def test_constants_are_config_p4s():
    got = constants()
    assert got["constants"], "the simulator reports no constant"
    for name, value in got["constants"].items():
        assert value == CONFIG.values[name], name


def _job(topo: Topology, hosts: list[str], algo: Algorithm = Algorithm.NETREDUCE, job_id: int = 1) -> JobConfig:
    nodes = tuple(Node(i, Role.WORKER, h, topo.host(h).ip) for i, h in enumerate(hosts))
    return JobConfig(algo=algo, nodes=nodes, iterations=1, size_bytes=4096, mtu=4096, job_id=job_id)


def routes_of(topo: Topology, tmp_path):
    hosts = [h.name for h in topo.hosts[:2]]
    return tables(topo, [_job(topo, hosts, Algorithm.RING)], SimSettings(), tmp_path)["switches"]


def expected_routes(topo: Topology) -> dict:
    """gradswitch/control/routing.py's routes as (local host -> port) and (edge switch -> next-hop ports)."""
    edge_of_subnet = {s.subnet: s.name for s in topo.switches if s.subnet}
    out: dict = {}
    for sw, routes in compute_routes(topo).items():
        hosts, edges = {}, {}
        for r in routes:
            ports = [h.port for h in r.next_hops]
            if r.prefix.endswith("/32"):
                host = next(h.name for h in topo.hosts if h.ip == r.prefix[:-3])
                if topo.attachment(host)[0] == sw:
                    hosts[host] = ports[0]
                    continue
                edges[topo.attachment(host)[0]] = ports
            else:
                edges[edge_of_subnet[r.prefix]] = ports
        out[sw] = {"hosts": hosts, "edges": edges}
    return out


@pytest.mark.parametrize("topo", [
    rack(4), leafspine(2, 2, 2), leafspine(4, 3, 2), leafspine(3, 1, 1), build_topology("dumbbell", hosts_per_side=2),
    fattree(16), fattree(5, k=4),
], ids=["rack", "leafspine-2x2", "leafspine-4x3", "leafspine-3x1", "dumbbell", "fattree-k4", "fattree-k4-sparse"])
def test_forwarding_tables_equal_controller_routing(topo, tmp_path):
    assert routes_of(topo, tmp_path) == expected_routes(topo)


def test_the_check_sees_a_wrong_route(tmp_path):
    topo = leafspine(2, 2, 2)
    got = routes_of(topo, tmp_path)
    want = expected_routes(topo)
    want["leaf1"]["edges"]["leaf2"] = want["leaf1"]["edges"]["leaf2"][:1]
    assert got != want


@pytest.mark.parametrize("job_id", [1, 2, 3])
def test_leafspine_aggregation_spine_is_plan_jobs(tmp_path, job_id):
    topo = leafspine(3, 3, 2)
    hosts = ["h1", "h3", "h5", "h2"]
    trees = tables(topo, [_job(topo, hosts, job_id=job_id)], SimSettings(), tmp_path)["netreduce_trees"]
    plan = plan_job(topo, JobLayout(job_id, len(hosts), 4), tuple(hosts))
    tree = trees[str(job_id)]
    assert tree["root"] == plan.aggregation_switch
    roles = {r["switch"]: r for r in tree["roles"]}
    assert set(roles) == set(plan.switches)
    for leaf in ("leaf1", "leaf2", "leaf3"):
        assert roles[leaf]["parent"] == plan.aggregation_switch
        assert roles[leaf]["ranks"] == [r for r, h in enumerate(hosts) if topo.attachment(h)[0] == leaf]


def test_a_graphs_all_reduce_switch_job_aggregates_on_its_graph_jobs_spine(tmp_path):
    """A graph's world all-reduce switch job aggregates on the spine of the graph's own job id, where the loop's
    NetReduce job of that id does and where the control plane installs it on BMv2 (graph_run.aggregation_spine_of);
    its reduce-scatter and all-gather jobs on their own ids' spines; two graph jobs at once each on its own job's."""
    topo = leafspine(2, 2, 4)
    kinds = (K.ALL_REDUCE, K.REDUCE_SCATTER, K.ALL_GATHER)

    def graph(name: str) -> JobGraph:
        ranks = tuple(RankGraph(r, tuple(CollectiveNode(i, str(k), k, "world", 1 << 16, (i - 1,) if i else ())
                                         for i, k in enumerate(kinds))) for r in range(4))
        return JobGraph(name, ranks, (world_group(4),))

    def job(job_id: int, hosts: list[str]) -> JobConfig:
        nodes = tuple(Node(i, Role.WORKER, h, topo.host(h).ip) for i, h in enumerate(hosts))
        return JobConfig(algo=Algorithm.RING, nodes=nodes, iterations=1, mtu=NETREDUCE_MTU, job_id=job_id)

    one, two = ["h1", "h5", "h2", "h6"], ["h3", "h7", "h4", "h8"]  # each job's ranks on both leaves
    # ids chosen so that each all-reduce job's own id would pick the other spine: (4 - 1) mod 2 = 1, (3 - 1) mod 2 = 0
    first = {K.ALL_REDUCE: 4, K.REDUCE_SCATTER: 5, K.ALL_GATHER: 6}
    second = {K.ALL_REDUCE: 3}
    g1, g2 = graph("one"), graph("two")
    doc = document(topo, SimSettings(), [(g1, job(1, one), first), (g2, job(2, two), second)], one + two)
    trees = config_tables(doc, tmp_path)["netreduce_trees"]
    assert trees["4"]["root"] == plan_job(topo, JobLayout(1, 4, 4), tuple(one)).aggregation_switch == "spine1"
    assert trees["3"]["root"] == plan_job(topo, JobLayout(2, 4, 4), tuple(two)).aggregation_switch == "spine2"
    assert trees["5"]["root"] == "spine1" and trees["6"]["root"] == "spine2"  # (5 - 1), (6 - 1) mod 2
    # one graph alone, as an experiment numbers it (graph_job: the job's id + 1 on): job 2 on job 1's spine
    alone, _ = config(g1, topo, SimSettings(), job=job(1, one), in_network={K.ALL_REDUCE: 2})
    assert config_tables(alone, tmp_path / "alone")["netreduce_trees"]["2"]["root"] == "spine1"


def test_fattree_aggregates_at_every_level(tmp_path):
    """Workers in several pods: edges sum their workers, an aggregation switch per pod its edges, a core the pods."""
    topo = fattree(16)
    hosts = [f"h{i}" for i in range(1, 17)]
    tree = tables(topo, [_job(topo, hosts)], SimSettings(), tmp_path)["netreduce_trees"]["1"]
    roles = {r["switch"]: r for r in tree["roles"]}
    assert tree["root"].startswith("core")
    assert roles[tree["root"]]["parent"] is None
    levels = {name: name.rstrip("0123456789_") for name in roles}
    assert sorted(set(levels.values())) == ["agg", "core", "edge"]
    for name, role in roles.items():
        if levels[name] == "edge":
            assert role["ranks"] and role["parent"].startswith("agg")
        if levels[name] == "agg":
            assert role["parent"] == tree["root"] and role["children"]
    assert sorted(r for role in roles.values() for r in role["ranks"]) == list(range(16))
