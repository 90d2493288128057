"""NetReduce reduce-scatter and all-gather on the hosts' side (gradswitch/hosts/netreduce_scatter.py,
netreduce_gather.py) against the Python switch model (tests/netreduce_model.py: reduce-scatter's owner gets a message's
sum, the other receivers its headers, trimmed; all-gather's owner sends the values, the others placeholders, and every
receiver but the owner gets them), with loss, in both transport modes, mixed with all-reduce messages on one job. The
switch program itself is tested on BMv2 (tests/bmv2/test_netreduce_rs_ag.py, tests/mininet/test_netreduce_rs_ag.py)."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from gradswitch.hosts.collectives.data import expected, input_of
from gradswitch.hosts.comm import Comm
from gradswitch.hosts.netreduce import NetReduceWorker
from gradswitch.hosts.netreduce_gather import all_gather, gather_plan, placeholders_of
from gradswitch.hosts.netreduce_scatter import reduce_scatter, scatter_plan
from gradswitch.hosts.ring import chunk_bounds
from gradswitch.protocol.netreduce import MESSAGE_ELEMENTS, MTU, PACKETS, JobLayout
from gradswitch.protocol.polling import wait_until
from gradswitch.roce.engine import Engine
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import CollectiveKind
from tests.inmemory import job
from tests.netreduce_model import NetReduceHub


def test_plan_covers_every_shard_in_rounds():
    plan = scatter_plan(3 * MESSAGE_ELEMENTS + 5, 3)  # shards of 1026, 1026, 1025 elements: two pieces each
    assert [p.owner for p in plan] == [0, 1, 2, 0, 1, 2]
    covered = sorted((p.lo, p.hi) for p in plan)
    assert covered[0][0] == 0 and covered[-1][1] == 3 * MESSAGE_ELEMENTS + 5
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))
    for p in plan:
        lo, hi = chunk_bounds(3 * MESSAGE_ELEMENTS + 5, 3)[p.owner]
        assert lo <= p.lo < p.hi <= hi and p.hi - p.lo <= MESSAGE_ELEMENTS


def test_plan_refuses_an_empty_buffer():
    with pytest.raises(ValueError, match="0 elements"):
        scatter_plan(0, 4)


def test_a_job_that_does_not_scatter_names_no_owner():
    with pytest.raises(ValueError, match="neither reduce-scatters nor all-gathers"):
        JobLayout(3, 4, 2).owner_va(0, 1)
    with pytest.raises(ValueError, match=r"2\.\.31"):
        JobLayout(3, 32, 2, scatter=True)


def run_ranks(workers: int, ops: list[tuple[str, int]], loss: float = 0.0, transport: str = "gbn", credits: int = 2,
              placeholders: bool = False
              ) -> tuple[dict[int, list[Int32Array]], NetReduceHub, list[list[Int32Array]]]:
    """Every rank in a thread runs `ops` ((kind, elements): "rs" reduce-scatter, "ag" all-gather (elements: the
    shard; the others' messages as placeholders with `placeholders`), "ar" all-reduce) in order on one NetReduce
    job (that all-gathers if any op does, else reduce-scatters); the outputs by rank, the hub, and each op's
    inputs by rank."""
    gather = any(kind == "ag" for kind, _ in ops)
    cfg = job("netreduce", workers, mtu=MTU, job_id=3, credits=credits, transport=transport, rto=0.02)
    layout = JobLayout(3, workers, credits, scatter=not gather, gather=gather)
    hub = NetReduceHub(layout, [n.ip for n in cfg.nodes], loss=loss, seed=5)
    inputs = [[input_of(11, f"op{i}", r, n) for r in range(workers)] for i, (_, n) in enumerate(ops)]
    outputs: dict[int, list[Int32Array]] = {}
    errors: list[str] = []
    finished: set[int] = set()
    lock = threading.Lock()

    def rank(r: int) -> None:
        me = cfg.workers[r]
        engine = Engine(hub.link(me.ip), me.ip)
        comm = Comm(cfg, me, engine)
        try:
            worker = NetReduceWorker(comm, scatter=not gather, gather=gather)
            outs = []
            for i, (kind, _) in enumerate(ops):
                data = inputs[i][r]
                outs.append(reduce_scatter(worker, data) if kind == "rs" else all_gather(worker, data, placeholders)
                            if kind == "ag" else worker.allreduce(0, i, data))
            comm.drain()
            outputs[r] = outs
        except Exception as e:  # reported by the test, naming the rank
            errors.append(f"rank {r}: {type(e).__name__}: {e}")
        finally:
            with lock:
                finished.add(r)
            # Answer the others' retransmissions until every rank is done (its ACKs may have been lost).
            while len(finished) < workers:
                comm.step(0.01, "the other ranks")
            engine.close()

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(workers)]
    for t in threads:
        t.start()
    wait_until(lambda: len(finished) == workers, 120, what="every rank to finish")
    for t in threads:
        t.join(timeout=10)
    assert not errors, errors
    return outputs, hub, inputs


def check(outputs: dict[int, list[Int32Array]], ops: list[tuple[str, int]], inputs: list[list[Int32Array]]) -> None:
    for r, outs in outputs.items():
        for i, (kind, _) in enumerate(ops):
            want = expected({"rs": CollectiveKind.REDUCE_SCATTER, "ag": CollectiveKind.ALL_GATHER,
                             "ar": CollectiveKind.ALL_REDUCE}[kind], inputs[i], r)
            assert np.array_equal(outs[i], want), f"rank {r}, op {i} ({kind}): wrong output"


@pytest.mark.parametrize("workers", [2, 4])
def test_reduce_scatter_exact_and_trimmed_for_non_owners(workers):
    ops = [("rs", 5 * MESSAGE_ELEMENTS + 7)]
    outputs, hub, inputs = run_ranks(workers, ops)
    check(outputs, ops, inputs)
    messages = len(scatter_plan(ops[0][1], workers))
    assert hub.events["completion"] == messages * PACKETS
    # every completed packet went whole to its owner and trimmed to each of the N-1 others
    assert hub.events["trimmed"] == messages * PACKETS * (workers - 1)


@pytest.mark.parametrize("transport", ["gbn", "sr"])
def test_reduce_scatter_and_all_reduce_on_one_job_under_loss(transport):
    ops = [("rs", 3 * MESSAGE_ELEMENTS), ("ar", 2 * MESSAGE_ELEMENTS + 1), ("rs", 4 * MESSAGE_ELEMENTS + 3)]
    outputs, hub, inputs = run_ranks(3, ops, loss=0.02, transport=transport)
    check(outputs, ops, inputs)
    assert hub.dropped > 0
    assert hub.events.get("retransmitted-result", 0) + hub.events.get("duplicate", 0) > 0


def test_gather_plan_interleaves_the_owners_each_round_one_further():
    plan = gather_plan(MESSAGE_ELEMENTS + 1, 3)
    assert [(p.owner, p.lo, p.hi) for p in plan] == [
        (0, 0, MESSAGE_ELEMENTS), (1, 0, MESSAGE_ELEMENTS), (2, 0, MESSAGE_ELEMENTS),
        (1, MESSAGE_ELEMENTS, MESSAGE_ELEMENTS + 1), (2, MESSAGE_ELEMENTS, MESSAGE_ELEMENTS + 1),
        (0, MESSAGE_ELEMENTS, MESSAGE_ELEMENTS + 1)]


def test_placeholders_are_every_other_ranks_message_or_none():
    plan = gather_plan(MESSAGE_ELEMENTS + 1, 3)  # rounds: owners 0 1 2, then 1 2 0
    assert placeholders_of(plan, 1, True) == [True, False, True, False, True, True]
    assert placeholders_of(plan, 2, True) == [True, True, False, True, False, True]
    assert placeholders_of(plan, 1, False) == [False] * 6


def test_a_job_reduce_scatters_or_all_gathers_not_both():
    with pytest.raises(ValueError, match="not both"):
        JobLayout(3, 4, 2, scatter=True, gather=True)


@pytest.mark.parametrize("placeholders", [False, True])
@pytest.mark.parametrize("workers", [2, 4])
def test_all_gather_exact_each_values_packet_sent_once(workers, placeholders):
    ops = [("ag", 2 * MESSAGE_ELEMENTS + 9)]
    outputs, hub, inputs = run_ranks(workers, ops, placeholders=placeholders)
    check(outputs, ops, inputs)
    messages = len(gather_plan(ops[0][1], workers))
    assert hub.events["completion"] == messages * PACKETS
    assert hub.events["trimmed"] == messages * PACKETS  # the owner's own copy, the others whole
    assert hub.events["contribution"] == messages * PACKETS * workers  # each rank's counted once
    if placeholders:  # every rank sent one for each packet of another rank's messages: taken as zeros, or, had
        # it completed a cell, refused and resent whole
        sent = messages * PACKETS * (workers - 1)
        assert hub.events["placeholder"] > 0
        assert hub.events["placeholder"] + hub.events.get("placeholder-last", 0) >= sent
    else:  # every packet whole: none a placeholder, none held
        assert hub.events.get("placeholder", 0) == hub.events.get("placeholder-last", 0) == 0


@pytest.mark.parametrize("transport", ["gbn", "sr"])
def test_all_gather_and_all_reduce_on_one_job_under_loss(transport):
    ops = [("ag", 3 * MESSAGE_ELEMENTS), ("ar", MESSAGE_ELEMENTS + 1), ("ag", 2 * MESSAGE_ELEMENTS + 3)]
    outputs, hub, inputs = run_ranks(3, ops, loss=0.02, transport=transport)
    check(outputs, ops, inputs)
    assert hub.dropped > 0
    assert hub.events.get("retransmitted-result", 0) + hub.events.get("duplicate", 0) > 0


def test_the_check_process_names_a_missing_or_unknown_collective(tmp_path):
    from gradswitch.hosts.netreduce_rs_ag_check import collective_of

    config = tmp_path / "job1.json"
    with pytest.raises(ValueError, match=r"job1\.collective: cannot read the collective to run"):
        collective_of(config)
    (tmp_path / "job1.collective").write_text("all-to-all\n")
    with pytest.raises(ValueError, match="'all-to-all' is not one of"):
        collective_of(config)
    (tmp_path / "job1.collective").write_text("all-gather\n")
    assert collective_of(config) == (CollectiveKind.ALL_GATHER, False)
    (tmp_path / "job1.collective").write_text("all-gather-placeholders\n")
    assert collective_of(config) == (CollectiveKind.ALL_GATHER, True)
