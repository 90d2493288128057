"""NetReduce falls back to ring all-reduce when its switch is lost, and returns (gradswitch/hosts/fallback.py), against
the Python switch model: the switch is made to drop every contribution (lost), the signal written as RunSettings writes
it, the switch's cells cleared, the return signalled. Every sum exact; the paths as the workers report them. The same on
real BMv2: tests/mininet/test_netreduce_fallback.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gradswitch.hosts.fallback import (
    Announcement,
    PathSignal,
    ReductionPath,
    all_announced,
    announce,
    announcements,
    path_of_epoch,
    read_signal,
    write_signal,
)
from gradswitch.protocol.netreduce import MESSAGE_BYTES, MTU, PACKETS, JobLayout
from gradswitch.protocol.polling import wait_until
from tests.inmemory import job, run_job
from tests.netreduce_model import Cell, NetReduceHub

JOB = 3
ITERATIONS = 30


class LosableSwitch(NetReduceHub):
    """The model switch, which can be lost (it takes no contribution, so it sends no result) and come back
    with empty cells, as a restarted BMv2 does."""

    lost = False

    def _contribution(self, rank: int, t: Any) -> None:
        if self.lost:
            self._event("lost")
            return
        super()._contribution(rank, t)

    cut: tuple[int, frozenset[int]] | None = None  # (message, ranks): its result reaches those ranks alone, then lost
    cut_packets = 0

    def _emit(self, t: Any, values: list[int], senders: list[int], owner: int) -> None:
        lay = self.layout
        if self.cut is not None and lay.message_of(t.bth.psn) - lay.message_of(lay.initial_psn) == self.cut[0]:
            # the switch dies while it sends this result: some receivers have it, the others not
            senders = [j for j in senders if lay.peer(j) in self.cut[1]]
            self.cut_packets += 1
            if self.cut_packets == PACKETS:
                self.lost, self.cut = True, None
        super()._emit(t, values, senders, owner)

    def restart(self) -> None:
        with self._lock:
            self.cells = [Cell() for _ in range(self.layout.cells)]
            self.context = {}
            self.lost = False


def progress(run_dir: Path, workers: int) -> int:
    """The fewest iterations any worker says it completed."""
    def of(n: int) -> int:
        p = run_dir / f"progress-{n}"
        return int(p.read_text() or 0) if p.exists() else 0

    return min(of(n) for n in range(workers))


def test_signal_and_agreement_files(tmp_path):
    assert read_signal(tmp_path, JOB) is None
    write_signal(tmp_path, JOB, PathSignal(1, "spine1", "switch-down spine1"))
    assert read_signal(tmp_path, JOB) == PathSignal(1, "spine1", "switch-down spine1")
    assert [path_of_epoch(e) for e in range(4)] == [ReductionPath.SWITCH, ReductionPath.RING,
                                                     ReductionPath.SWITCH, ReductionPath.RING]
    announce(tmp_path, JOB, 1, 0, Announcement(5, 40))
    assert announcements(tmp_path, JOB, 1, 2) is None and not all_announced(tmp_path, JOB, 1, 2)
    announce(tmp_path, JOB, 1, 1, Announcement(4, 44))
    assert announcements(tmp_path, JOB, 1, 2) == [Announcement(5, 40), Announcement(4, 44)]
    assert all_announced(tmp_path, JOB, 1, 2)


def run_with_loss_of_switch(tmp_path: Path, workers: int, restart: bool, again: bool = False, **kw: Any
                            ) -> tuple[dict, LosableSwitch]:
    iterations = ITERATIONS  # enough that the last signal comes well before the end (in memory an iteration is ms)
    cfg = job("netreduce", workers, iterations=iterations, mtu=MTU, job_id=JOB, credits=2, size_bytes=40000,
              rto=0.05, **kw)
    hub = LosableSwitch(JobLayout(JOB, workers, 2), [n.ip for n in cfg.nodes], seed=5)
    errors: list[BaseException] = []

    def control() -> None:  # what RunSettings does on the controller's health events
        try:
            wait_until(lambda: progress(tmp_path, workers) >= 2, 60, 0.005, "2 iterations")
            hub.lost = True
            write_signal(tmp_path, JOB, PathSignal(1, "s1", "switch-down s1"))
            wait_until(lambda: all_announced(tmp_path, JOB, 1, workers), 30, 0.005, "the fallback's announcements")
            if restart:
                wait_until(lambda: progress(tmp_path, workers) >= 5, 60, 0.005, "5 iterations")
                hub.restart()
                write_signal(tmp_path, JOB, PathSignal(2, "s1", "switch-up s1"))
            if again:  # lost a second time, for good
                wait_until(lambda: all_announced(tmp_path, JOB, 2, workers), 30, 0.005, "the return's announcements")
                wait_until(lambda: progress(tmp_path, workers) >= 8, 60, 0.005, "8 iterations")
                hub.lost = True
                write_signal(tmp_path, JOB, PathSignal(3, "s1", "switch-down s1"))
        except BaseException as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=control, daemon=True)
    t.start()
    results = run_job(cfg, tmp_path, hub)
    t.join(timeout=60)
    assert not errors, (errors, [r.get("error") for r in results.values()])
    for r in results.values():
        assert r["ok"], r.get("error")
        assert len(r["iterations"]) == iterations and all(it["correct"] for it in r["iterations"])
    return results, hub


@pytest.mark.parametrize("transport", ["gbn", "sr"])
def test_lost_switch_falls_back_to_ring_and_returns(tmp_path, transport):
    results, hub = run_with_loss_of_switch(tmp_path, 4, restart=True, transport=transport)
    reports = [r["fallback"] for r in results.values()]
    for fb in reports:
        assert [c["path"] for c in fb["changes"]] == ["ring", "switch"]
        assert fb["by_ring"] > 0 and fb["by_switch"] > 0
    # every worker agreed on where each path started, and on how many reductions each path gave
    assert len({tuple(c["from_reduction"] for c in fb["changes"]) for fb in reports}) == 1
    ring_from, switch_from = reports[0]["changes"][0]["from_reduction"], reports[0]["changes"][1]["from_reduction"]
    assert ring_from < switch_from
    for fb in reports:
        # ring ran exactly the reductions between the agreements (some of them, redone for the others, the
        # switch had given this worker already); the switch every other one
        assert fb["by_ring"] + fb["redone_for_others"] == switch_from - ring_from
        assert fb["by_switch"] + fb["by_ring"] == ITERATIONS
        c = fb["changes"][0]
        assert c["signalled_at"] <= c["agreed_at"]
    # after the return the switch summed again: more completions after the restart than none
    assert hub.events["completion"] > 0


def test_a_switch_lost_again_after_its_return_falls_back_again(tmp_path):
    results, _ = run_with_loss_of_switch(tmp_path, 3, restart=True, again=True)
    starts = set()
    for r in results.values():
        fb = r["fallback"]
        assert [c["path"] for c in fb["changes"]] == ["ring", "switch", "ring"]
        first, back, second = (c["from_reduction"] for c in fb["changes"])
        starts.add((first, back, second))
        assert fb["by_ring"] + fb["redone_for_others"] == (back - first) + (ITERATIONS - second)
    assert len(starts) == 1


def test_a_switch_that_never_comes_back_leaves_every_later_reduction_to_ring(tmp_path):
    results, _ = run_with_loss_of_switch(tmp_path, 3, restart=False)
    for r in results.values():
        fb = r["fallback"]
        assert [c["path"] for c in fb["changes"]] == ["ring"]
        ring_from = fb["changes"][0]["from_reduction"]
        # (a reduction it had from the switch after ring_from it took part in again for the others)
        assert fb["by_switch"] - fb["redone_for_others"] == ring_from and fb["by_ring"] > 0
        # the iterations after the loss were reduced by ring entirely
        assert sorted(int(i) for i in fb["ring_by_iteration"])[-1] == len(r["iterations"]) - 1


def test_two_workers_do_not_fall_back(tmp_path):
    """With two workers the reverse ring would be NetReduce's own connection: no fallback is offered."""
    cfg = job("netreduce", 2, iterations=1, mtu=MTU, job_id=JOB, credits=2, size_bytes=4000)
    hub = NetReduceHub(JobLayout(JOB, 2, 2), [n.ip for n in cfg.nodes])
    results = run_job(cfg, tmp_path, hub)
    assert all(r["ok"] and "fallback" not in r for r in results.values())


def test_reverse_ring_sums_exactly(tmp_path):
    """The fallback's ring on its own (every reduction by ring from the first): a signal before the go."""
    workers = 5
    cfg = job("netreduce", workers, iterations=2, mtu=MTU, job_id=JOB, credits=2, size_bytes=12345 * 4)
    hub = LosableSwitch(JobLayout(JOB, workers, 2), [n.ip for n in cfg.nodes])
    hub.lost = True
    write_signal(tmp_path, JOB, PathSignal(1, "s1", "lost before the start"))
    results = run_job(cfg, tmp_path, hub)
    for r in results.values():
        assert r["ok"], r.get("error")
        assert all(it["correct"] for it in r["iterations"])
        assert r["fallback"]["by_switch"] == 0 and r["fallback"]["by_ring"] > 0
    assert np.all([r["fallback"]["changes"][0]["from_reduction"] == 0 for r in results.values()])


def test_a_reduction_some_workers_finished_is_redone_by_ring_for_the_others(tmp_path):
    """The switch dies while it sends a message's result: ranks 0 and 1 have the reduction, 2 and 3 do not. The
    agreement starts ring at that reduction; 0 and 1 take part again with the inputs they kept (the others need
    their shares), so every sum is exact and every worker's ring gave the same reductions."""
    workers = 4
    cfg = job("netreduce", workers, iterations=6, mtu=MTU, job_id=JOB, credits=1, size_bytes=MESSAGE_BYTES, rto=0.05)
    hub = LosableSwitch(JobLayout(JOB, workers, 1), [n.ip for n in cfg.nodes], seed=5)
    errors: list[BaseException] = []

    hub.cut = (3, frozenset({0, 1}))  # one message a reduction: reduction 3, iteration 3

    def control() -> None:
        try:
            wait_until(lambda: hub.lost, 60, 0.002, "the switch to die")
            # rank 0 has the reduction (its own message is acknowledged by rank 1, which has it too): it finishes
            # the iteration before it learns of the loss
            wait_until(lambda: int((tmp_path / "progress-0").read_text() or 0) >= 4, 30, 0.002, "rank 0")
            write_signal(tmp_path, JOB, PathSignal(1, "s1", "switch-down s1"))
        except BaseException as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=control, daemon=True)
    t.start()
    results = run_job(cfg, tmp_path, hub)
    t.join(timeout=60)
    assert not errors, (errors, [r.get("error") for r in results.values()])
    for r in results.values():
        assert r["ok"], r.get("error")
        assert all(it["correct"] for it in r["iterations"])
    fb = {n: r["fallback"] for n, r in results.items()}
    starts = {f["changes"][0]["from_reduction"] for f in fb.values()}
    assert len(starts) == 1
    start = starts.pop()
    assert start == 3
    assert fb[0]["redone_for_others"] == 1 and fb[0]["by_switch"] == start + 1, fb  # it had the reduction at `start`
    assert fb[2]["redone_for_others"] == fb[3]["redone_for_others"] == 0 and fb[2]["by_switch"] == start
    for f in fb.values():  # the ring ran every reduction from `start` on, on every worker
        assert f["by_ring"] + f["redone_for_others"] == 6 - start


def test_training_with_several_reductions_in_flight_falls_back_and_returns(tmp_path):
    """The training loop (gradswitch/hosts/iteration.py) starts reductions while backward runs, three at a time, codes
    before values (shared exponents): the ones in flight when the switch is lost are abandoned together and redone
    by ring one at a time, in order; every tensor's sum still exact."""
    from dataclasses import replace

    from gradswitch.workload.job import Scheduling
    from tests.inmemory import training, training_job

    workers, iterations = 4, 6
    cfg = replace(training_job("netreduce", workers, iterations=iterations, dtype="float32", float_mode="exponent",
                               scale=0.002, credits=2, rto=0.05),
                  training=training(scheduling=Scheduling.PRIORITY, in_flight=3))
    hub = LosableSwitch(JobLayout(cfg.job_id, workers, 2), [n.ip for n in cfg.nodes], seed=5)
    errors: list[BaseException] = []

    def control() -> None:
        try:
            wait_until(lambda: progress(tmp_path, workers) >= 2, 60, 0.005, "2 iterations")
            hub.lost = True
            write_signal(tmp_path, cfg.job_id, PathSignal(1, "s1", "switch-down s1"))
            wait_until(lambda: all_announced(tmp_path, cfg.job_id, 1, workers), 30, 0.005, "the announcements")
            wait_until(lambda: progress(tmp_path, workers) >= 3, 60, 0.005, "3 iterations")
            hub.restart()
            write_signal(tmp_path, cfg.job_id, PathSignal(2, "s1", "switch-up s1"))
        except BaseException as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=control, daemon=True)
    t.start()
    results = run_job(cfg, tmp_path, hub)
    t.join(timeout=60)
    assert not errors, (errors, [r.get("error") for r in results.values()])
    starts = set()
    for r in results.values():
        assert r["ok"], r.get("error")
        assert len(r["iterations"]) == iterations
        assert all(it["correct"] and it["max_abs_error"] < 1e-7 for it in r["iterations"])
        fb = r["fallback"]
        assert [c["path"] for c in fb["changes"]] == ["ring", "switch"]
        first, back = (c["from_reduction"] for c in fb["changes"])
        starts.add((first, back))
        assert fb["by_ring"] + fb["redone_for_others"] == back - first > 0
        assert fb["by_switch"] + fb["by_ring"] == r["plan"]["ops"] * iterations
    assert len(starts) == 1
