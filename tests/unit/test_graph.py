"""The execution-graph model (gradswitch/workload/graph.py): what runs is accepted, what cannot is refused in
one line naming the rank's file, the node and the problem; and the collectives' link-rate bounds
(gradswitch/workload/collective_bounds.py), computed by hand."""

from __future__ import annotations

import pytest

from gradswitch.workload.collective_bounds import collective_bound_s, point_to_point_bound_s
from gradswitch.workload.graph import (
    CollectiveKind as C,
)
from gradswitch.workload.graph import (
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    ProcessGroup,
    RankGraph,
    RecvNode,
    SendNode,
    from_dict,
    to_dict,
    topological_order,
    validate,
    world_group,
)


def job(per_rank: list[list], groups: tuple[ProcessGroup, ...] | None = None) -> JobGraph:
    return JobGraph("t", tuple(RankGraph(r, tuple(nodes), f"t.{r}.et") for r, nodes in enumerate(per_rank)),
                    groups if groups is not None else (world_group(len(per_rank)),))


def step(rank: int) -> list:
    return [ComputeNode(1, "fwd", 0.01), ComputeNode(2, "bwd", 0.02, (1,)),
            CollectiveNode(3, "rs", C.REDUCE_SCATTER, "world", 4096, (2,)),
            CollectiveNode(4, "ag", C.ALL_GATHER, "world", 1024, (3,)),
            SendNode(5, "to-next", (rank + 1) % 4, 7, 100, (4,)),
            RecvNode(6, "from-prev", (rank - 1) % 4, 7, 100, (4,))]


def test_a_job_that_can_run_is_accepted_and_survives_its_plain_form():
    g = job([step(r) for r in range(4)])
    validate(g)
    assert from_dict(to_dict(g)) == g


def test_order_puts_dependencies_first_and_keeps_file_order_where_free():
    r = RankGraph(0, (ComputeNode(5, "b", 0, (9,)), ComputeNode(9, "a", 0), ComputeNode(2, "c", 0)))
    assert [n.id for n in topological_order(r)] == [9, 5, 2]


@pytest.mark.parametrize("mutate, message", [
    (lambda g: g[0].append(ComputeNode(8, "x", 0, (42,))),
     "t.0.et: node 8 (x): depends on node 42, which does not exist"),
    (lambda g: g[1].__setitem__(0, ComputeNode(1, "fwd", 0.01, (2,))),
     "t.1.et: node 1 (fwd): its dependencies form a cycle"),
    (lambda g: g[2].append(ComputeNode(3, "dup", 0)), "t.2.et: node 3 (dup): the id appears twice"),
    (lambda g: g[3].__setitem__(3, CollectiveNode(4, "ag", C.ALL_GATHER, "world", 2048, (3,))),
     "t.3.et: node 4 (ag): collective 1 of group 'world' is all_gather of 2048 bytes here and all_gather of 1024"),
    (lambda g: g[1].__setitem__(2, CollectiveNode(3, "rs", C.ALL_TO_ALL, "world", 4096, (2,))),
     "t.1.et: node 3 (rs): collective 0 of group 'world' is all_to_all"),
    (lambda g: g[0].append(CollectiveNode(9, "ar", C.ALL_REDUCE, "tp", 8, (4,))),
     "t.0.et: node 9 (ar): process group 'tp' is not defined"),
    (lambda g: g[0].append(SendNode(9, "s", 4, 1, 8)), "t.0.et: node 9 (s): peer rank 4"),
    (lambda g: g[0].append(SendNode(9, "s", 2, 1, 8)),
     "t.0.et: node 9 (s): no matching receive on rank 2 with tag 1"),
    (lambda g: g[2].__setitem__(5, RecvNode(6, "from-prev", 1, 7, 99, (4,))),
     "t.1.et: node 5 (to-next): sends 100 bytes to rank 2 (tag 7), which receives 99"),
    (lambda g: g[0].append(ComputeNode(9, "neg", -1.0)), "t.0.et: node 9 (neg): duration -1.0 s"),
    (lambda g: g[0].append(CollectiveNode(9, "ar", C.ALL_REDUCE, "world", 64)),
     "t.0.et: node 9 (ar): group 'world' runs 3 collectives on rank 0 and 2 on rank 1"),
])
def test_a_graph_that_cannot_run_is_refused_in_one_line_naming_file_and_node(mutate, message):
    ranks = [step(r) for r in range(4)]
    mutate(ranks)
    with pytest.raises(GraphError) as e:
        validate(job(ranks))
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


def test_groups_out_of_range_and_members_that_never_run_are_refused():
    with pytest.raises(GraphError, match="process group 'tp' names rank 4, out of range"):
        validate(job([step(r) for r in range(4)], (world_group(4), ProcessGroup("tp", (2, 4)))))
    ranks = [step(r) for r in range(4)]
    ranks[0].append(CollectiveNode(9, "ar", C.ALL_REDUCE, "tp", 64, (4,)))
    with pytest.raises(GraphError, match="a collective of group 'tp' that rank 1 never runs"):
        validate(job(ranks, (world_group(4), ProcessGroup("tp", (0, 1)))))


def test_bounds_by_hand():
    mib, rate = float(1 << 20), 1e9 / 8  # 1 MiB at 1 Gb/s
    t = mib / rate
    assert collective_bound_s(C.ALL_REDUCE, 4, mib, rate) == pytest.approx(2 * 3 / 4 * t)
    assert collective_bound_s(C.ALL_REDUCE, 4, mib, rate, in_network=True) == pytest.approx(t)
    assert collective_bound_s(C.REDUCE_SCATTER, 8, mib, rate) == pytest.approx(7 / 8 * t)
    assert collective_bound_s(C.REDUCE_SCATTER, 8, mib, rate, in_network=True) == pytest.approx(t)  # whole buffer up
    assert collective_bound_s(C.ALL_GATHER, 8, mib / 8, rate, in_network=True) == pytest.approx(t)  # a completer's
    assert collective_bound_s(C.ALL_TO_ALL, 8, mib, rate) == pytest.approx(7 / 8 * t)
    # all-gather's size is the shard: 8 shards of 128 KiB make a 1 MiB output, of which 7/8 arrive
    assert collective_bound_s(C.ALL_GATHER, 8, mib / 8, rate) == pytest.approx(7 / 8 * t)
    assert collective_bound_s(C.BROADCAST, 8, mib, rate) == pytest.approx(t)
    assert point_to_point_bound_s(mib, rate) == pytest.approx(t)
    assert collective_bound_s(C.ALL_REDUCE, 1, mib, rate) == 0.0


def test_timings_group_collectives_by_position_and_count_exposed_communication():
    from gradswitch.workload.graph_timing import GraphRun, NodeTiming

    run = GraphRun((
        NodeTiming(0, 1, "compute", 0.0, 1.0),
        NodeTiming(0, 2, "collective", 0.5, 2.0, C.ALL_REDUCE, "world", 64, True),
        NodeTiming(1, 7, "collective", 0.8, 2.5, C.ALL_REDUCE, "world", 64, True),
        NodeTiming(1, 8, "collective", 3.0, 4.0, C.ALL_GATHER, "world", 8, False),
        NodeTiming(0, 3, "collective", 2.1, 3.5, C.ALL_GATHER, "world", 8, True),
    ))
    first, second = run.collectives()
    assert (first.collective, first.start_s, first.end_s, first.checked) == (C.ALL_REDUCE, 0.5, 2.5, True)
    assert (second.collective, second.start_s, second.end_s, second.checked) == (C.ALL_GATHER, 2.1, 4.0, False)
    # rank 0 communicates 0.5-2.0 and 2.1-3.5 and computes 0-1: 2.4 s exposed; rank 1 never computes: 1.7 + 1.0
    assert run.exposed_communication_s() == {0: pytest.approx(2.4), 1: pytest.approx(2.7)}
    assert run.job_s == 4.0
    assert GraphRun.from_dict(run.to_dict()) == run
