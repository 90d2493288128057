"""DLCP marking on the hosts' graph engine: every data packet of a collective's writes carries its node's layer
class in BTH.resv7, none marked droppable, seen on the in-memory network (tests/memlink.py) as a switch would
see them; a job without DLCP marks nothing. And the layer class through the graph's plain form, Chakra traces
and the simulator's configuration."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from gradswitch.protocol.dlcp import DROPPABLE, LAYER_CLASSES, LAYER_MASK
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.roce.wire import parse_ipv4
from gradswitch.sim.sim_config import graph_json
from gradswitch.workload.chakra.reader import read_traces
from gradswitch.workload.chakra.writer import write_traces
from gradswitch.workload.dlcp import DlcpPolicy
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    RankGraph,
    from_dict,
    to_dict,
    validate,
    world_group,
)
from tests.memlink import MemoryHub
from tests.unit.test_graph_engine_hosts import job_of, run_graph_threads

RANKS = 4
BIG, SMALL = 40_000, 4_000  # bytes: ring all-reduces of each, at once


def two_classes(front: int = 1, back: int = 6) -> JobGraph:
    """After a computation, a world all-reduce of BIG bytes in layer class `front` and one of SMALL in `back`."""
    ranks = tuple(RankGraph(r, (
        ComputeNode(1, "bwd", 0.001),
        CollectiveNode(2, "front", CollectiveKind.ALL_REDUCE, "world", BIG, (1,), layer_class=front),
        CollectiveNode(3, "back", CollectiveKind.ALL_REDUCE, "world", SMALL, (1,), layer_class=back),
    ), f"dlcp.{r}.et") for r in range(RANKS))
    return JobGraph("two-classes", ranks, (world_group(RANKS),))


def run_seen(tmp_path: Path, dlcp: DlcpPolicy | None) -> tuple[Counter[int], set[int]]:
    """Run two_classes() on the hosts' graph engine; per layer class the payload bytes of the data packets seen
    (each packet once: a retransmission is the same QP and PSN), and every resv7 seen."""
    seen: Counter[int] = Counter()
    marks: set[int] = set()
    sent: set[tuple[str, int, int]] = set()
    lock = threading.Lock()

    def observe(datagram: bytes) -> float:
        d = parse_ipv4(datagram)
        t = d.transport
        if t.payload:
            with lock:
                marks.add(t.bth.resv7)
                if (d.src, t.bth.dest_qp, t.bth.psn) not in sent:
                    sent.add((d.src, t.bth.dest_qp, t.bth.psn))
                    seen[(t.bth.resv7 & LAYER_MASK) >> CONFIG.DLCP_LAYER_SHIFT] += len(t.payload)
        return 0.0

    job = job_of(two_classes())
    job = replace(job, job=replace(job.job, dlcp=dlcp))
    results, run = run_graph_threads(job, tmp_path, MemoryHub(seed=3, delay=observe))
    assert all(r["ok"] for r in results.values()), [r.get("error") for r in results.values()]
    assert all(n.checked is True for n in run.collectives())
    return seen, marks


def test_every_data_packet_carries_its_collectives_layer_class_and_none_is_droppable(tmp_path: Path) -> None:
    seen, marks = run_seen(tmp_path, DlcpPolicy())
    # a ring all-reduce: every rank sends 2 (N - 1) chunks of S / N bytes (S divides evenly here)
    ring = 2 * (RANKS - 1)
    assert seen == {1: ring * BIG, 6: ring * SMALL}
    assert not any(m & DROPPABLE for m in marks)


def test_a_job_without_dlcp_marks_nothing(tmp_path: Path) -> None:
    seen, marks = run_seen(tmp_path, None)
    assert marks == {0} and seen == {0: 2 * (RANKS - 1) * (BIG + SMALL)}


def test_the_layer_class_goes_through_the_plain_form_chakra_and_the_simulators_configuration(tmp_path: Path
                                                                                             ) -> None:
    graph = two_classes(front=0, back=LAYER_CLASSES - 1)
    assert from_dict(to_dict(graph)) == graph
    write_traces(graph, tmp_path / "dlcp")
    back = read_traces(tmp_path / "dlcp")
    assert [[getattr(n, "layer_class", None) for n in r.nodes] for r in back.ranks] == \
        [[None, 0, LAYER_CLASSES - 1]] * RANKS
    sim = graph_json(graph)
    assert [n.get("layer_class") for n in sim["ranks"][0]["nodes"]] == [None, 0, LAYER_CLASSES - 1]


def test_a_layer_class_out_of_range_is_refused_naming_the_file_and_node() -> None:
    with pytest.raises(GraphError, match=rf"dlcp\.0\.et: node 3 \(back\): layer class {LAYER_CLASSES}; DLCP's "
                                         rf"layer classes are 0 \(the front layers\) to {LAYER_CLASSES - 1}"):
        g = two_classes(back=LAYER_CLASSES)
        validate(g)
