"""A graph where DLCP's priorities decide the order (tests of both graph engines): ranks 0 and 1 each broadcast
a buffer to rank 2 at once, in two groups of two, so both flows meet at the switch's port to rank 2 and nothing
else shares a link; the first broadcast (node 0) in layer class 0 (the top priority), the second (node 1) in the
last class."""

from __future__ import annotations

from gradswitch.protocol.dlcp import LAYER_CLASSES
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, ProcessGroup, RankGraph
from gradswitch.workload.graph_timing import GraphRun


def fan_in(nbytes: int) -> JobGraph:
    groups = (ProcessGroup("front", (0, 2)), ProcessGroup("back", (1, 2)))
    front = CollectiveNode(0, "front", CollectiveKind.BROADCAST, "front", nbytes, root=0, layer_class=0)
    back = CollectiveNode(1, "back", CollectiveKind.BROADCAST, "back", nbytes, root=1, layer_class=LAYER_CLASSES - 1)
    return JobGraph("fan-in", (RankGraph(0, (front,)), RankGraph(1, (back,)), RankGraph(2, (front, back))), groups)


def received_s(run: GraphRun) -> tuple[float, float]:
    """When rank 2 had each broadcast (front, back): its nodes' ends."""
    ends = {n.node_id: n.end_s for n in run.nodes if n.rank == 2}
    return ends[0], ends[1]
