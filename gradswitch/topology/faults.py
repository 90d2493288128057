"""Failures as an experiment's input, the same for every backend: what fails (a switch, a link, a worker), when
(seconds from the jobs' start), and how (stays down, comes back, flaps, runs slow).

A fault is written in a spec (`faults = [{ kind = "switch-crash", target = "spine1", at_s = 3 }]`), on the command
line (`--fault switch-crash:spine1@3,restart=5`, `--fault switch-hang:spine1@3,release=5`) or in the REPL (`fault
switch-crash:spine1@0`). Targets are the topology's names: a switch (`spine1`), a link as its two ends
(`leaf1-spine1`, either order), a worker as its rank in job 1 (`2`) or its host (`h3`). `fault_problems` says, one
line each, what a list of faults cannot run with on a topology, before anything starts."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from gradswitch.protocol.choice import Choice
from gradswitch.topology.model import Topology


class FaultKind(Choice):
    SWITCH_CRASH = "switch-crash"  # the switch's process killed; restarted (tables pushed again) after restart_s
    SWITCH_HANG = "switch-hang"  # the switch's process stopped (SIGSTOP): it forwards and answers nothing; let go
    # on (SIGCONT) after release_s (None: hung for the rest of the run)
    LINK_DOWN = "link-down"  # both ends of a link down; up again after down_s (None: for the rest of the run)
    LINK_FLAP = "link-flap"  # down for down_s, up for up_s, `flaps` times
    WORKER_CRASH = "worker-crash"  # the worker's process killed
    SLOW_WORKER = "slow-worker"  # its computation stretched by `factor`, or its link's rate cut to rate_mbps


WORKER_FAULTS = (FaultKind.WORKER_CRASH, FaultKind.SLOW_WORKER)
LINK_FAULTS = (FaultKind.LINK_DOWN, FaultKind.LINK_FLAP)
SWITCH_FAULTS = (FaultKind.SWITCH_CRASH, FaultKind.SWITCH_HANG)

# The command line's short option names (KIND:TARGET@SECONDS,key=value,...) and the fields they set.
OPTION_FIELDS = {"restart": "restart_s", "release": "release_s", "down": "down_s", "up": "up_s", "flaps": "flaps",
                 "factor": "factor", "rate": "rate_mbps"}
FAULT_SYNTAX = ("KIND:TARGET@SECONDS[,restart=S][,release=S][,down=S][,up=S][,flaps=N][,factor=X][,rate=MBPS], e.g. "
                "switch-crash:spine1@3,restart=5 or switch-hang:spine1@3,release=5 or "
                "link-flap:leaf1-spine1@2,down=0.5,flaps=3 or slow-worker:2@0,factor=3")


class FaultError(ValueError):
    """A fault that cannot be read or run (one line naming it, what is allowed and what to do)."""


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    target: str
    at_s: float  # seconds after the jobs' start
    restart_s: float | None = None  # switch-crash: restarted this long after the crash (None: stays down)
    release_s: float | None = None  # switch-hang: let go on (SIGCONT) this long after it hung (None: stays hung)
    down_s: float | None = None  # link-down: up again after this long (None: down for good); link-flap: each down
    up_s: float = 1.0  # link-flap: up between two downs
    flaps: int = 3  # link-flap: how many times it goes down
    factor: float = 1.0  # slow-worker: its computation takes this many times as long
    rate_mbps: float | None = None  # slow-worker: its link cut to this rate (None: the link as it is)

    @property
    def label(self) -> str:
        """The fault as the command line writes it."""
        opts = [f"{short}={getattr(self, name):g}" for short, name in OPTION_FIELDS.items()
                if getattr(self, name) != _DEFAULTS[name]]
        return f"{self.kind}:{self.target}@{self.at_s:g}" + "".join(f",{o}" for o in opts)

    def link_ends(self) -> tuple[str, str]:
        """A link fault's two nodes (FaultError when the target is not A-B)."""
        a, sep, b = self.target.partition("-")
        if not sep or not a or not b:
            raise FaultError(f"fault {self.label}: a link is named by its two ends, e.g. leaf1-spine1")
        return a, b

    def windows(self) -> list[tuple[float, float | None]]:
        """When the target is out, as (from, to) seconds after the start (to None: for the rest of the run); a
        slow worker is 'out' (slow) from at_s on."""
        if self.kind == FaultKind.SWITCH_CRASH:
            return [(self.at_s, None if self.restart_s is None else self.at_s + self.restart_s)]
        if self.kind == FaultKind.SWITCH_HANG:
            return [(self.at_s, None if self.release_s is None else self.at_s + self.release_s)]
        if self.kind == FaultKind.LINK_DOWN:
            return [(self.at_s, None if self.down_s is None else self.at_s + self.down_s)]
        if self.kind == FaultKind.LINK_FLAP:
            down = self.flap_down_s
            return [(self.at_s + i * (down + self.up_s), self.at_s + i * (down + self.up_s) + down)
                    for i in range(self.flaps)]
        return [(self.at_s, None)]

    @property
    def flap_down_s(self) -> float:
        return 1.0 if self.down_s is None else self.down_s

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (str(v) if isinstance(v, FaultKind) else v) for f in fields(self)
                if (v := getattr(self, f.name)) != _DEFAULTS.get(f.name, object())}


_DEFAULTS = {f.name: f.default for f in fields(Fault) if f.name not in ("kind", "target", "at_s")}


def _number(text: str, what: str, whole: bool = False) -> float:
    try:
        value = float(text.removesuffix("s")) if not whole else float(int(text))
    except ValueError:
        raise FaultError(f"{what} = {text!r}: {'a whole number' if whole else 'a number'}") from None
    return value


def parse_fault(text: str) -> Fault:
    """A fault from the command line's form (FAULT_SYNTAX); FaultError names what is wrong."""
    head, *options = text.strip().split(",")
    kind_target, at_sep, at = head.rpartition("@")
    kind, sep, target = kind_target.partition(":")
    if not at_sep or not sep or not target:
        raise FaultError(f"--fault {text!r}: write {FAULT_SYNTAX}")
    if kind not in FaultKind.names():
        raise FaultError(f"--fault {text!r}: kind {kind!r} is not one of {', '.join(FaultKind.names())}")
    values: dict[str, Any] = {}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq or key not in OPTION_FIELDS:
            raise FaultError(f"--fault {text!r}: option {option!r} is not one of "
                             f"{', '.join(k + '=' for k in OPTION_FIELDS)}")
        name = OPTION_FIELDS[key]
        number = _number(value, f"--fault {text!r}: {key}", whole=name == "flaps")
        values[name] = int(number) if name == "flaps" else number
    return Fault(FaultKind(kind), target, _number(at, f"--fault {text!r}: the time after @"), **values)


def fault_from_dict(raw: dict[str, Any], where: str = "faults") -> Fault:
    """A fault from a spec's table; FaultError names the key or value at fault."""
    known = [f.name for f in fields(Fault)]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise FaultError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})")
    missing = [k for k in ("kind", "target", "at_s") if k not in raw]
    if missing:
        raise FaultError(f"{where}: give {', '.join(missing)} (e.g. {{ kind = \"switch-crash\", target = "
                         "\"spine1\", at_s = 3 }})")
    kind = raw["kind"]
    if kind not in FaultKind.names():
        raise FaultError(f"{where}.kind = {kind!r}: one of {', '.join(FaultKind.names())}")
    if not isinstance(raw["target"], str | int) or isinstance(raw["target"], bool):
        raise FaultError(f"{where}.target = {raw['target']!r}: a switch, a link A-B, a worker's rank or host")
    values: dict[str, Any] = {}
    for name in known[2:]:
        value = raw.get(name)
        if value is None and (name not in raw or _DEFAULTS.get(name, 0) is None):
            continue
        whole = name == "flaps"
        if isinstance(value, bool) or not isinstance(value, int | float) or (whole and not isinstance(value, int)):
            raise FaultError(f"{where}.{name} = {value!r}: {'a whole number' if whole else 'a number'}")
        values[name] = int(value) if whole else float(value)
    return Fault(FaultKind(kind), str(raw["target"]), **values)


def worker_rank(fault: Fault, topo: Topology, hosts: list[str]) -> int | None:
    """The rank a worker fault names (its number, or the host it runs on: hosts[rank]); None: no such worker."""
    if fault.target.isdigit():
        rank = int(fault.target)
        return rank if rank < len(hosts) else None
    return hosts.index(fault.target) if fault.target in hosts else None


def fault_problems(faults: tuple[Fault, ...], topo: Topology, workers: int) -> list[str]:
    """What each fault cannot run with on this topology and a job of `workers` workers, one line each."""
    out: list[str] = []
    for f in faults:
        name = f"fault {f.label}"
        if not (math.isfinite(f.at_s) and f.at_s >= 0):
            out.append(f"{name}: at {f.at_s} s: a time of 0 or more seconds after the jobs' start")
        if f.kind in SWITCH_FAULTS:
            if not topo.is_switch(f.target):
                out.append(f"{name}: {f.target!r} is not a switch of this topology (its switches: "
                           f"{', '.join(s.name for s in topo.switches)})")
            if f.restart_s is not None and not (math.isfinite(f.restart_s) and f.restart_s > 0):
                out.append(f"{name}: restart={f.restart_s}: seconds above 0 (leave it out: stays down)")
            if f.release_s is not None and not (math.isfinite(f.release_s) and f.release_s > 0):
                out.append(f"{name}: release={f.release_s}: seconds above 0 (leave it out: stays hung)")
        elif f.kind in LINK_FAULTS:
            a, sep, b = f.target.partition("-")
            if not sep or not any({lk.a, lk.b} == {a, b} for lk in topo.links):
                some = ", ".join(f"{lk.a}-{lk.b}" for lk in topo.links[:6])
                out.append(f"{name}: {f.target!r} is not a link of this topology (a link is its two ends, e.g. {some})")
            if f.down_s is not None and not (math.isfinite(f.down_s) and f.down_s > 0):
                out.append(f"{name}: down={f.down_s}: seconds above 0")
            if f.kind == FaultKind.LINK_FLAP and not (f.flaps >= 1 and math.isfinite(f.up_s) and f.up_s > 0):
                out.append(f"{name}: flaps={f.flaps}, up={f.up_s}: at least 1 flap, up for more than 0 s")
        else:
            in_range = f.target.isdigit() and int(f.target) < workers
            if not in_range and not topo.is_host(f.target):
                out.append(f"{name}: {f.target!r} is not a worker: give its rank (0..{workers - 1}) or its host")
        if f.kind == FaultKind.SLOW_WORKER:
            if not (math.isfinite(f.factor) and f.factor >= 1):
                out.append(f"{name}: factor={f.factor}: its computation at least 1 times as long")
            if f.rate_mbps is not None and not (math.isfinite(f.rate_mbps) and f.rate_mbps > 0):
                out.append(f"{name}: rate={f.rate_mbps}: a link rate above 0 Mb/s")
            if f.factor == 1 and f.rate_mbps is None:
                out.append(f"{name}: says neither how slow (factor=X) nor how slow its link (rate=MBPS)")
        for opt, default in _DEFAULTS.items():
            if getattr(f, opt) != default and opt not in _OPTIONS_OF[f.kind]:
                short = next(k for k, v in OPTION_FIELDS.items() if v == opt)
                out.append(f"{name}: {short}= does not apply to {f.kind} (its options: "
                           f"{', '.join(k for k, v in OPTION_FIELDS.items() if v in _OPTIONS_OF[f.kind]) or 'none'})")
    return out


_OPTIONS_OF = {FaultKind.SWITCH_CRASH: {"restart_s"}, FaultKind.SWITCH_HANG: {"release_s"},
               FaultKind.LINK_DOWN: {"down_s"},
               FaultKind.LINK_FLAP: {"down_s", "up_s", "flaps"}, FaultKind.WORKER_CRASH: set(),
               FaultKind.SLOW_WORKER: {"factor", "rate_mbps"}}
