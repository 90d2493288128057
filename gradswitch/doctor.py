"""`gradswitch doctor`: every tool the project uses, its version, and what fails without it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    version: str
    needed_for: str


@dataclass(frozen=True)
class Tool:
    name: str
    version_args: tuple[str, ...]
    needed_for: str


TOOLS = (
    Tool("p4c-bm2-ss", ("--version",), "compiling p4src/ (`make build`); the committed JSON/P4Info still work"),
    Tool("simple_switch_grpc", ("--version",), "every BMv2 switch: trace replay, P4Runtime tests, Mininet networks"),
    Tool("simple_switch", ("--version",), "nothing of ours directly (BMv2 without gRPC); shows BMv2 is installed"),
    Tool("mnexec", ("-v",), "Mininet networks (`gradswitch net`, experiments, end-to-end tests)"),
    Tool("tshark", ("--version",), "decoding our RoCE packets independently of scapy (tests skip without it)"),
    Tool("nft", ("--version",), "Mininet networks: the fence that keeps the switches' Thrift and gRPC ports "
         "to this machine (mininet_topos/fence.py)"),
    Tool("tc", ("-V",), "link rate shaping (HTB/TBF) in Mininet"),
    Tool("ethtool", ("--version",), "turning NIC offloads off in Mininet (TCP through BMv2 fails without it)"),
    Tool("ip", ("-V",), "Mininet links and namespaces"),
    Tool("ping", ("-V",), "reachability checks (`gradswitch net --pingall`, `make demo`)"),
    Tool("iperf3", ("--version",), "TCP through the fabric in tests, background traffic in DLCP experiments"),
)

PYTHON_PACKAGES = ("p4runtime-shell", "p4runtime", "protobuf", "grpcio", "mininet", "scapy", "numpy", "matplotlib")


def _version(tool: Tool) -> tuple[bool, str]:
    path = shutil.which(tool.name)
    if path is None:
        return False, "not found"
    try:
        proc = subprocess.run([path, *tool.version_args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"does not run: {e}"
    text = (proc.stdout + proc.stderr).strip()
    match = re.search(r"\d+\.\d+[\w.\-+~]*", text)
    return True, match.group(0) if match else (text.splitlines()[0] if text else "present")


def tool_version(name: str) -> str:
    """Version of one of TOOLS as doctor reports it ("not found" when absent)."""
    return _version(next(t for t in TOOLS if t.name == name))[1]


def bmv2_check() -> Check:
    """The BMv2 build switches will run (--bmv2, $GRADSWITCH_BMV2 or PATH) and whether it logs per packet."""
    from mininet_topos.bmv2 import resolve_bmv2
    from mininet_topos.bmv2_executable import Bmv2BuildError

    try:
        build = resolve_bmv2()
    except Bmv2BuildError as e:
        return Check("bmv2 build", False, str(e), "every switch")
    if build.logging:
        note = ("logging macros compiled in: every packet pays for its log records whatever -L says "
                "(benchmarks: --bmv2 a build configured with --disable-logging-macros --disable-elogger)")
    else:
        note = "no logging macros: per-packet logs compiled out (fast; -L debug shows no packets)"
    return Check("bmv2 build", True, f"{build.executable} {build.version} (chosen by {build.chosen_by}); {note}",
                 "every switch")


def simulator_checks() -> list[Check]:
    """The ns-3 simulator (docs/simulator.md): the wheel it builds against, the built binary (missing, stale or
    ready), and the MPI build against /opt/ns3-mpi where that ns-3 is installed."""
    from ns3sim.build import MPI_PREFIX, WHEEL, status

    out = []
    s = status()
    try:
        version = metadata.version("ns3")
        out.append(Check("python:ns3", s.wheel is not None, f"{version} ({s.wheel})" if s.wheel else
                         f"{version}, but no C++ headers in it", "building the ns-3 simulator (`make sim`)"))
    except metadata.PackageNotFoundError:
        out.append(Check("python:ns3", False, f"not installed ({WHEEL})",
                         "building the ns-3 simulator: `make sim` installs it (pip install --no-deps)"))
    missing = s.missing()
    out.append(Check("ns-3 simulator", missing is None, str(s.binary) if missing is None else missing,
                     "experiments with --backend ns3, bench.crossval, bench.scaling, tests/ns3"))
    if (MPI_PREFIX / "include" / "ns3" / "mpi-interface.h").exists():
        m = status(mpi=True)
        if not m.built:
            state = f"{m.binary} is not built: run `python -m ns3sim.build --mpi`"
        elif m.stale:
            state = f"{m.binary} is older than {m.stale[0].name}: run `python -m ns3sim.build --mpi`"
        else:
            state = f"{m.binary} (against {MPI_PREFIX})"
        out.append(Check("ns-3 simulator (MPI)", m.built and not m.stale, state,
                         "running one simulation over MPI ranks (--ranks, issue 18)"))
    else:
        out.append(Check("ns-3 simulator (MPI)", False, f"no ns-3 built with MPI at {MPI_PREFIX}",
                         "running one simulation over MPI ranks (--ranks, issue 18)"))
    return out


def run_checks() -> list[Check]:
    checks = []
    for tool in TOOLS:
        ok, version = _version(tool)
        checks.append(Check(tool.name, ok, version, tool.needed_for))
    checks.append(bmv2_check())
    root = os.geteuid() == 0
    checks.append(Check("root", root, "uid 0" if root else f"uid {os.geteuid()}",
                        "Mininet, namespaces, tc and nftables (tests needing them skip)"))
    for pkg in PYTHON_PACKAGES:
        try:
            checks.append(Check(f"python:{pkg}", True, metadata.version(pkg), "the controller and the tests"))
        except metadata.PackageNotFoundError:
            checks.append(Check(f"python:{pkg}", False, "not installed", "the controller and the tests (make venv)"))
    checks += simulator_checks()
    return checks


def report(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        mark = "ok  " if c.ok else "MISS"
        needed = "" if c.ok else f"  -> without it: {c.needed_for}"
        lines.append(f"[{mark}] {c.name:<{width}}  {c.version}{needed}")
    missing = [c.name for c in checks if not c.ok]
    lines.append("all present" if not missing else f"missing: {', '.join(missing)}")
    return "\n".join(lines)
