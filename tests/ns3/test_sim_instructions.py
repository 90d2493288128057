"""The simulator's user-space instructions counted by the product's run (GRADSWITCH_SIM_INSTRUCTIONS,
gradswitch/sim/instructions.py) on the built simulator: callgrind counts the same run the same to within a
thousandth, and more work more; perf stat gives a count where the machine has hardware counters and says why
not where it has none; a counter name that is not one stops the run before it starts, in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gradswitch.sim import instructions
from gradswitch.sim.instructions import Counter
from gradswitch.sim.run import SimError
from gradswitch.topology.generators import rack
from tests.ns3.helpers import run_writes, write_job
from tests.require import missing

pytestmark = pytest.mark.ns3


def count(tmp: Path, name: str, iterations: int) -> instructions.InstructionCount:
    result = run_writes(rack(2, bw_mbps=10_000), [write_job(1, "h1", "h2", [1 << 20], iterations=iterations)],
                        tmp / name)
    assert result["jobs"], "the run reported no job"
    got = instructions.read(tmp / name)
    assert got is not None, "the counted run left no sim-instructions.json"
    return got


def test_callgrind_counts_a_run_repeatably_and_more_work_more(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("valgrind") is None:  # fails instead with GRADSWITCH_REQUIRE_PERF=1 (.ci/run installs it)
        missing("perf", "valgrind is not on PATH (Debian's valgrind)")
    monkeypatch.setenv(instructions.ENV, Counter.CALLGRIND.value)
    first, again, longer = count(tmp_path, "a", 2), count(tmp_path, "b", 2), count(tmp_path, "c", 8)
    assert first.counter is Counter.CALLGRIND and first.why is None
    assert first.instructions is not None and again.instructions is not None and longer.instructions is not None
    assert first.instructions > 10_000_000, f"{first.instructions} instructions: ns-3's set-up alone is more"
    assert abs(again.instructions - first.instructions) <= first.instructions / 1000, (first, again)
    assert longer.instructions > first.instructions * 1.01, (first, longer)  # 6 more 1 MB messages


def test_perf_counts_or_says_why_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("perf") is None:
        missing("perf", "perf is not on PATH (Debian's linux-perf)")
    monkeypatch.setenv(instructions.ENV, Counter.PERF.value)
    got = count(tmp_path, "perf", 2)
    assert got.counter is Counter.PERF
    if got.instructions is None:  # a machine without hardware counters (this project's VM)
        assert got.why is not None and "hardware performance counters" in got.why, got.why
    else:
        assert got.instructions > 10_000_000 and got.why is None


def test_an_unknown_counter_stops_the_run_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(instructions.ENV, "cachegrind")
    with pytest.raises(SimError, match=r"^GRADSWITCH_SIM_INSTRUCTIONS='cachegrind': give one of perf, callgrind"):
        run_writes(rack(2), [write_job(1, "h1", "h2", [4096])], tmp_path / "run")
    assert not (tmp_path / "run").exists()
