"""The one way a test skips for something missing: through `missing`, which fails instead under the switch that
requires that thing (.ci/run sets them once it installed or built it; tests/conftest.py's markers use it too).

    GRADSWITCH_REQUIRE_TOOLCHAIN  the P4 toolchain, root, Mininet, tshark and the system tools the tests use
                                  (bash, make, ruby, unshare): set by .ci/run where the toolchain is present
    GRADSWITCH_REQUIRE_BMV2_NOLOG the BMv2 built without logging macros, part of the shared toolchain
    GRADSWITCH_REQUIRE_NS3        the ns-3 simulator (`make sim`)
    GRADSWITCH_REQUIRE_NS3_MPI    ns-3 with MPI and the simulator's MPI build
    GRADSWITCH_REQUIRE_CHAKRA     mlc-chakra
    GRADSWITCH_REQUIRE_TORCH      PyTorch
    GRADSWITCH_REQUIRE_PERF       a `perf record` that samples (linux-perf), and valgrind
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

SWITCHES = {
    "toolchain": "GRADSWITCH_REQUIRE_TOOLCHAIN",
    "bmv2_nolog": "GRADSWITCH_REQUIRE_BMV2_NOLOG",
    "ns3": "GRADSWITCH_REQUIRE_NS3",
    "ns3_mpi": "GRADSWITCH_REQUIRE_NS3_MPI",
    "chakra": "GRADSWITCH_REQUIRE_CHAKRA",
    "torch": "GRADSWITCH_REQUIRE_TORCH",
    "perf": "GRADSWITCH_REQUIRE_PERF",
}


def required(what: str, forced: bool = False) -> bool:
    """Whether `what` (a key of SWITCHES) must be there: its switch is 1 (or `forced`, pytest --require-toolchain)."""
    return forced or os.environ.get(SWITCHES[what]) == "1"


def missing(what: str, reason: str, forced: bool = False, label: str | None = None) -> NoReturn:
    """`what` is missing, for `reason`: the test fails when it is required, else skips; either way the message
    starts with [label] (by default [what]) and names the reason."""
    tag = label or what
    if required(what, forced):
        pytest.fail(f"[{tag}] required but missing ({SWITCHES[what]}=1): {reason}", pytrace=False)
    pytest.skip(f"[{tag}] {reason}")


def need_tool(tool: str, install: str, what: str = "toolchain") -> str:
    """The path of `tool` on PATH, or (through `missing`) a skip or failure naming `install`."""
    path = shutil.which(tool)
    if path is None:
        missing(what, f"{tool} is not on PATH ({install})")
    return path
