"""What a run's NetReduce jobs do on the controller's health events (gradswitch/experiment/netreduce_watch.py),
without switches: the job placed as the controller places it (gradswitch.control.netreduce_jobs.place_job), the
control plane's NetReduce part recorded. The same on BMv2: tests/mininet/test_netreduce_fallback.py."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gradswitch.control.health import HealthEvent, HealthKind
from gradswitch.control.netreduce_jobs import ActiveJob, place_job
from gradswitch.experiment.netreduce_watch import RECORDS_FILE, NetReduceWatch, read_records
from gradswitch.hosts.fallback import Announcement, PathSignal, announce, read_signal
from gradswitch.protocol.polling import wait_until
from gradswitch.topology.generators import leafspine, rack
from gradswitch.topology.model import Topology


class FakeJobs:
    def __init__(self, jobs: dict[int, ActiveJob]) -> None:
        self.jobs = jobs
        self.resets: list[int] = []

    def reset_cells(self, job: int) -> list[str]:
        self.resets.append(job)
        return sorted(self.jobs[job].switches)


def watch_of(topo: Topology, tmp_path: Path, workers: int = 4, hosts: list[str] | None = None
             ) -> tuple[NetReduceWatch, FakeJobs, Path]:
    hosts = hosts or [h.name for h in topo.hosts][:workers]
    jobs = FakeJobs({1: place_job(topo, 1, hosts, 2, [])})
    control: Any = SimpleNamespace(netreduce=jobs, fabric=SimpleNamespace(topo=topo))
    watch = NetReduceWatch(control)
    job_dir = tmp_path / "job1"
    job_dir.mkdir()
    watch.add_job(1, workers, job_dir, timeout=5.0)
    return watch, jobs, job_dir


def everyone_announces(job_dir: Path, epoch: int, workers: int = 4) -> None:
    for rank in range(workers):
        announce(job_dir, 1, epoch, rank, Announcement(3, 12))


def test_the_aggregation_spine_down_then_up_signals_ring_then_the_switch(tmp_path):
    watch, jobs, job_dir = watch_of(leafspine(), tmp_path)
    agg = jobs.jobs[1].aggregation_switch
    everyone_announces(job_dir, 1)  # (the workers' side: tests/unit/test_netreduce_fallback.py)
    watch.switch_down(agg, at=1.0)
    assert read_signal(job_dir, 1) == PathSignal(1, agg, f"switch-down {agg}")
    assert jobs.resets == [1]  # the cells freed once every worker announced
    watch.switch_down(agg, at=1.5)  # noticed twice: nothing more
    assert read_signal(job_dir, 1) == PathSignal(1, agg, f"switch-down {agg}") and jobs.resets == [1]
    watch.switch_up(agg, at=2.0)
    assert read_signal(job_dir, 1) == PathSignal(2, agg, f"switch-up {agg}")
    assert jobs.resets == [1, 1]  # cleared again before the return
    down, up = watch.records
    assert (down.path, up.path) == ("ring", "switch") and (down.noticed_at, up.noticed_at) == (1.0, 2.0)
    assert down.cells_cleared_at is not None and up.cells_cleared_at is not None
    assert not (job_dir / "abort").exists()


def test_the_return_waits_for_every_worker_to_have_fallen_back(tmp_path):
    watch, jobs, job_dir = watch_of(leafspine(), tmp_path)
    agg = jobs.jobs[1].aggregation_switch
    watch.jobs[1].timeout = 0.2
    watch.switch_down(agg, at=1.0)  # nobody announces: no cells cleared
    assert jobs.resets == [] and watch.records[0].cells_cleared_at is None
    watch.switch_up(agg, at=2.0)
    assert read_signal(job_dir, 1) == PathSignal(1, agg, f"switch-down {agg}")  # no return signalled
    assert len(watch.records) == 1


def test_a_switch_outside_the_jobs_tree_changes_nothing(tmp_path):
    watch, jobs, job_dir = watch_of(leafspine(), tmp_path)
    other = next(s.name for s in leafspine().switches if s.name not in jobs.jobs[1].switches)
    watch.switch_down(other, at=1.0)
    assert read_signal(job_dir, 1) is None and watch.records == []


def test_a_leaf_down_stops_the_job_naming_its_hosts(tmp_path):
    topo = leafspine()
    watch, jobs, job_dir = watch_of(topo, tmp_path)
    leaf = next(sw for sw, s in jobs.jobs[1].switches.items() if s.role == "leaf")
    hosts = [h.name for h, _ in topo.hosts_of(leaf)]
    watch.switch_down(leaf, at=1.0)
    why = (job_dir / "abort").read_text()
    assert why.startswith(f"NetReduce job 1: switch {leaf} is down and {', '.join(hosts)} are attached to it")
    assert read_signal(job_dir, 1) is None and watch.records[0].path is None


def test_a_racks_only_switch_down_stops_the_job(tmp_path):
    watch, _, job_dir = watch_of(rack(), tmp_path)
    watch.switch_down("s1", at=1.0)
    assert "switch s1 is down and h1, h2, h3, h4 are attached to it" in (job_dir / "abort").read_text()


def test_events_are_handled_on_the_watchs_thread_and_recorded(tmp_path):
    watch, jobs, job_dir = watch_of(leafspine(), tmp_path)
    agg = jobs.jobs[1].aggregation_switch
    everyone_announces(job_dir, 1)
    watch.start()
    try:
        watch.on_health(HealthEvent(HealthKind.REROUTED, agg, time.monotonic()))  # not for the watch
        watch.on_health(HealthEvent(HealthKind.SWITCH_DOWN, agg, time.monotonic()))
        wait_until(lambda: jobs.resets == [1], 10, 0.005, "the fallback's cells cleared")
    finally:
        watch.stop()
    (record,) = read_records(job_dir / RECORDS_FILE)
    assert record["path"] == "ring" and record["switch"] == agg and record["cells_cleared_at"] is not None


def test_a_job_of_two_workers_stops_when_its_spine_dies(tmp_path):
    """Two workers have no ring distinct from their NetReduce connections (gradswitch/hosts/fallback.py): stopped at
    once with the reason, rather than left to its QPs' retries."""
    watch, jobs, job_dir = watch_of(leafspine(), tmp_path, workers=2, hosts=["h1", "h3"])  # one on each leaf
    agg = jobs.jobs[1].aggregation_switch
    assert jobs.jobs[1].switches[agg].role == "spine"
    watch.switch_down(agg, at=1.0)
    assert (job_dir / "abort").read_text() == (
        f"NetReduce job 1: switch {agg} is down and it aggregated the job: a job of 2 workers has no ring to fall "
        "back to (it needs 3: gradswitch/hosts/fallback.py); the job stops")
    assert read_signal(job_dir, 1) is None


def test_a_graphs_reduce_scatter_or_all_gather_job_stops_when_its_spine_dies(tmp_path):
    """A graph's switch job that has no fallback (falls_back = False: its reduce-scatter or all-gather,
    gradswitch/experiment/graph_run.py switch_jobs) is stopped at once with the reason, never signalled."""
    watch, jobs, job_dir = watch_of(leafspine(), tmp_path)
    watch.add_job(1, 4, job_dir, timeout=5.0, falls_back=False)
    agg = jobs.jobs[1].aggregation_switch
    watch.switch_down(agg, at=1.0)
    assert (job_dir / "abort").read_text() == (
        f"NetReduce job 1: switch {agg} is down and it aggregated the job: its reduce-scatter or all-gather has no "
        "fallback to ring; the job stops")
    assert read_signal(job_dir, 1) is None and jobs.resets == []
