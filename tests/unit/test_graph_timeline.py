"""The timeline of an execution-graph run (gradswitch/experiment/graph_timeline.py): per rank a row of
computation, one per process group its collectives ran on and one of transfers; every node drawn once, at its
time."""

from __future__ import annotations

import json

from gradswitch.experiment.graph_timeline import PLOT_FILE, TRACE_FILE, write_graph_timeline
from gradswitch.workload.graph import CollectiveKind
from gradswitch.workload.graph_timing import GraphRun, NodeTiming


def test_each_rank_has_rows_for_compute_each_group_and_transfers_and_every_node_is_drawn_at_its_time(tmp_path):
    nodes = []
    for rank in (0, 1):
        nodes += [NodeTiming(rank, 0, "compute", 0.0, 0.5),
                  NodeTiming(rank, 1, "collective", 0.5, 0.9, CollectiveKind.ALL_REDUCE, "world", 1024, True),
                  NodeTiming(rank, 2, "collective", 0.6, 1.2, CollectiveKind.ALL_GATHER, "tp", 256, True),
                  NodeTiming(rank, 3, "send" if rank == 0 else "recv", 1.2, 1.5, None, None, 64,
                             None if rank == 0 else True)]
    written = write_graph_timeline(GraphRun(tuple(nodes)), ("h1", "h2"), tmp_path, "two ranks")
    assert written == [TRACE_FILE, PLOT_FILE] and (tmp_path / PLOT_FILE).stat().st_size > 5_000
    trace = json.loads((tmp_path / TRACE_FILE).read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in trace if e["name"] == "process_name"}
    assert processes == {0: "rank 0 on h1", 1: "rank 1 on h2"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    assert [threads[(0, t)] for t in range(4)] == ["compute", "group tp", "group world", "send/recv"]
    spans = {(e["pid"], e["args"]["node"]): e for e in trace if e["ph"] == "X"}
    assert len(spans) == len(nodes)
    for n in nodes:
        e = spans[(n.rank, n.node_id)]
        assert (e["ts"], e["dur"]) == (round(n.start_s * 1e6, 3), round(n.duration_s * 1e6, 3))
    assert spans[(0, 1)]["tid"] == 2 and spans[(0, 2)]["tid"] == 1 and spans[(1, 3)]["cat"] == "recv"
    assert {spans[(0, i)]["cat"] for i in range(4)} == {"compute", "all_reduce", "all_gather", "send"}


def test_an_empty_run_writes_nothing(tmp_path):
    assert write_graph_timeline(GraphRun(()), (), tmp_path, "nothing") == []
    assert not (tmp_path / TRACE_FILE).exists()
