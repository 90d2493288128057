"""A graph operation on the hosts ends with its output (its last receive in, its own last step done), not with its
writes' acknowledgements (gradswitch/hosts/collectives/executor.py): the next operation's writes go out while a write
of the one before is still unacknowledged, and a packet of that write lost on the way is resent from the transport's
own copy of its bytes, so both operations' outputs stay exact. Ranks as threads on the real RoCE transport over an
in-memory network that loses one chosen packet (tests/memlink.py); the BMv2 twin is
tests/mininet/test_graph_op_end_bmv2.py."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from gradswitch.hosts.collectives.ops import STEP_BITS, ops_of
from gradswitch.roce.wire import parse_ipv4
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    JobGraph,
    RankGraph,
    RecvNode,
    SendNode,
    world_group,
)
from tests.memlink import MemoryHub
from tests.unit.test_graph_engine_hosts import assert_exact, job_of, run_graph_threads

NBYTES = 200  # every write one packet at the test's MTU of 256 (the lost packet is its write's last)


def two_in_a_row(kind: CollectiveKind | None) -> JobGraph:
    """Two ranks, two operations of `kind` one after the other (None: two sends from rank 0 to rank 1)."""
    if kind is None:
        return JobGraph("two-sends", (
            RankGraph(0, (SendNode(1, "a", 1, 7, NBYTES), SendNode(2, "b", 1, 7, NBYTES, (1,)))),
            RankGraph(1, (RecvNode(1, "a", 0, 7, NBYTES), RecvNode(2, "b", 0, 7, NBYTES, (1,))))), ())
    ranks = tuple(RankGraph(r, (CollectiveNode(1, "a", kind, "world", NBYTES),
                                CollectiveNode(2, "b", kind, "world", NBYTES, (1,)))) for r in range(2))
    return JobGraph(f"two-{kind}", ranks, (world_group(2),))


@dataclass
class LoseOnce:
    """Loses the first transmission of the write with immediate `imm` from `src`, and records the immediate data of
    every write's last packet from `src`, in the order they pass (resends included)."""

    src: str
    imm: int
    seen: list[int] = field(default_factory=list)

    def __call__(self, datagram: bytes) -> bool:
        d = parse_ipv4(datagram)
        if d.src != self.src or d.transport.imm is None:
            return False
        self.seen.append(d.transport.imm)
        return d.transport.imm == self.imm and self.seen.count(self.imm) == 1


@pytest.mark.parametrize("kind", [CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_TO_ALL, CollectiveKind.BROADCAST,
                                  None], ids=["all_reduce", "all_to_all", "broadcast", "send"])
def test_a_write_lost_across_an_operations_end_is_resent_and_both_stay_exact(tmp_path: Path,
                                                                             kind: CollectiveKind | None) -> None:
    graph = two_in_a_row(kind)
    job = job_of(graph)
    job = replace(job, job=replace(job.job, rto=0.1))  # a resend by timeout comes long after the next op's writes
    ops = ops_of(graph, 0)
    first, second = ops[1], ops[2]
    last = max(i for i, s in enumerate(first.schedule().steps) if s.send_to is not None)
    lose = LoseOnce(job.job.node(0).ip, first.imm(last))
    results, run = run_graph_threads(job, tmp_path, MemoryHub(seed=3, drop=lose))
    assert_exact(results, run)
    assert lose.seen.count(lose.imm) == 2, lose.seen  # lost once, resent once
    resent = [i for i, imm in enumerate(lose.seen) if imm == lose.imm][1]
    next_op = [i for i, imm in enumerate(lose.seen) if imm >> STEP_BITS == second.number]
    # rank 0's next operation wrote before the lost write was resent: its first operation had ended without the
    # write's acknowledgement (ending with its acknowledgements, it would have started after the resend)
    assert next_op and next_op[0] < resent, lose.seen
    by = {(n.rank, n.node_id): n for n in run.nodes}
    assert by[(0, 2)].start_s < by[(1, 1)].end_s  # rank 0 went on before rank 1 had the lost write
