"""Every result is checked: a contribution a switch adds twice is caught, by the exact values and, at scale,
by the digest; the checks pass without the fault (so they can fail)."""

from __future__ import annotations

import pytest

from gradswitch.experiment.spec import ExperimentSpec, Topo
from gradswitch.sim.results import parse
from gradswitch.sim.run import simulate
from gradswitch.sim.sim_config import run_config
from gradswitch.sim.sim_settings import CheckMode, SimSettings
from gradswitch.workload.job import Algorithm
from tests.ns3.helpers import spec_jobs

pytestmark = pytest.mark.ns3


def _run(tmp_path, check: CheckMode, double_adds: int, topo: Topo = Topo.RACK):
    spec = ExperimentSpec.of(algo=Algorithm.NETREDUCE, workers=4, size_bytes=256 << 10, bw_mbps=20, iterations=2,
                             topo=topo)
    net, cfgs = spec_jobs(spec)
    config = run_config(net, cfgs, SimSettings(check=check))
    config["switch"]["faults"] = {"netreduce_double_add": double_adds}
    return parse(simulate(config, tmp_path), cfgs)


@pytest.mark.parametrize("check", [CheckMode.EXACT, CheckMode.DIGEST])
@pytest.mark.parametrize("topo", [Topo.RACK, Topo.LEAFSPINE])
def test_a_contribution_added_twice_is_caught(tmp_path, check, topo):
    result = _run(tmp_path, check, double_adds=1, topo=topo)
    assert result.checks[1] == check
    # (each switch of the job's tree adds its first contribution twice: all in the first cell)
    tree = [sw for sw in result.switches.values() if "netreduce_events" in sw]
    assert [sw["drops"].get("fault-double-add", 0) for sw in tree] == [1] * (1 if topo == Topo.RACK else 3)
    iterations = [it for n in result.nodes[1].values() for it in n["iterations"]]
    wrong = [it for it in iterations if not it["correct"]]
    # the cell's sum went to every receiver of the first iteration; the second iteration is clean
    assert {it["index"] for it in wrong} == {0}
    assert len(wrong) == 4
    per_worker = [it["wrong_elements"] for it in wrong]
    assert all(w > 0 for w in per_worker)
    if check == CheckMode.EXACT:
        assert per_worker == [1024] * 4  # the one packet (cell) of 1024 values, at each of the 4 receivers


@pytest.mark.parametrize("check", [CheckMode.EXACT, CheckMode.DIGEST])
def test_without_the_fault_every_check_passes(tmp_path, check):
    result = _run(tmp_path, check, double_adds=0)
    assert result.ok()
    assert all(it["correct"] for n in result.nodes[1].values() for it in n["iterations"])


def test_no_check_is_reported_as_none(tmp_path):
    result = _run(tmp_path, CheckMode.NONE, double_adds=1)
    assert result.checks[1] == CheckMode.NONE


def test_auto_is_exact_small_and_digest_large():
    from gradswitch.sim.sim_config import check_mode

    _, small = spec_jobs(ExperimentSpec.of(algo=Algorithm.RING, workers=4, size_bytes=1 << 20))
    _, large = spec_jobs(ExperimentSpec.of(algo=Algorithm.RING, workers=64, size_bytes=64 << 20))
    assert check_mode(small[0], SimSettings()) == CheckMode.EXACT
    assert check_mode(large[0], SimSettings()) == CheckMode.DIGEST
