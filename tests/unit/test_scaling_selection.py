"""bench.scaling runs what was selected but reports the whole study: a run of a few points must not leave
bench/results/scaling.json with only those (it did: a run of one point wrote a study of one run)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bench import scaling


def test_a_selection_runs_its_points_and_reports_the_whole_study(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    reported: list[tuple[Any, ...]] = []
    monkeypatch.setattr(scaling, "run", lambda runs, out, shard: ran.extend(r.label for r in runs))

    def report(*args: Any) -> Path:
        reported.append(args)
        return tmp_path / "scaling.json"

    monkeypatch.setattr(scaling, "report", report)
    monkeypatch.setattr(sys, "argv", ["bench.scaling", "--only", "scaling", "--models", "bert-base",
                                      "--workers", "256", "--algos", "ps", "--out", str(tmp_path)])
    scaling.main()
    assert ran == [scaling.scaling_spec("bert-base", 256, "ps").label]
    assert reported == [(list(scaling.MODELS), list(scaling.WORKERS), list(scaling.ALGOS), tmp_path)]


def test_the_rto_probe_is_the_study_run_with_only_its_smallest_rto_raised(tmp_path: Path) -> None:

    from gradswitch.experiment.placement import job_config, place, topology_for

    (probe,) = scaling.rto_runs()
    default = scaling.scaling_spec(*scaling.RTO_PROBE)
    # six 100 ms queues at 100 Gb/s (gradswitch/net/shaping.py: 0.1 s of the rate)
    assert probe.transport.min_rto_ms == 600.0
    assert probe.but(min_rto_ms=None, name=default.name) == default
    topo = topology_for(default)
    nodes = place(default, topo).jobs[0]
    assert job_config(default, 1, nodes, topo).rto < 0.2 < job_config(probe, 1, nodes, topo).rto == 0.6
    assert scaling.rto_figures(tmp_path) is None  # neither run is there


def test_the_rto_part_runs_only_the_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    monkeypatch.setattr(scaling, "run", lambda runs, out, shard: ran.extend(r.label for r in runs))
    monkeypatch.setattr(scaling, "report", lambda *args: tmp_path / "scaling.json")
    monkeypatch.setattr(sys, "argv", ["bench.scaling", "--only", "rto", "--out", str(tmp_path)])
    scaling.main()
    assert ran == ["vgg16-ps-n512-rto600ms"]
