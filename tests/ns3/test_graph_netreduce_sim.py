"""NetReduce in the simulator's graph engine (docs/simulator.md "The graph engine", docs/collectives.md "In the
switches"): with algo = netreduce every all-reduce of the world group runs through the switches, on the graph's
NetReduce job (its own id, queue pairs and cells), checked by the NetReduce worker that ran it; the other
collectives stay on the hosts' algorithms (reduce-scatter and all-gather in the switches:
test_graph_netreduce_rs_ag_sim.py).

A world all-reduce trace (`gradswitch export-et`, 4 ranks, 4 MiB at 10 Gb/s) on the rack and the 2x2 leaf-spine,
as a user types it: every node exact, within 1.2x of S/B, clearly faster than the same trace on ring, and
within 5 % of the old engine's NetReduce all-reduce of the same size on the same fabric. A hand-made graph with
two world all-reduces in flight at once (the second ready first: it waits for the first to start), a ring
all-reduce of a subgroup and a world reduce-scatter beside them: every node exact. A wrong sum in the switch is
caught by the node's check. What cannot run is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.sim.graph_run import GraphTransport, config, run_graph, timings
from gradswitch.sim.run import SimError, simulate
from gradswitch.sim.sim_settings import CheckMode, SimSettings
from gradswitch.topology.faults import parse_fault
from gradswitch.topology.generators import leafspine
from gradswitch.workload.collective_bounds import collective_bound_s
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    JobGraph,
    ProcessGroup,
    RankGraph,
    world_group,
)
from tests.graphs import trace_figures

pytestmark = pytest.mark.ns3

K = CollectiveKind
GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]
SIZE = 4 << 20
MBPS = 10_000
RATE = MBPS * 1e6 / 8  # bytes per second
NR = GraphTransport(mtu=NETREDUCE_MTU, window=64)
NR_JOB = 2  # the graph's job 1 + 1, as gradswitch/experiment/graph_run.py graph_job gives it


def gradswitch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADSWITCH, *args], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)


def experiment(out: Path, *args: str) -> str:
    done = gradswitch("experiment", "--backend", "ns3", "--bw", str(MBPS), "--out", str(out), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module", params=["rack", "leafspine"])
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """On one fabric: the 4-rank world all-reduce trace with algo netreduce and with ring (results.json,
    and the NetReduce run's sim-results.json), and the old engine's NetReduce all-reduce of the same size."""
    topo = request.param
    tmp = tmp_path_factory.mktemp(f"nr-{topo}")
    prefix = tmp / "et" / "ar"
    made = gradswitch("export-et", "--collective", "all_reduce", "--workers", "4", "--size", "4MiB", "--out",
                      str(prefix))
    assert made.returncode == 0, made.stderr
    out: dict[str, Any] = {"topo": topo}
    for algo in ("netreduce", "ring"):
        said = experiment(tmp / algo, "--workload-et", str(prefix), "--topo", topo, "--algo", algo)
        assert "checks: every output exact" in said, said
        out[algo] = trace_figures(tmp / algo / "results.json")
    out["sim"] = json.loads((tmp / "netreduce" / "sim" / "sim-results.json").read_text())
    experiment(tmp / "old", "--algo", "netreduce", "--workers", "4", "--size", "4MiB", "--iterations", "1",
               "--topo", topo)
    out["old"] = json.loads((tmp / "old" / "results.json").read_text())
    return out


def test_a_world_all_reduce_trace_runs_in_the_switches_exact_within_1_2x_of_s_over_b(runs):
    report = runs["netreduce"]
    assert report["checked"] and not report["errors"]
    assert [n["checked"] for n in report["run"]["nodes"]] == [True] * 4
    (c,) = report["collectives"]
    assert c["algorithm"] == "netreduce"
    assert c["bound_s"] == pytest.approx(SIZE / RATE)  # S/B
    assert c["bound_s"] == pytest.approx(collective_bound_s(K.ALL_REDUCE, 4, SIZE, RATE, True))
    assert 1.0 <= c["time_s"] / c["bound_s"] <= 1.2, c
    (summary,) = report["by_kind"]
    assert summary["kind"] == "all_reduce" and summary["bound_s"] == pytest.approx(SIZE / RATE)
    # every packet of the 4 MiB was summed in the switches, on the graph's NetReduce job: the rack's one switch,
    # the leaf-spine's two leaves and the spine at the top of its tree
    cells = SIZE // NETREDUCE_MTU
    events = {name: sw["netreduce"][str(NR_JOB)] for name, sw in runs["sim"]["switches"].items()
              if sw.get("netreduce")}
    tops = [e for e in events.values() if "partial-up" not in e]
    assert len(tops) == 1 and tops[0]["completion"] == cells
    assert len(events) == (1 if runs["topo"] == "rack" else 3)
    for node in runs["sim"]["jobs"][0]["nodes"]:
        assert node["netreduce"]["messages"] == SIZE // (4 * NETREDUCE_MTU)


def test_it_is_clearly_faster_than_the_same_trace_on_ring(runs):
    """Ring's bound is 2(N-1)/N S/B, 1.5x NetReduce's at N = 4; the times keep the ratio."""
    (nr,), (ring,) = runs["netreduce"]["collectives"], runs["ring"]["collectives"]
    assert ring["algorithm"] == "ring" and ring["bound_s"] == pytest.approx(1.5 * SIZE / RATE)
    assert ring["time_s"] / nr["time_s"] >= 1.4, (ring["time_s"], nr["time_s"])


def test_it_takes_the_old_engines_netreduce_time_within_5_percent(runs):
    """The same all-reduce as `gradswitch experiment --backend ns3 --algo netreduce --size 4MiB` runs it (one
    iteration of the all-reduce loop, the same placement and transport)."""
    (it,) = runs["old"]["iterations"]
    assert it["correct"]
    (nr,) = runs["netreduce"]["collectives"]
    assert nr["time_s"] == pytest.approx(it["time_s"], rel=0.05), (nr["time_s"], it["time_s"])


def in_flight(ranks: int = 4) -> JobGraph:
    """Per rank: a computation (longer on odd ranks); world all-reduce `a` after it and world all-reduce `b`
    ready at once (`b` is second in every rank's order, so it waits for `a` to start, then both are in flight);
    a ring all-reduce of the subgroup (3, 1) beside them; a world reduce-scatter (on ring: the run gives the switches
    the all-reduce's job alone) after `a`; a third world all-reduce after `a` and `b`. Sizes not a multiple of a
    NetReduce message (16 KiB) or of the ranks."""
    groups = (world_group(ranks), ProcessGroup("pair", (3, 1)))
    out = []
    for r in range(ranks):
        nodes: list[ComputeNode | CollectiveNode] = [
            ComputeNode(0, "fwd", 1e-4 * (1 + r % 2)),
            CollectiveNode(1, "a", K.ALL_REDUCE, "world", 256_012, (0,)),
            CollectiveNode(2, "b", K.ALL_REDUCE, "world", 65_540),
            CollectiveNode(3, "rs", K.REDUCE_SCATTER, "world", 40_004, (1,)),
            CollectiveNode(4, "c", K.ALL_REDUCE, "world", 4_100, (1, 2)),
        ]
        if r in (3, 1):
            nodes.append(CollectiveNode(5, "pair", K.ALL_REDUCE, "pair", 100_000))
        out.append(RankGraph(r, tuple(nodes)))
    return JobGraph("in-flight", tuple(out), groups)


def test_two_all_reduces_in_flight_and_a_subgroups_ring_are_exact(tmp_path):
    topo = leafspine(2, 2, 2, 1000)
    result = run_graph(in_flight(), topo, out_dir=tmp_path, transport=NR, netreduce_job=NR_JOB)
    assert result.ok() and result.check == CheckMode.EXACT
    assert all(n.checked is True for n in result.run.nodes if n.kind != "compute")
    at = {(n.rank, n.node_id): n for n in result.run.nodes}
    for r in range(4):
        a, b = at[(r, 1)], at[(r, 2)]
        assert b.start_s == 0 and a.start_s == pytest.approx(1e-4 * (1 + r % 2))  # b was ready first ...
        assert a.start_s < b.end_s and b.start_s < a.end_s  # ... both were in flight at once ...
        assert b.end_s > a.end_s  # ... and b's messages came after a's: it started second everywhere
    # the world all-reduces went through the switches (every message of a, b and c), the rest on the hosts
    messages = sum(-(-n // (4 * NETREDUCE_MTU)) for n in (256_012, 65_540, 4_100))
    nodes = result.sim.raw["jobs"][0]["nodes"]
    assert [n["netreduce"]["messages"] for n in nodes] == [messages] * 4
    switches = result.sim.raw["switches"]
    top = [sw["netreduce"][str(NR_JOB)] for sw in switches.values()
           if sw.get("netreduce") and "partial-up" not in sw["netreduce"][str(NR_JOB)]]
    assert [t["completion"] for t in top] == [messages * 4]  # every packet of every message, once
    # the pair's all-reduce ran as ring on its members (first start to last end within its bounds' order)
    pair = [n for n in result.run.nodes if n.node_id == 5]
    assert sorted(n.rank for n in pair) == [1, 3] and all(n.checked for n in pair)


@pytest.mark.parametrize("mode", [CheckMode.EXACT, CheckMode.DIGEST])
def test_a_wrong_sum_in_the_switch_is_caught_by_the_nodes_check(tmp_path, mode):
    """The switch adds one contribution twice (the configuration's switch faults, for tests): the all-reduce's
    wrong cell reaches every rank, whose NetReduce worker's check fails the node; the ring's nodes stay exact."""
    doc, _ = config(in_flight(), leafspine(2, 2, 2, 1000), SimSettings(check=mode), transport=NR,
                    netreduce_job=NR_JOB)
    doc["switch"]["faults"] = {"netreduce_double_add": 1}
    raw = simulate(doc, tmp_path)
    run = timings(in_flight(), raw)
    assert raw["jobs"][0]["check"] == str(mode)
    wrong = {(n.rank, n.node_id) for n in run.nodes if n.checked is False}
    assert len({node for _, node in wrong}) == 1 and {rank for rank, _ in wrong} == {0, 1, 2, 3}
    assert next(iter(wrong))[1] in (1, 2, 4)  # a world all-reduce's
    assert all(n.checked is True for n in run.nodes if n.node_id in (3, 5))  # the ring's
    assert not any(it["correct"] for n in raw["jobs"][0]["nodes"] for it in n["iterations"])


def test_what_cannot_run_in_the_switches_is_refused_in_one_line(tmp_path):
    g = in_flight()
    topo = leafspine(2, 2, 2, 1000)
    with pytest.raises(SimError, match=r"^graph in-flight: NetReduce packets are 4096 bytes, but the transport's mtu "
                                       r"is 1024: give mtu = 4096$"):
        config(g, topo, SimSettings(), transport=GraphTransport(mtu=1024), netreduce_job=NR_JOB)
    with pytest.raises(SimError, match=r"the NetReduce job needs an id of its own, not the graph's job id 1$"):
        config(g, topo, SimSettings(), transport=NR, netreduce_job=1)
    # gradswitch-sim itself: the section's keys, the graph's own id, and faults under a reduce-scatter or all-gather
    # in the switches (they have no fallback to ring; the all-reduces do: test_netreduce_fallback_sim.py)
    doc, _ = config(g, topo, SimSettings(), transport=NR, netreduce_job=NR_JOB)
    for section, said in (({}, "jobs[0].graph.netreduce: names no switch job"),
                          ({"job_id": 2, "credits": 4}, 'jobs[0].graph.netreduce: unknown key "credits"'),
                          ({"job_id": 1}, "jobs[0].graph.netreduce.job_id = 1: the graph's own job id; its switch job "
                                          "needs an id of its own")):
        doc["jobs"][0]["graph"]["netreduce"] = section
        with pytest.raises(SimError) as refused:
            simulate(doc, tmp_path / "own")
        assert said in str(refused.value)
    doc, _ = config(g, topo, SimSettings(faults=(parse_fault("switch-crash:spine1@0.001"),)), transport=NR,
                    in_network={K.ALL_REDUCE: NR_JOB, K.REDUCE_SCATTER: NR_JOB + 1})
    with pytest.raises(SimError) as faults:
        simulate(doc, tmp_path / "faults")
    assert ("fault_schedule: job 1's in-network reduce-scatter and all-gather (graph.netreduce) run no faults"
            in str(faults.value))
