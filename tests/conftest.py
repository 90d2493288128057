"""Test requirements: markers that skip (or, when required, fail) where a tool is missing.

Markers: p4c, bmv2, root, mininet, tshark, ns3, ns3_mpi. On a machine without the P4 toolchain the
tests that need it skip with the reason. With GRADSWITCH_REQUIRE_TOOLCHAIN=1 (or
`pytest --require-toolchain`) a missing requirement fails the test instead: `.ci/run`
sets it when the toolchain is installed, so a broken install cannot pass as skips. The ns-3
simulator (`ns3`: the wheel and build/ns3/gradswitch-sim, `make sim`) has its own switch,
GRADSWITCH_REQUIRE_NS3=1, and so has its MPI build (`ns3_mpi`: ns-3 with MPI under /opt/ns3-mpi,
mpirun, build/ns3-mpi/gradswitch-sim from `python -m gradswitch.sim.build --mpi`), GRADSWITCH_REQUIRE_NS3_MPI=1,
and so has the BMv2 without logging macros (`bmv2_nolog`, benchmarks only), GRADSWITCH_REQUIRE_BMV2_NOLOG=1
(`.ci/run` sets it where the shared toolchain, which holds it, is installed). Skips outside markers go through
tests/require.py's `missing`, which honours the same switches (and those for Chakra, torch and perf).

Tests that start BMv2 switches or Mininet networks hold a machine-wide lock while they run:
switches listen on fixed ports and networks name their interfaces after their nodes, so two
test sessions on one machine (two checkouts) would otherwise collide.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import pytest

from gradswitch.net.network import missing_for_networks
from tests.require import missing, required


def _which(tool: str) -> Callable[[], str | None]:
    return lambda: None if shutil.which(tool) else f"{tool} is not on PATH"


BMV2_NOLOG = "/opt/p4/bmv2-nolog/bin/simple_switch_grpc"


def _exists(path: str) -> Callable[[], str | None]:
    return lambda: None if os.access(path, os.X_OK) else f"{path} is not installed"


def _ns3() -> str | None:
    from gradswitch.sim.build import status

    return status().missing()


def _ns3_mpi() -> str | None:
    from gradswitch.sim.build import MPI_PREFIX, status

    if not (MPI_PREFIX / "include" / "ns3" / "mpi-interface.h").exists():
        return f"{MPI_PREFIX} holds no ns-3 built with MPI (docs/simulator.md, section ns-3 with MPI)"
    if shutil.which("mpirun") is None:
        return "mpirun is not on PATH (Open MPI: apt install openmpi-bin libopenmpi-dev)"
    missing = status(mpi=True).missing()
    build = "run `.venv/bin/python -m gradswitch.sim.build --mpi`"
    return missing.replace("run `make sim`", build) if missing else None


def _root() -> str | None:
    return None if os.geteuid() == 0 else "needs root"


def _all(*checks: Callable[[], str | None]) -> Callable[[], str | None]:
    def check() -> str | None:
        missing = [m for c in checks if (m := c())]
        return "; ".join(missing) if missing else None

    return check


REQUIREMENTS: dict[str, Callable[[], str | None]] = {
    "p4c": _which("p4c-bm2-ss"),
    "bmv2": _all(_which("simple_switch_grpc")),
    "root": _root,
    "mininet": lambda: "; ".join(missing_for_networks()) or None,  # what `gradswitch net` checks
    "tshark": _which("tshark"),
    # BMv2 built without logging macros, as the CI's toolchain installs it beside the other
    "bmv2_nolog": _all(_which("simple_switch_grpc"), _exists(BMV2_NOLOG)),
    "ns3": _ns3,
    "ns3_mpi": _ns3_mpi,
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--require-toolchain", action="store_true",
                     help="fail (do not skip) tests whose tools are missing")


def _switch(marker: str) -> str:
    """The key of tests/require.py's SWITCHES that requires what `marker` needs."""
    return marker if marker in ("ns3", "ns3_mpi", "bmv2_nolog") else "toolchain"


def _required(config: pytest.Config, marker: str) -> bool:
    switch = _switch(marker)
    return required(switch, forced=switch == "toolchain" and bool(config.getoption("--require-toolchain")))


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers():
        check = REQUIREMENTS.get(marker.name)
        if check is None:
            continue
        reason = check()
        if reason:
            missing(_switch(marker.name), reason, forced=_required(item.config, marker.name), label=marker.name)


LOCKED_MARKERS = {"bmv2", "bmv2_nolog", "mininet", "root"}


@pytest.fixture(autouse=True)
def _one_switch_user_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    if not any(m.name in LOCKED_MARKERS for m in request.node.iter_markers()):
        yield
        return
    from gradswitch.net.bmv2 import one_switch_user_at_a_time

    with one_switch_user_at_a_time():
        yield


@pytest.fixture(autouse=True)
def _nothing_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a network test, pass or fail, whatever it started under its tmp_path is gone, so a
    failure cannot make the next tests fail on busy ports or interface names."""
    if "tmp_path" not in request.fixturenames or not any(
            m.name in ("mininet", "root") for m in request.node.iter_markers()):
        yield
        return
    tmp_path = request.getfixturevalue("tmp_path")
    yield
    from gradswitch.net.network import STATE_FILE, cleanup_run, kill_switches_under

    for state in tmp_path.rglob(STATE_FILE):  # a network that did not tear down: hosts, veths, fence, switches
        cleanup_run(state.parent)
    kill_switches_under(tmp_path)  # a switch started outside a network (trace replay, tests)
