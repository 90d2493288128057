"""A run's plan is computed in one place: gradswitch.experiment.run_plan.plan_run places a spec's jobs and
configures them, and nothing else in the package or the benchmarks calls placement itself."""

from __future__ import annotations

import ast
from pathlib import Path

from gradswitch.experiment.placement import job_config, place, topology_for
from gradswitch.experiment.run_plan import plan_run
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.topology.generators import leafspine

PLACING = {"place", "job_config"}  # gradswitch.experiment.placement's functions that place and configure jobs


def callers(root: Path) -> set[str]:
    """Files under root that import placement's placing functions."""
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.ImportFrom) and node.module == "gradswitch.experiment.placement"
                    and PLACING & {a.name for a in node.names}):
                found.add(path.relative_to(REPO_ROOT).as_posix())
    return found


def test_placement_is_called_from_the_run_plan_only():
    assert callers(REPO_ROOT / "gradswitch") | callers(REPO_ROOT / "bench") == {"gradswitch/experiment/run_plan.py"}


def test_the_check_sees_another_caller(tmp_path, monkeypatch):
    (tmp_path / "x.py").write_text("from gradswitch.experiment.placement import place\n")
    monkeypatch.setattr(__name__ + ".REPO_ROOT", tmp_path)
    assert callers(tmp_path) == {"x.py"}


def test_the_plan_is_placement_and_every_jobs_configuration():
    spec = spec_from_dict({"algo": "ps", "workers": 2, "jobs": 2, "topo": "leafspine", "background_flows": 2,
                           "bw_mbps": 20})
    plan = plan_run(spec)
    topo = topology_for(spec)
    assert plan.topology == topo and plan.placement == place(spec, topo)
    assert list(plan.jobs) == [job_config(spec, j + 1, nodes, topo) for j, nodes in enumerate(plan.placement.jobs)]
    assert [c.job_id for c in plan.jobs] == [1, 2] and plan.first is plan.jobs[0]
    assert plan.sim_settings(progress=False).background is not None


def test_a_plan_on_a_given_network_places_on_it(tmp_path):
    spec = spec_from_dict({"algo": "ring", "workers": 4, "topo": "leafspine", "bw_mbps": 20})
    bigger = leafspine(leaves=2, spines=2, hosts_per_leaf=4)
    plan = plan_run(spec, bigger)
    assert plan.topology is bigger
    assert {n.host for n in plan.first.nodes} <= {h.name for h in bigger.hosts}
    plan.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job1.json"]
