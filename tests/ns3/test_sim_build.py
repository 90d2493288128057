"""The simulator's build and the facts it shares with Python: config.p4's constants, the forwarding rule of
gradswitch/control/routing.py, the aggregation spine of gradswitch/control/controls/netreduce.py."""

from __future__ import annotations

import pytest

from gradswitch.control.controls.netreduce import plan_job
from gradswitch.control.routing import compute_routes
from gradswitch.protocol.netreduce import JobLayout
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.sim.build import status
from gradswitch.sim.run import constants, tables
from gradswitch.sim.sim_settings import SimSettings
from gradswitch.topology.generators import build_topology, fattree, leafspine, rack
from gradswitch.topology.model import Topology
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role

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
