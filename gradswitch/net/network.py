"""Bring a topology up in Mininet with BMv2 switches, check it, tear it down.

`GradNetwork` is a context manager: on leaving it (normally, on an exception, on Ctrl-C
or SIGTERM) every BMv2 process it started is stopped by pid, and every veth and host
namespace is removed. A run that was killed outright (kill -9) leaves a state file behind
that `gradswitch clean` uses to remove what is left. The switches come up empty (`--no-p4`):
programming them is the controller's part (gradswitch/experiment/testbed.py adds it through the
`programmed` and `unprogrammed` hooks).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradswitch.formats import check_format
from gradswitch.net.bmv2 import (
    BMV2_ENV,
    GRPC_BASE_PORT,
    SIMPLE_SWITCH_GRPC,
    THRIFT_BASE_PORT,
    SwitchPorts,
    SwitchStartError,
    one_switch_user_at_a_time,
    resolve_bmv2,
    switch_ports,
)
from gradswitch.net.bmv2_executable import Bmv2Build
from gradswitch.net.exit_signals import ExitSignals
from gradswitch.net.fence import FenceError, ManagementFence, remove_table, table_name
from gradswitch.net.local_ports import EphemeralReservation, format_ports, release_ports
from gradswitch.net.patch_links import Patch, patched_link_class
from gradswitch.net.shaping import shape, shape_priority, switch_send_buffer_bytes
from gradswitch.protocol.paths import runtime_dir
from gradswitch.topology.model import Link, Topology

log = logging.getLogger(__name__)

STATE_FILE = "network.json"
# network.json's `format` (read_state); a state file written before it had one reads as 1
STATE_FORMAT = 1
MININET_LOG_LEVEL = "output"  # mininet.log: the CLI's command output and warnings, not bring-up details


class NetworkError(RuntimeError):
    """The network could not be brought up; says what is missing or what failed."""


@dataclass(frozen=True)
class NetworkOptions:
    run_dir: Path | None = None  # default: <runtime dir>/<topology name>
    log_level: str = "info"  # BMv2 log level ("debug" logs every packet)
    pcap: bool = False  # BMv2 writes per-interface pcaps under run_dir/pcap
    grpc_base: int = GRPC_BASE_PORT
    thrift_base: int = THRIFT_BASE_PORT
    start_timeout: float = 30.0
    mtu: int = 9000  # every link: RoCE MTU 4096 packets need jumbo frames
    # every switch-to-switch link through a patch (gradswitch/net/patch_links.py), which a link fault cuts
    # without touching BMv2's ports; a kernel bridge hop more per packet, so only where a run cuts links
    patch_links: bool = False


# The commands a network runs (Mininet's mnexec; ip, tc and ethtool on interfaces; ping; nft for the fence).
NETWORK_TOOLS = ("mnexec", "ip", "tc", "ethtool", "ping", "nft")


def _patch(lk: Link) -> Patch:
    """The patch of a switch-to-switch link (NetworkOptions.patch_links), named after its two switch ports."""
    return Patch.between(f"{lk.a}-eth{lk.a_port}", f"{lk.b}-eth{lk.b_port}")


def missing_for_networks() -> list[str]:
    """What a Mininet network needs and this machine lacks (root, NETWORK_TOOLS, a BMv2 switch);
    the one list that preflight, `gradswitch doctor` and the tests' requirements use."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (Mininet creates namespaces and veths)")
    missing += [tool for tool in NETWORK_TOOLS if shutil.which(tool) is None]
    if not os.environ.get(BMV2_ENV) and shutil.which(SIMPLE_SWITCH_GRPC) is None:
        missing.append(SIMPLE_SWITCH_GRPC)
    return missing


def preflight() -> None:
    """Raise NetworkError listing what a Mininet run needs and is missing."""
    if os.environ.get(BMV2_ENV):
        resolve_bmv2()  # Bmv2BuildError names the setting and the path
    missing = missing_for_networks()
    if missing:
        raise NetworkError("cannot start a network, missing: " + ", ".join(missing) + " (run `gradswitch doctor`)")


@dataclass
class Reachability:
    hosts: list[str]
    ok: dict[tuple[str, str], bool] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        return all(self.ok.get((a, b), False) for a in self.hosts for b in self.hosts if a != b)

    def table(self) -> str:
        width = max(4, max(len(h) for h in self.hosts)) + 2
        lines = [" " * width + "".join(f"{h:>{width}}" for h in self.hosts)]
        for a in self.hosts:
            cells = []
            for b in self.hosts:
                mark = "-" if a == b else ("ok" if self.ok.get((a, b)) else "FAIL")
                cells.append(f"{mark:>{width}}")
            lines.append(f"{a:<{width}}" + "".join(cells))
        n = len(self.hosts) * (len(self.hosts) - 1)
        good = sum(1 for v in self.ok.values() if v)
        lines.append(f"{good}/{n} host pairs reachable")
        return "\n".join(lines)


WMEM_DEFAULT = Path("/proc/sys/net/core/wmem_default")  # the machine's, whichever namespace writes it


class DefaultSendBuffer:
    """The machine's default socket send buffer, raised while a network's switches start and put back after
    (it is one value for every namespace, written from the root one)."""

    def __init__(self, path: Path = WMEM_DEFAULT) -> None:
        self.path = path
        self.saved: int | None = None

    def raise_to(self, nbytes: int) -> None:
        current = int(self.path.read_text())
        if nbytes > current:
            self.saved = current if self.saved is None else self.saved
            self.path.write_text(str(nbytes))

    def restore(self) -> None:
        if self.saved is not None:
            self.path.write_text(str(self.saved))
            self.saved = None


@dataclass(frozen=True)
class LinkChange:
    """A link taken down or up (set_link): when its interface was set (time.monotonic(), just before: the
    controller may notice before set_link returns), and what else it took, for the run's record."""

    at: float
    note: str | None = None


class GradNetwork:
    """A running Mininet network of BMv2 switches (empty until a controller programs them)."""

    def __init__(self, topo: Topology, options: NetworkOptions | None = None) -> None:
        self.topo = topo
        self.options = options or NetworkOptions()
        self.run_dir = self.options.run_dir or runtime_dir() / topo.name
        self.ports: dict[str, SwitchPorts] = {
            s.name: switch_ports(s.device_id, self.options.grpc_base, self.options.thrift_base) for s in topo.switches}
        self.net: Any = None
        self.bmv2: Bmv2Build | None = None  # the build every switch runs (resolve_bmv2, at start)
        self._exit_signals = ExitSignals()  # SIGTERM and SIGHUP tear the network down (stop)
        self._lock = contextlib.ExitStack()  # the machine lock while the network runs
        self._send_buffer = DefaultSendBuffer()  # raised while the switches start (shaping.switch_send_buffer_bytes)
        # The switches' Thrift and gRPC ports accept connections from this machine only (gradswitch/net/fence.py).
        self.fence = ManagementFence.for_run(self.run_dir, [p for ports in self.ports.values()
                                                            for p in (ports.grpc, ports.thrift)])
        # ... and no connection is given one of them as its local port (gradswitch/net/local_ports.py).
        self.reservation = EphemeralReservation(self.fence.ports)

    # ---- what a controller adds (gradswitch/experiment/testbed.py) ----

    def programmed(self) -> None:
        """Called once the switches run, inside start's clean-up guard: program them here."""

    def unprogrammed(self) -> None:
        """Called first when stopping: close what `programmed` opened."""

    # ---- life cycle ----

    def start(self) -> GradNetwork:
        preflight()
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        from gradswitch.net.nodes import Bmv2Switch, GradHost

        # One network per machine (fixed switch ports, interfaces named after nodes): a second one
        # is refused at once, naming the first, unless this process already holds the machine lock
        # (a test or benchmark that waited for it).
        try:
            self._lock.enter_context(one_switch_user_at_a_time(wait=False))
        except SwitchStartError as e:
            raise NetworkError(str(e)) from None
        try:
            self._start(Mininet, setLogLevel, Bmv2Switch, GradHost)
        except BaseException:
            self._lock.close()
            raise
        return self

    def _start(self, Mininet: Any, setLogLevel: Any, Bmv2Switch: Any, GradHost: Any) -> None:
        cleanup_run(self.run_dir)  # leftovers of an earlier run killed outright
        # Switch ports live in the root namespace: one left by a run killed elsewhere would
        # make Mininet fail with "File exists"; remove it, or say which network still uses it.
        for intf in remove_orphan_interfaces(self.switch_interfaces()):
            log.warning("removed interface %s left behind by an earlier run", intf)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.bmv2 = resolve_bmv2()
        # Mininet's "output" level: its bring-up chatter ("*** Adding hosts", at info) stays quiet, while
        # what its CLI prints for the user (a host command's output, pingall, net) is shown. "warning"
        # would hide both: the `mininet>` prompt of `gradswitch net` then printed nothing at all.
        setLogLevel(MININET_LOG_LEVEL)
        self._exit_signals.install()
        self.net = Mininet(topo=None, build=False, controller=None, host=GradHost, switch=Bmv2Switch,
                           autoSetMacs=False, waitConnected=False)
        try:
            for h in self.topo.hosts:
                self.net.addHost(h.name, ip=f"{h.ip}/{h.prefix_len}", mac=h.mac)
            for s in self.topo.switches:
                ports = self.ports[s.name]
                self.net.addSwitch(s.name, device_id=s.device_id, grpc_port=ports.grpc,
                                   thrift_port=ports.thrift, run_dir=self.run_dir,
                                   log_level=self.options.log_level, pcap=self.options.pcap,
                                   executable=str(self.bmv2.executable))
            patched = patched_link_class(self.options.mtu) if self.options.patch_links else None
            for lk in self.topo.links:
                between_switches = self.topo.is_switch(lk.a) and self.topo.is_switch(lk.b)
                self.net.addLink(lk.a, lk.b, port1=lk.a_port, port2=lk.b_port,
                                 **({"cls": patched} if patched and between_switches else {}))
            self.net.build()
            for node in self.net.hosts + self.net.switches:
                for intf in node.intfList():
                    if intf.name != "lo":
                        node.cmd(f"ip link set dev {intf.name} mtu {self.options.mtu}")
            for lk in self.topo.links:
                if lk.bw_mbps:
                    for name, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
                        # Switch egress: one HTB class per priority the switch writes in the DSCP.
                        shaper = shape_priority if self.topo.is_switch(name) else shape
                        node = self.net.get(name)
                        shaper(node, node.intfs[port].name, lk.bw_mbps)
            self.reservation.reserve()
            self._write_state()
            try:  # before the switches listen: their Thrift servers take every address
                self.fence.add()
            except FenceError as e:
                raise NetworkError(str(e)) from None
            # While the switches open their ports' packet sockets, which take the default send buffer; put back
            # once they listen (their ports are open by then), before any host opens a socket: a host's UDP
            # sender keeps the default's backpressure, as on a real machine.
            self._send_buffer.raise_to(switch_send_buffer_bytes([lk.bw_mbps for lk in self.topo.links if lk.bw_mbps]))
            self.net.start()
            self._send_buffer.restore()
            self._write_state()
            self.programmed()
        except BaseException:
            self.stop()
            raise

    def patches(self) -> list[Patch]:
        """The patches of this network's switch-to-switch links (none unless options.patch_links)."""
        if not self.options.patch_links:
            return []
        return [_patch(lk) for lk in self.topo.links if self.topo.is_switch(lk.a) and self.topo.is_switch(lk.b)]

    def patch_of(self, a: str, b: str) -> Patch | None:
        """The patch of the link between nodes a and b, if it has one."""
        if not self.options.patch_links or not (self.topo.is_switch(a) and self.topo.is_switch(b)):
            return None
        lk = next((lk for lk in self.topo.links if {lk.a, lk.b} == {a, b}), None)
        return None if lk is None else _patch(lk)

    def switch_interfaces(self) -> list[str]:
        """Names of the switch-side interfaces (root namespace) this topology creates."""
        return sorted(f"{node}-eth{port}" for lk in self.topo.links
                      for node, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)) if self.topo.is_switch(node))

    def stop(self) -> None:
        """Tear everything down; safe to call twice and after a failed start."""
        self.unprogrammed()
        if self.net is not None:
            net, self.net = self.net, None
            try:
                net.stop()
            except Exception:  # keep tearing down what is left
                log.exception("mininet stop failed; cleaning up from the state file")
        cleanup_run(self.run_dir)
        self.reservation.release()
        self._send_buffer.restore()
        self._exit_signals.restore()
        self._lock.close()

    def __enter__(self) -> GradNetwork:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def exit_if_signalled(self) -> None:
        """Raise again the SystemExit of a SIGTERM or SIGHUP received while running, in case it was
        lost (gradswitch/net/exit_signals.py): whatever is about to wait for input calls this first."""
        self._exit_signals.exit_if_received()

    # ---- state file (for `gradswitch clean` and `gradswitch repl`) ----

    def _write_state(self) -> None:
        switches = {}
        for s in self.topo.switches:
            node = self.net.get(s.name)
            ports = self.ports[s.name]
            switches[s.name] = {"device_id": s.device_id, "grpc_port": ports.grpc,
                                "thrift_port": ports.thrift, "pid": node.switch_pid}
        state = {
            "format": STATE_FORMAT,
            "topology": self.topo.name,
            "params": self.topo.params,
            "controller_pid": os.getpid(),
            "switches": switches,
            "host_pids": {h.name: self.net.get(h.name).pid for h in self.topo.hosts},
            "interfaces": sorted({intf.name for node in self.net.switches for intf in node.intfList()
                                  if intf.name != "lo"} | {p.bridge for p in self.patches()}),
            "reserved_ports": list(self.reservation.added),
            "run_dir": str(self.run_dir),
            "started": time.time(),
        }
        partial = self.run_dir / f".{STATE_FILE}.partial"  # renamed into place: never read half written
        partial.write_text(json.dumps(state, indent=2))
        partial.replace(self.run_dir / STATE_FILE)

    # ---- use ----

    def host(self, name: str) -> Any:
        return self.net.get(name)

    # ---- failures: a switch's process, a link ----

    def _switch_node(self, name: str) -> Any:
        if self.net is None:
            raise NetworkError("the network is not running")
        if not self.topo.is_switch(name):
            raise NetworkError(f"{name} is not a switch of {self.topo.name} "
                               f"({', '.join(s.name for s in self.topo.switches)})")
        return self.net.get(name)

    def kill_switch(self, name: str) -> int:
        """SIGKILL a switch's BMv2 process (its interfaces stay, as a crashed switch's cables would); its pid."""
        proc = self._switch_node(name).bmv2
        if proc is None or proc.proc is None or not proc.alive():
            raise NetworkError(f"switch {name} is not running")
        pid = int(proc.proc.pid)
        os.kill(pid, signal.SIGKILL)
        proc.proc.wait(timeout=10)  # reaped: nothing of it is left
        return pid

    def start_switch_again(self, name: str) -> int:
        """Start a killed switch's BMv2 process again with the same command line (ports, device id, interfaces,
        gRPC and Thrift ports); returns once it listens (SwitchStartError otherwise), with its new pid. It
        comes up empty, like at the network's start."""
        proc = self._switch_node(name).bmv2
        if proc is None:
            raise NetworkError(f"switch {name} was never started")
        if proc.alive():
            raise NetworkError(f"switch {name} is running (pid {proc.pid}): only a dead switch is started again")
        proc.start(timeout=self.options.start_timeout)
        self._write_state()  # `gradswitch clean` knows its new pid
        return int(proc.pid or 0)

    def link_interfaces(self, a: str, b: str) -> list[tuple[str, str]]:
        """The two ends of the link between nodes a and b: (node, interface name) each."""
        if self.net is None:
            raise NetworkError("the network is not running")
        try:
            ports = self.topo.ports_between(a, b)
        except ValueError as e:  # TopologyError
            raise NetworkError(str(e)) from None
        return [(node, self.net.get(node).intfs[port].name) for node, port in zip((a, b), ports, strict=True)]

    def set_link(self, a: str, b: str, up: bool) -> LinkChange:
        """Both ends of a link down (or up again): `ip link set` in each end's namespace (a switch's ports
        are in the root namespace, a host's in its own)."""
        began = time.monotonic()
        for node, intf in self.link_interfaces(a, b):
            self.set_interface(node, intf, up, f"link {a}-{b}")
        return LinkChange(began)

    def set_interface(self, node: str, intf: str, up: bool, what: str) -> None:
        """One interface down (or up): its peer loses (or regains) its carrier. `what` names it in an error."""
        state = "up" if up else "down"
        if self.net is None:
            raise NetworkError("the network is not running")
        if self.topo.is_switch(node):
            result = subprocess.run(["ip", "link", "set", "dev", intf, state], capture_output=True, text=True)
            error = result.stderr.strip() if result.returncode else ""
        else:
            error = self.net.get(node).cmd(f"ip link set dev {intf} {state} 2>&1 || echo failed").strip()
        if error:
            raise NetworkError(f"{what}: setting {node}'s {intf} {state} failed: {error}")

    def ping(self, src: str, dst: str, count: int = 1, timeout_s: int = 2) -> bool:
        ip = self.topo.host(dst).ip
        out = self.host(src).cmd(f"ping -n -q -c {count} -W {timeout_s} {ip}")
        return " 0% packet loss" in out

    def pingall(self, hosts: Sequence[str] | None = None, attempts: int = 2) -> Reachability:
        """Ping every ordered pair of hosts (in parallel from each source); retry failures."""
        names = list(hosts) if hosts is not None else [h.name for h in self.topo.hosts]
        result = Reachability(names)
        todo = [(a, b) for a in names for b in names if a != b]
        for _ in range(attempts):
            by_src: dict[str, list[str]] = {}
            for a, b in todo:
                by_src.setdefault(a, []).append(b)
            for src, dsts in by_src.items():
                ips = " ".join(self.topo.host(d).ip for d in dsts)
                out = self.host(src).cmd(
                    f"for ip in {ips}; do (ping -n -q -c 1 -W 2 $ip >/dev/null 2>&1 && echo OK $ip || echo NO $ip) & "
                    "done; wait")
                good = {line.split()[1] for line in out.splitlines() if line.startswith("OK ")}
                for d in dsts:
                    result.ok[(src, d)] = self.topo.host(d).ip in good
            todo = [pair for pair in todo if not result.ok[pair]]
            if not todo:
                break
        return result


# ---- cleanup of leftovers ----


def _argv(pid: int | str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _pid_cmdline(pid: int) -> str:
    return " ".join(_argv(pid))


SWITCH_BINARIES = ("simple_switch_grpc", "simple_switch")
PORT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*-eth[0-9]+$")  # Mininet's <node>-eth<port>


def switch_processes() -> dict[int, list[str]]:
    """Running BMv2 processes: pid -> argv."""
    found: dict[int, list[str]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and (argv := _argv(proc.name)) and Path(argv[0]).name in SWITCH_BINARIES:
            found[int(proc.name)] = argv
    return found


def live_switch_interfaces() -> dict[str, int]:
    """Interfaces that running BMv2 processes were given (`-i PORT@INTF`), with their pids."""
    used: dict[str, int] = {}
    for pid, argv in switch_processes().items():
        for flag, value in itertools.pairwise(argv):
            if flag in ("-i", "--interface") and "@" in value:
                used[value.split("@", 1)[1]] = pid
    return used


def _is_veth(intf: str) -> bool:
    base = Path("/sys/class/net") / intf
    try:  # a veth's peer index (iflink) differs from its own; physical and loopback ones match
        return (base / "iflink").read_text().strip() != (base / "ifindex").read_text().strip()
    except OSError:
        return False


def _veth_peer(intf: str) -> str | None:
    """The other end of a veth when it is in this namespace too (two switches' ports)."""
    try:
        iflink = (Path("/sys/class/net") / intf / "iflink").read_text().strip()
        for other in Path("/sys/class/net").iterdir():
            if (other / "ifindex").read_text().strip() == iflink:
                return other.name
    except OSError:
        pass
    return None


def remove_orphan_interfaces(names: Sequence[str] | None = None) -> list[str]:
    """Delete root-namespace veths named like switch ports that no running BMv2 uses.

    `names` limits the check to those interfaces (a topology about to come up); without it
    every `<node>-eth<N>` veth is checked (`gradswitch clean`). An interface a running switch
    uses is never touched: with `names` given, it is an error naming that switch's pid.
    """
    candidates = names if names is not None else sorted(
        p.name for p in Path("/sys/class/net").iterdir() if PORT_NAME.match(p.name))
    present = [n for n in candidates if (Path("/sys/class/net") / n).exists() and _is_veth(n)]
    if not present:
        return []
    live = live_switch_interfaces()
    busy: dict[str, int] = {}
    for n in present:  # deleting either end of a veth deletes both: a pair is busy if one end is
        peer = _veth_peer(n)
        for end in (n, peer):
            if end in live:
                busy[n] = live[end]
    if busy and names is not None:
        owners = ", ".join(f"{n} (simple_switch pid {pid})" for n, pid in sorted(busy.items()))
        raise NetworkError(f"another network is running on these interfaces: {owners}; "
                           "stop it first (Ctrl-C in its terminal, or `gradswitch clean` once it is dead)")
    removed = []
    for intf in present:
        if intf not in busy and (Path("/sys/class/net") / intf).exists():  # its peer may have gone with it
            subprocess.run(["ip", "link", "del", intf], check=False, capture_output=True)
            removed.append(intf)
    return removed


def kill_switches_under(directory: Path) -> list[int]:
    """SIGKILL every BMv2 process with a path (log, socket) under `directory`; their pids."""
    inside = f"{directory}/"
    killed = []
    for pid, argv in switch_processes().items():
        if any(arg.startswith(inside) for arg in argv):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def read_state(path: Path) -> dict[str, Any]:
    """A network's state file (FormatError: of another format than STATE_FORMAT; OSError, JSONDecodeError: none,
    or not JSON)."""
    return check_format(json.loads(path.read_text()), path, "network's state", STATE_FORMAT, missing_is=1)


def cleanup_run(run_dir: Path) -> list[str]:
    """Remove what a run left behind: its switches (found by their paths under run_dir, recorded or
    not), and the hosts, interfaces and fence its state file records; returns what was removed."""
    state_path = run_dir / STATE_FILE
    removed: list[str] = []
    try:
        state = read_state(state_path)
    except (OSError, json.JSONDecodeError):
        state = {}  # none, or cut short: the switches are still found by their paths below
    controller = state.get("controller_pid")
    if controller and controller != os.getpid() and "python" in _pid_cmdline(controller):
        raise NetworkError(f"a network from {run_dir} is still running (controller pid {controller}); "
                           "stop it first (Ctrl-C in its terminal)")
    # Exactly this run's switches: their log and socket paths lie under run_dir. That also
    # finds a switch whose pid was never recorded (Ctrl-C arrived inside Popen).
    names = {sw.get("pid"): name for name, sw in state.get("switches", {}).items()}
    removed += [f"switch {names[pid]} (pid {pid})" if pid in names else f"switch pid {pid} (not recorded)"
                for pid in kill_switches_under(run_dir)]
    for name, pid in state.get("host_pids", {}).items():
        if pid and "mininet:" in _pid_cmdline(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            removed.append(f"host {name} (pid {pid})")
    for intf in state.get("interfaces", []):
        if Path(f"/sys/class/net/{intf}").exists():
            subprocess.run(["ip", "link", "del", intf], check=False, capture_output=True)
            removed.append(f"interface {intf}")
    removed += _remove_fence(run_dir)
    released = release_ports(state.get("reserved_ports", []))
    if released:
        removed.append(f"reserved ports {format_ports(released)} (switch ports kept from the ephemeral range)")
    state_path.unlink(missing_ok=True)
    return removed


def _remove_fence(run_dir: Path) -> list[str]:
    """The run's nftables fence (named after its run directory), once its switches are gone."""
    if shutil.which("nft") is None:
        return []
    table = table_name(run_dir)
    return [f"nftables table {table} (management-port fence)"] if remove_table(table) else []
