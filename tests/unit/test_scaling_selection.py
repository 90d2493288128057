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
