"""gradswitch/sim/instructions.py without the simulator: the counter named in the environment, perf stat's and
callgrind's outputs read, and the count's file (with its `format`) written and read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradswitch.formats import FormatError
from gradswitch.sim import instructions
from gradswitch.sim.instructions import Counter, CounterError, InstructionCount


def test_the_environment_names_the_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(instructions.ENV, raising=False)
    assert instructions.counter_from_env() is None
    monkeypatch.setenv(instructions.ENV, "callgrind")
    assert instructions.counter_from_env() is Counter.CALLGRIND
    monkeypatch.setenv(instructions.ENV, "papi")
    with pytest.raises(CounterError, match=r"GRADSWITCH_SIM_INSTRUCTIONS='papi': give one of perf, callgrind"):
        instructions.counter_from_env()


def test_perf_stats_count_or_why_not(tmp_path: Path) -> None:
    path = tmp_path / instructions.PERF_FILE
    path.write_text("# started on Sun Nov 29\n\n123456789,,instructions:u,2000000,100.00,,\n")
    assert instructions.perf_count(path) == InstructionCount(Counter.PERF, 123456789)
    path.write_text("<not supported>,,instructions:u,0,100.00,,\n")
    count = instructions.perf_count(path)
    assert count.instructions is None and count.why is not None
    assert "<not supported>" in count.why and "hardware performance counters" in count.why
    missing = instructions.perf_count(tmp_path / "none.csv")
    assert missing.why == "perf stat wrote no none.csv (No such file or directory)"


def test_callgrinds_total(tmp_path: Path) -> None:
    path = tmp_path / instructions.CALLGRIND_FILE
    path.write_text("# callgrind format\nversion: 1\nevents: Ir\nfn=(1) main\n5 100\nsummary: 987654321\n"
                    "totals: 987654321\n")
    assert instructions.callgrind_count(path) == InstructionCount(Counter.CALLGRIND, 987654321)
    (tmp_path / f"{instructions.CALLGRIND_FILE}.1").write_text("part: 1\nsummary: 1000\ntotals: 1000\n")
    assert instructions.callgrind_count(path).instructions == 987655321  # a dump during the run split it in two
    path.write_text("events: Ir\n")
    assert instructions.callgrind_count(path).instructions is None


def test_the_count_file_round_trips_and_is_checked(tmp_path: Path) -> None:
    assert instructions.read(tmp_path) is None  # not counted
    for count in (InstructionCount(Counter.CALLGRIND, 42), InstructionCount(Counter.PERF, None, "no counters")):
        instructions.write(tmp_path, count)
        assert instructions.read(tmp_path) == count
    (tmp_path / instructions.FILE).write_text(json.dumps({**count.to_dict(), "format": instructions.FORMAT + 1}))
    with pytest.raises(FormatError):
        instructions.read(tmp_path)
