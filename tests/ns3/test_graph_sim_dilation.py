"""The simulator's twin of a dilated BMv2 graph run (gradswitch/experiment/graph_experiment.py run_graph_spec's
sim_dilation, what bench.crossval's training-graph part gives ns-3): its computation D times as long on the
simulated clock, the times reported divided by D, as the hosts' graph engine reports a run dilated by D."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradswitch.experiment.graph_experiment import run_graph_spec
from gradswitch.experiment.graph_run import GraphRunReport
from gradswitch.experiment.spec import Backend, ExperimentError, ExperimentSpec, Topo
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, JobGraph, RankGraph, world_group

pytestmark = pytest.mark.ns3

COMPUTE_S = 0.05
NBYTES = 256 << 10


def graph() -> JobGraph:
    group = world_group(4)
    return JobGraph("dilated", tuple(RankGraph(r, (ComputeNode(0, "fwd", COMPUTE_S), CollectiveNode(
        1, "ar", CollectiveKind.ALL_REDUCE, group.name, NBYTES, (0,)))) for r in range(4)), (group,))


def spans(report: GraphRunReport, kind: str) -> list[float]:
    return [n.end_s - n.start_s for n in report.run.nodes if n.kind == kind]


def test_the_computation_runs_d_times_as_long_and_reads_back_as_the_emulated_clusters(tmp_path: Path) -> None:
    spec = ExperimentSpec.of(name="dilated", workers=4, topo=Topo.RACK, bw_mbps=20, backend=Backend.NS3)
    plain = run_graph_spec(spec, graph(), tmp_path / "plain")
    dilated = run_graph_spec(spec, graph(), tmp_path / "dilated", sim_dilation=4.0)
    assert plain.checked and dilated.checked
    # the computation reads back as the graph's, though it ran 4 x 50 ms on the simulated clock
    assert spans(plain, "compute") == pytest.approx([COMPUTE_S] * 4)
    assert spans(dilated, "compute") == pytest.approx([COMPUTE_S] * 4)
    # the links were not stretched: against the emulated cluster's clock the all-reduce takes a quarter
    assert max(spans(dilated, "collective")) == pytest.approx(max(spans(plain, "collective")) / 4, rel=0.01)
    assert dilated.dilation == 4.0 and plain.dilation == 1.0
    with pytest.raises(ExperimentError, match=r"^dilated: a dilation of 0: give one above 0 \(1: none\)$"):
        run_graph_spec(spec, graph(), tmp_path / "zero", sim_dilation=0.0)
