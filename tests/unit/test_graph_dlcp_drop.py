"""DLCP dropping on the hosts' graph engine (gradswitch/hosts/graph_main.py, collectives/ops.py Op.tag_at), on the
in-memory network (tests/memlink.py) with a switch that trims every droppable packet: a training graph's
all-reduces are marked as the loop marks its writes (droppable only at or past drop_min_layer_class and at or under
drop_max_magnitude_class, the magnitude from the rank's thresholds of the iteration and the values' contributions),
receivers zero-fill within the loss budget, and each node reports what it lost instead of failing its check."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

from gradswitch.protocol.dlcp import DROPPABLE, LAYER_MASK, MAGNITUDE_MASK, TRIMMED
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.roce.qp import Mode
from gradswitch.roce.wire import parse_ipv4
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, ComputeNode, JobGraph, RankGraph, world_group
from gradswitch.workload.graph_timing import GraphRun
from tests.memlink import MemoryHub
from tests.unit.test_graph_engine_hosts import job_of, run_graph_threads

RANKS = 4
FRONT, BACK = 1, 6  # layer classes: the front all-reduce is never droppable (under drop_min_layer_class 4)
BYTES = 24_000


def training_like() -> JobGraph:
    """One training iteration's shape: a backward pass, then a front and a back all-reduce (droppable nodes, as
    gradswitch/workload/generators/training.py makes them), named as a training graph's nodes."""
    ranks = tuple(RankGraph(r, (
        ComputeNode(1, "it0.bwd.l", 0.001),
        CollectiveNode(2, "it0.allreduce.0", CollectiveKind.ALL_REDUCE, "world", BYTES, (1,), layer_class=FRONT,
                       droppable=True),
        CollectiveNode(3, "it0.allreduce.1", CollectiveKind.ALL_REDUCE, "world", BYTES, (1,), layer_class=BACK,
                       droppable=True),
    )) for r in range(RANKS))
    return JobGraph("training-like", ranks, (world_group(RANKS),))


Marks = Counter[tuple[int, int, bool]]  # (layer class, magnitude class, droppable) -> packets


def run(tmp_path: Path, policy: DlcpPolicy) -> tuple[dict[int, dict[str, object]], GraphRun, Marks, MemoryHub]:
    """Run training_like() with every droppable packet trimmed; the first copy of every data packet (trimmed or
    whole) counted by (layer class, magnitude class, droppable)."""
    marks: Marks = Counter()
    sent: set[tuple[str, int, int]] = set()
    lock = threading.Lock()

    def observe(datagram: bytes) -> float:
        d = parse_ipv4(datagram)
        t = d.transport
        if t.payload or t.bth.resv7 & TRIMMED:  # a data packet, or one the switch trimmed just now
            with lock:
                if (d.src, t.bth.dest_qp, t.bth.psn) not in sent:
                    sent.add((d.src, t.bth.dest_qp, t.bth.psn))
                    r = t.bth.resv7
                    layer = (r & LAYER_MASK) >> CONFIG.DLCP_LAYER_SHIFT
                    marks[(layer, (r & MAGNITUDE_MASK) >> CONFIG.DLCP_MAGNITUDE_SHIFT, bool(r & DROPPABLE))] += 1
        return 0.0

    job = job_of(training_like())
    job = replace(job, job=replace(job.job, dlcp=policy, transport=Mode.SR))
    hub = MemoryHub(seed=3, delay=observe, trim=lambda datagram: True)
    results, graph_run = run_graph_threads(job, tmp_path, hub)
    return results, graph_run, marks, hub


def test_droppable_packets_are_the_loops_and_trimmed_ones_are_zero_filled_and_judged(tmp_path: Path) -> None:
    results, graph_run, marks, hub = run(tmp_path, DlcpPolicy(drop=True, loss_budget=0.2))
    assert all(r["ok"] for r in results.values()), [r.get("error") for r in results.values()]
    # marked as the loop marks: droppable exactly where the layer class is at least 4 and the magnitude at most 1
    assert all(drop == (layer >= 4 and magnitude <= 1) for (layer, magnitude, drop) in marks), marks
    front = {m: n for (layer, m, _d), n in marks.items() if layer == FRONT}
    back = {m: n for (layer, m, _d), n in marks.items() if layer == BACK}
    assert sum(front.values()) == sum(back.values()) > 0
    # the magnitude thresholds are the rank's own quartiles: its packets spread over the classes, not one
    assert len(back) >= 3 and sum(n for (_l, _m, d), n in marks.items() if d) > 0
    assert hub.trimmed  # the switch trimmed droppable packets
    by_node = {(t.rank, t.node_id): t for t in graph_run.nodes}
    zero = sum(by_node[(r, 3)].zero_filled for r in range(RANKS))
    assert zero > 0 and sum(by_node[(r, 2)].zero_filled for r in range(RANKS)) == 0
    assert all(by_node[(r, 2)].error2 == 0 and by_node[(r, 2)].checked for r in range(RANKS))
    # the back all-reduce lost values and says how much (its output is not failed for it)
    assert all(by_node[(r, 3)].checked for r in range(RANKS))
    assert sum(by_node[(r, 3)].error2 for r in range(RANKS)) > 0
    assert all(by_node[(r, 3)].norm2 > 0 for r in range(RANKS))
    responder = Counter[str]()
    for r in results.values():
        stats = r["stats"]
        assert isinstance(stats, dict)
        responder.update(stats["responder"])
    assert responder["zero_filled"] == zero  # every zero-filled packet counted on its node


def test_without_dropping_nothing_is_droppable_and_every_output_is_exact(tmp_path: Path) -> None:
    results, graph_run, marks, hub = run(tmp_path, DlcpPolicy(drop=False))
    assert all(r["ok"] for r in results.values())
    assert not any(drop for (_l, _m, drop) in marks) and not hub.trimmed
    assert all(t.checked and t.zero_filled == 0 and t.error2 == 0 for t in graph_run.nodes if t.kind == "collective")
