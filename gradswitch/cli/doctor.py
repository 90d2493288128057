"""`gradswitch doctor`: every tool the project uses, its version, and what fails without it; whether the compiled
switch program is present and current, and which backend can run. `--json` prints the same report as JSON."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING

from gradswitch.sim.build import MPI_PREFIX

if TYPE_CHECKING:
    from gradswitch.sim.build import Status

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Ubuntu 22.04's Python 3.10
    import tomli as tomllib

REPORT_FORMAT = 1


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    version: str
    needed_for: str
    required: bool = False  # doctor exits non-zero when a required check fails


@dataclass(frozen=True)
class Tool:
    name: str
    version_args: tuple[str, ...]
    needed_for: str


TOOLS = (
    Tool("p4c-bm2-ss", ("--version",),
         "compiling gradswitch/p4src/ (`make build`); the committed JSON/P4Info still work"),
    Tool("simple_switch_grpc", ("--version",), "every BMv2 switch: trace replay, P4Runtime tests, Mininet networks"),
    Tool("simple_switch", ("--version",), "nothing of ours directly (BMv2 without gRPC); shows BMv2 is installed"),
    Tool("mnexec", ("-v",), "Mininet networks (`gradswitch net`, experiments, end-to-end tests)"),
    Tool("tshark", ("--version",), "decoding our RoCE packets independently of scapy (tests skip without it)"),
    Tool("nft", ("--version",), "Mininet networks: the fence that keeps the switches' Thrift and gRPC ports "
         "to this machine (gradswitch/net/fence.py)"),
    Tool("tc", ("-V",), "link rate shaping (HTB/TBF) in Mininet"),
    Tool("ethtool", ("--version",), "turning NIC offloads off in Mininet (TCP through BMv2 fails without it)"),
    Tool("ip", ("-V",), "Mininet links and namespaces"),
    Tool("ping", ("-V",), "reachability checks (`gradswitch net --pingall`, `make demo`)"),
    Tool("iperf3", ("--version",), "TCP through the fabric in tests, background traffic in DLCP experiments"),
)



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
    from gradswitch.net.bmv2 import resolve_bmv2
    from gradswitch.net.bmv2_executable import Bmv2BuildError

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


def _simulator_state(s: Status, option: str) -> str:
    """The binary, why it cannot run, or (an installed package) that the first run with `option` builds it."""
    missing = s.missing()
    if missing is not None:
        return missing
    if not s.built:
        return f"not built yet: the first run with {option} builds it from the shipped sources into {s.binary.parent}"
    return f"{s.binary} (against {MPI_PREFIX})" if s.mpi else str(s.binary)


def simulator_checks() -> list[Check]:
    """The ns-3 simulator (docs/simulator.md): the wheel it builds against, the built binary (missing, stale or
    ready), and the MPI build against /opt/ns3-mpi where that ns-3 is installed."""
    from gradswitch.sim.build import WHEEL, status

    out = []
    s = status()
    try:
        version = metadata.version("ns3")
        out.append(Check("python:ns3", s.wheel is not None, f"{version} ({s.wheel})" if s.wheel else
                         f"{version}, but no C++ headers in it", "building the ns-3 simulator (`make sim`)"))
    except metadata.PackageNotFoundError:
        out.append(Check("python:ns3", False, f"not installed ({WHEEL})",
                         "building the ns-3 simulator: `make sim` installs it (pip install --no-deps)"))
    out.append(Check("ns-3 simulator", s.missing() is None, _simulator_state(s, "--backend ns3"),
                     "experiments with --backend ns3, bench.crossval, bench.scaling, tests/ns3"))
    if (MPI_PREFIX / "include" / "ns3" / "mpi-interface.h").exists():
        m = status(mpi=True)
        out.append(Check("ns-3 simulator (MPI)", m.missing() is None, _simulator_state(m, "--ranks"),
                         "running one simulation over MPI ranks (--ranks)"))
    else:
        out.append(Check("ns-3 simulator (MPI)", False, f"no ns-3 built with MPI at {MPI_PREFIX}",
                         "running one simulation over MPI ranks (--ranks)"))
    return out


def program_checks() -> list[Check]:
    """The compiled switch program and its P4Info: present, and what its stamp says p4c made of the sources."""
    from gradswitch.cli.p4_compile import BuildError, BuildStamp, stale_reasons
    from gradswitch.protocol.paths import BMV2_JSON, P4INFO

    reasons = stale_reasons()
    try:
        compiler = f"p4c {BuildStamp.read().p4c_version}"
    except BuildError:
        compiler = "no stamp"
    state = f"{BMV2_JSON}, {P4INFO.name} ({compiler}, current with the sources)" if not reasons else " / ".join(reasons)
    return [Check("compiled program", not reasons, state, "every switch (BMv2 loads it; the controller reads its "
                  "P4Info)", required=True)]


def checkout_dependencies() -> list[str]:
    """pyproject.toml's dependencies, for a checkout run without installing it."""
    from gradswitch.protocol.paths import CHECKOUT

    if CHECKOUT is None:
        return []
    deps: list[str] = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["dependencies"]
    return deps


def dependency_checks() -> list[Check]:
    """The installed gradswitch's own dependencies (its metadata's list; pyproject.toml's from a bare checkout)."""
    try:
        requires = [r for r in metadata.requires("gradswitch") or [] if "extra ==" not in r]
    except metadata.PackageNotFoundError:
        requires = checkout_dependencies()
    checks = []
    for requirement in requires:
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        if match is None:
            continue
        name, conditional = match.group(0), ";" in requirement  # a marker: needed on some Pythons only
        try:
            checks.append(Check(f"python:{name}", True, metadata.version(name), "gradswitch itself",
                                required=not conditional))
        except metadata.PackageNotFoundError:
            checks.append(Check(f"python:{name}", conditional, "not installed" if not conditional else
                                "not installed (not needed on this Python)",
                                f"gradswitch itself: pip install '{requirement.split(';')[0].strip()}'",
                                required=not conditional))
    return checks


def run_checks() -> list[Check]:
    checks = program_checks()
    for tool in TOOLS:
        ok, version = _version(tool)
        checks.append(Check(tool.name, ok, version, tool.needed_for))
    checks.append(bmv2_check())
    root = os.geteuid() == 0
    checks.append(Check("root", root, "uid 0" if root else f"uid {os.geteuid()}",
                        "Mininet, namespaces, tc and nftables (tests needing them skip)"))
    checks += dependency_checks()
    checks += simulator_checks()
    return checks


@dataclass(frozen=True)
class Backends:
    """What each backend lacks on this machine ([]: it can run)."""

    bmv2: list[str] = field(default_factory=list)  # gradswitch.net.network.missing_for_networks
    ns3: list[str] = field(default_factory=list)  # gradswitch.sim.build.Status.missing


@dataclass(frozen=True)
class Report:
    """`gradswitch doctor`'s report; `--json` prints it as is (format: REPORT_FORMAT)."""

    format: int
    version: str  # gradswitch.version.code_version()
    checks: list[Check]
    backends: Backends
    ok: bool  # every required check passed and at least one backend can run: doctor's exit status 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def text(self) -> str:
        lines = [report(self.checks)]
        if self.backends.bmv2:
            lines.append(f"BMv2 networks cannot run: missing {', '.join(self.backends.bmv2)}")
        lines += [f"the ns-3 simulator cannot run: {why}" for why in self.backends.ns3]
        return "\n".join(lines)


def doctor() -> Report:
    """Every check, and whether gradswitch can run here."""
    from gradswitch.net.network import missing_for_networks
    from gradswitch.sim.build import status
    from gradswitch.version import code_version

    checks = run_checks()
    sim_missing = status().missing()
    backends = Backends(missing_for_networks(), [sim_missing] if sim_missing else [])
    ok = all(c.ok for c in checks if c.required) and (not backends.bmv2 or not backends.ns3)
    return Report(REPORT_FORMAT, code_version(), checks, backends, ok)


def report(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        mark = "ok  " if c.ok else "MISS"
        needed = "" if c.ok else f"  -> without it: {c.needed_for}"
        lines.append(f"[{mark}] {c.name:<{width}}  {c.version}{needed}")
    missing = [c.name for c in checks if not c.ok]
    required = [c.name for c in checks if c.required and not c.ok]
    lines.append("all present" if not missing else f"missing: {', '.join(missing)}"
                 + (f" (required: {', '.join(required)})" if required else ""))
    return "\n".join(lines)
