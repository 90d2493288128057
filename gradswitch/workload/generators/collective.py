"""One collective (or a send/recv exchange) on N ranks, optionally repeated with a computation between."""

from __future__ import annotations

from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    Node,
    RankGraph,
    RecvNode,
    SendNode,
    validate,
    world_group,
)

SEND_RECV = "send_recv"  # the point-to-point pattern's name beside the collectives' (export-et --collective)


def _check(ranks: int, nbytes: int, repeat: int, compute_s: float, least_ranks: int) -> None:
    if ranks < least_ranks:
        raise GraphError(f"{ranks} ranks: this workload needs at least {least_ranks}")
    if nbytes <= 0:
        raise GraphError(f"{nbytes} bytes: communication moves at least 1 byte")
    if repeat < 1:
        raise GraphError(f"repeat {repeat}: run it at least once")
    if not compute_s >= 0:
        raise GraphError(f"computation of {compute_s} s between repetitions: give 0 s or more")


def collective_graph(kind: CollectiveKind, ranks: int, nbytes: int, repeat: int = 1, compute_s: float = 0.0,
                     root: int = 0, name: str = "") -> JobGraph:
    """Every rank runs `kind` of `nbytes` (the graph model's meaning of a size) on the world group,
    `repeat` times in a row, with a computation of `compute_s` before each repetition after the first."""
    _check(ranks, nbytes, repeat, compute_s, 1)
    group = world_group(ranks)
    out = []
    for r in range(ranks):
        nodes: list[Node] = []
        for i in range(repeat):
            deps = (nodes[-1].id,) if nodes else ()
            if i > 0 and compute_s > 0:
                nodes.append(ComputeNode(len(nodes), f"compute.{i}", compute_s, deps))
                deps = (nodes[-1].id,)
            nodes.append(CollectiveNode(len(nodes), f"{kind.value}.{i}", kind, group.name, nbytes, deps, root))
        out.append(RankGraph(r, tuple(nodes)))
    graph = JobGraph(name or f"{kind.value}-n{ranks}", tuple(out), (group,))
    validate(graph)
    return graph


def send_recv_graph(ranks: int, nbytes: int, repeat: int = 1, compute_s: float = 0.0, name: str = "") -> JobGraph:
    """Each rank sends `nbytes` to the next rank (r + 1 mod N) and receives as much from the previous
    one, both at once, `repeat` times (tag = the repetition), a computation of `compute_s` between."""
    _check(ranks, nbytes, repeat, compute_s, 2)
    out = []
    for r in range(ranks):
        nodes: list[Node] = []
        deps: tuple[int, ...] = ()
        for i in range(repeat):
            if i > 0 and compute_s > 0:
                nodes.append(ComputeNode(len(nodes), f"compute.{i}", compute_s, deps))
                deps = (nodes[-1].id,)
            send = SendNode(len(nodes), f"send.{i}", (r + 1) % ranks, i, nbytes, deps)
            recv = RecvNode(len(nodes) + 1, f"recv.{i}", (r - 1) % ranks, i, nbytes, deps)
            nodes += [send, recv]
            deps = (send.id, recv.id)
        out.append(RankGraph(r, tuple(nodes)))
    graph = JobGraph(name or f"{SEND_RECV}-n{ranks}", tuple(out), ())
    validate(graph)
    return graph
