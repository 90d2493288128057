"""bench.ns3_profile on the built simulator: its categories still name the models' functions (a renamed class
would move its time to `other`, and docs/performance.md's table of where the time goes would be wrong)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bench.ns3_profile import profile
from gradswitch.sim.build import status
from tests.require import missing

pytestmark = pytest.mark.ns3


def perf_works(tmp: Path) -> str | None:
    """Why `perf record` cannot sample here, or None."""
    if shutil.which("perf") is None:
        return "perf is not on PATH (Debian's linux-perf; .ci/run installs it)"
    proc = subprocess.run(["perf", "record", "-q", "-o", str(tmp / "probe.perf"), "--", "true"], capture_output=True,
                          text=True)
    return None if proc.returncode == 0 else f"perf record fails here: {proc.stderr.strip()[:200]}"


def test_the_profile_of_the_speed_scenario_is_the_models_and_ns3s(tmp_path):
    why = perf_works(tmp_path)
    if why is not None:  # fails instead with GRADSWITCH_REQUIRE_PERF=1 (.ci/run, once linux-perf is installed)
        missing("perf", why)
    p = profile(status().binary, "speed", 0, 499, tmp_path)
    assert p.samples > 500, f"only {p.samples} samples in {p.wall_s:.1f} s"
    assert abs(sum(p.categories.values()) - 1.0) < 1e-9
    for needed in ("ns-3 event list", "links and ports: queues, transmission", "hosts: NIC and RC transport",
                   "switches: route, hash, NetReduce", "algorithms and training"):
        assert p.categories.get(needed, 0.0) > 0.0, f"no sample in {needed!r}: {p.categories}"
    assert p.categories.get("other", 0.0) < 0.05, \
        f"{p.categories['other']:.1%} of the time in no category: " + \
        ", ".join(f"{f.symbol} ({f.share:.1%})" for f in p.top if f.category == "other")
