"""Small execution graphs for the hosts' graph engine tests (unit, in-memory and on BMv2)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    JobGraph,
    ProcessGroup,
    RankGraph,
    RecvNode,
    SendNode,
    world_group,
)

if TYPE_CHECKING:
    from gradswitch.experiment.graph_run import GraphRunReport
    from gradswitch.experiment.spec import ExperimentSpec


def one_collective(kind: CollectiveKind, ranks: int, nbytes: int, root: int = 0, compute_s: float = 0.0) -> JobGraph:
    """Every rank: (a computation of compute_s, then) one collective of the world group."""
    out = []
    for r in range(ranks):
        nodes: list[ComputeNode | CollectiveNode] = []
        deps: tuple[int, ...] = ()
        if compute_s:
            nodes.append(ComputeNode(1, "fwd", compute_s))
            deps = (1,)
        nodes.append(CollectiveNode(2, str(kind), kind, "world", nbytes, deps, root))
        out.append(RankGraph(r, tuple(nodes), f"test.{r}.et"))
    return JobGraph(f"{kind}-{ranks}", tuple(out), (world_group(ranks),))


def send_recv(ranks: int, nbytes: int) -> JobGraph:
    """Rank r sends to r+1 (tag 7) and receives from r-1: a ring of point-to-point transfers."""
    out = []
    for r in range(ranks):
        out.append(RankGraph(r, (SendNode(1, "send", (r + 1) % ranks, 7, nbytes),
                                 RecvNode(2, "recv", (r - 1) % ranks, 7, nbytes)), f"test.{r}.et"))
    return JobGraph(f"sendrecv-{ranks}", tuple(out), ())


def two_groups(ranks: int, nbytes: int) -> JobGraph:
    """Two process groups (even and odd ranks), each an all-reduce and then an all-gather, at the same time,
    then a world all-reduce that depends on both: collectives in flight on different groups at once."""
    even = ProcessGroup("even", tuple(range(0, ranks, 2)))
    odd = ProcessGroup("odd", tuple(range(1, ranks, 2)))
    out = []
    for r in range(ranks):
        g = "even" if r % 2 == 0 else "odd"
        out.append(RankGraph(r, (
            ComputeNode(1, "fwd", 0.001),
            CollectiveNode(2, "ar", CollectiveKind.ALL_REDUCE, g, nbytes, (1,)),
            CollectiveNode(3, "ag", CollectiveKind.ALL_GATHER, g, nbytes // 2, (1,)),
            CollectiveNode(4, "world", CollectiveKind.ALL_REDUCE, "world", nbytes, (2, 3)),
        ), f"test.{r}.et"))
    return JobGraph(f"two-groups-{ranks}", tuple(out), (even, odd, world_group(ranks)))


def in_network_and_hosts(ranks: int, nbytes: int) -> JobGraph:
    """After a computation, at once: a world all-reduce, reduce-scatter and all-gather (with algo = netreduce three
    switch jobs; with algo = ps the all-reduce through the servers) and an all-reduce of each pair (0, 1) and (2, 3)
    (the hosts' ring); then a world all-to-all (the hosts') and a second world all-reduce that depends on everything
    before."""
    pairs = [ProcessGroup(f"pair{i}", (2 * i, 2 * i + 1)) for i in range(ranks // 2)]
    out = []
    for r in range(ranks):
        nodes = (
            ComputeNode(1, "fwd", 0.001),
            CollectiveNode(2, "ar", CollectiveKind.ALL_REDUCE, "world", nbytes, (1,)),
            CollectiveNode(3, "rs", CollectiveKind.REDUCE_SCATTER, "world", nbytes, (1,)),
            CollectiveNode(4, "ag", CollectiveKind.ALL_GATHER, "world", nbytes // ranks, (1,)),
            CollectiveNode(5, "pair-ar", CollectiveKind.ALL_REDUCE, f"pair{r // 2}", nbytes, (1,)),
            CollectiveNode(6, "a2a", CollectiveKind.ALL_TO_ALL, "world", nbytes, (2, 3, 4, 5)),
            CollectiveNode(7, "ar2", CollectiveKind.ALL_REDUCE, "world", nbytes, (6,)),
        )
        out.append(RankGraph(r, nodes, f"test.{r}.et"))
    return JobGraph(f"in-network-and-hosts-{ranks}", tuple(out), (world_group(ranks), *pairs))


def through_results(report: GraphRunReport, graph: JobGraph, spec: ExperimentSpec | None = None) -> GraphRunReport:
    """The report as a trace run's results.json holds it (trace_results), written to JSON and read back."""
    import json

    from gradswitch.experiment import results_file
    from gradswitch.experiment.graph_run import GraphRunReport, graph_spec
    from gradswitch.experiment.trace_results import trace_results

    written = results_file.dumps(trace_results(spec or graph_spec(graph, bw_mbps=report.bw_mbps), graph, report, 0.0,
                                               []))
    return GraphRunReport.from_results(results_file.parse(json.loads(written)))


def trace_figures(path: Path) -> dict[str, Any]:
    """A trace run's results.json (the one results.json type, its format and code version checked) as its tests
    read it: its `graph` section, with the run's errors, faults and outcome."""
    from gradswitch.experiment import results_file

    results = results_file.read(path)
    assert results["format"] == results_file.FORMAT and results["code_version"], path
    assert "graph" in results, f"{path}: no graph section"
    return {**results["graph"], "errors": results["errors"], "faults": results.get("faults", []),
            "outcome": results["outcome"]}
