"""Starting and stopping one simple_switch_grpc process.

Used by the Mininet switch node (gradswitch/net/nodes.py) and by trace replay
(gradswitch/control/trace_replay.py), so both start BMv2 the same way: `--no-p4` (the controller
pushes the pipeline), its own device id, gRPC and Thrift ports on loopback, CPU port,
`--priority-queues`, a log file and optional pcaps. Readiness is polled with a deadline;
a switch that does not come up raises `SwitchStartError` with the tail of its log; `stop`
kills exactly the pid it started.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gradswitch.net.bmv2_executable import Bmv2Build, Bmv2BuildError, probe
from gradswitch.net.local_ports import ANY_ADDRESS, PortHeldError, wait_port_free
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.polling import wait_until

SIMPLE_SWITCH_GRPC = "simple_switch_grpc"
# Which simple_switch_grpc every switch runs: a path to the executable, or a directory holding it
# (PREFIX or PREFIX/bin of a BMv2 install, e.g. one built without logging macros); unset, PATH's.
# `gradswitch --bmv2 PATH` sets it for the command and everything it starts.
BMV2_ENV = "GRADSWITCH_BMV2"
MACHINE_LOCK = Path("/tmp/gradswitch-switches.lock")
LOCK_HOLDER_ENV = "GRADSWITCH_SWITCH_LOCK_HOLDER"  # set while a process holds MACHINE_LOCK, for its children
GRPC_BASE_PORT = 50051  # switch d listens for P4Runtime on 127.0.0.1:GRPC_BASE_PORT + d
THRIFT_BASE_PORT = 9090  # ... and for Thrift (registers, queues) on THRIFT_BASE_PORT + d
GRPC_ADDRESS = "127.0.0.1"  # gRPC listens on loopback only; Thrift on every address (gradswitch/net/fence.py)


@dataclass(frozen=True)
class SwitchPorts:
    """The management ports of one switch (gRPC for P4Runtime, Thrift for registers and queues)."""

    grpc: int
    thrift: int


def switch_ports(device_id: int, grpc_base: int = GRPC_BASE_PORT, thrift_base: int = THRIFT_BASE_PORT
                 ) -> SwitchPorts:
    """The ports of switch `device_id`: the bases offset by its device id (one switch per id)."""
    return SwitchPorts(grpc_base + device_id, thrift_base + device_id)
LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")


def resolve_bmv2(chosen: str | None = None) -> Bmv2Build:
    """The BMv2 build switches run: `chosen` (a path given on the command line), else $GRADSWITCH_BMV2,
    else the simple_switch_grpc on PATH. A file or a directory holding one (directly or in bin/);
    Bmv2BuildError, one line naming the setting and the path, when it is not a BMv2 switch."""
    value = chosen if chosen is not None else os.environ.get(BMV2_ENV, "")
    if not value:
        found = shutil.which(SIMPLE_SWITCH_GRPC)
        if found is None:
            raise Bmv2BuildError(f"{SIMPLE_SWITCH_GRPC} is not on PATH (see `gradswitch doctor`; or set {BMV2_ENV})")
        return probe(Path(found), "PATH")
    setting = f"{BMV2_ENV}={value}" if chosen is None else f"--bmv2 {value}"
    path = Path(value)
    if path.is_dir():
        inside = [p for p in (path / SIMPLE_SWITCH_GRPC, path / "bin" / SIMPLE_SWITCH_GRPC) if p.is_file()]
        if not inside:
            raise Bmv2BuildError(f"{setting}: no {SIMPLE_SWITCH_GRPC} in {path} or {path / 'bin'}")
        path = inside[0]
    elif not path.exists():
        raise Bmv2BuildError(f"{setting}: {path} does not exist")
    try:
        return probe(path, BMV2_ENV)
    except Bmv2BuildError as e:
        raise Bmv2BuildError(f"{setting}: {e}") from None


def use_bmv2(chosen: str) -> Bmv2Build:
    """`--bmv2 PATH`: check it, then set $GRADSWITCH_BMV2 so this process and every switch it starts run it."""
    build = resolve_bmv2(chosen)
    os.environ[BMV2_ENV] = str(build.executable)
    return build


def default_executable() -> str:
    """Bmv2Config's default: the executable resolve_bmv2 chooses (PATH's name when there is none,
    so that starting a switch says it is missing)."""
    if not os.environ.get(BMV2_ENV) and shutil.which(SIMPLE_SWITCH_GRPC) is None:
        return SIMPLE_SWITCH_GRPC
    return str(resolve_bmv2().executable)


class SwitchStartError(RuntimeError):
    """A BMv2 process did not come up; the message carries its command and log tail."""


@dataclass(frozen=True)
class Bmv2Config:
    name: str
    device_id: int
    grpc_port: int
    thrift_port: int
    ports: Mapping[int, str]  # port number -> interface name (or, with use_files, a pcap path prefix)
    run_dir: Path  # logs, pcaps and IPC sockets of this switch go here
    cpu_port: int = CONFIG.CPU_PORT
    priority_queues: int = CONFIG.PRIORITY_QUEUES
    log_level: str = "info"  # BMv2 -L; "debug" or "trace" to see every packet (much slower)
    pcap: bool = False  # write <iface>_in.pcap / _out.pcap under run_dir/pcap
    use_files: bool = False  # ports are pcap files (<prefix>_in.pcap, <prefix>_out.pcap), no interfaces
    executable: str = field(default_factory=default_executable)
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    launcher: tuple[str, ...] = ()  # a command the switch runs under, e.g. valgrind (bench/instructions.py)

    def __post_init__(self) -> None:
        if self.grpc_port == self.thrift_port:  # the second server's bind fails, and the switch never listens
            raise ValueError(f"{self.name}: gRPC and Thrift ports are both {self.grpc_port}; "
                             "give the switch two different ports")

    @property
    def log_file(self) -> Path:
        """BMv2's log: it appends ".txt" to the --log-file it is given."""
        return self.run_dir / f"{self.name}.txt"

    @property
    def console_file(self) -> Path:
        return self.run_dir / f"{self.name}.out"

    @property
    def pcap_dir(self) -> Path:
        return self.run_dir / "pcap"

    def command(self) -> list[str]:
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"BMv2 log level {self.log_level!r} is not one of {LOG_LEVELS}")
        cmd = [*self.launcher, self.executable, "--no-p4", "--device-id", str(self.device_id),
               "--thrift-port", str(self.thrift_port),
               "--log-file", str(self.run_dir / self.name), "--log-flush", "-L", self.log_level,
               "--notifications-addr", f"ipc://{self.run_dir / (self.name + '-notifications.ipc')}"]
        for port, iface in sorted(self.ports.items()):
            if port == self.cpu_port:
                raise ValueError(f"{self.name}: port {port} is the CPU port")
            cmd += ["-i", f"{port}@{iface}"]
        if self.use_files:
            cmd += ["--use-files", "0"]
        elif self.pcap:
            cmd.append(f"--pcap={self.pcap_dir}")
        cmd += list(self.extra_args)
        cmd += ["--", "--grpc-server-addr", f"{GRPC_ADDRESS}:{self.grpc_port}",
                "--cpu-port", str(self.cpu_port), "--priority-queues", str(self.priority_queues)]
        return cmd


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text[-lines:]) if text else f"({path} is empty)"


class Bmv2Process:
    """One simple_switch_grpc process."""

    def __init__(self, config: Bmv2Config) -> None:
        self.config = config
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float = 30.0) -> None:
        cfg = self.config
        if shutil.which(cfg.executable) is None:
            raise SwitchStartError(f"{cfg.name}: {cfg.executable} is not on PATH (see `gradswitch doctor`)")
        for port, address in ((cfg.grpc_port, GRPC_ADDRESS), (cfg.thrift_port, ANY_ADDRESS)):
            if port_open(port):
                raise SwitchStartError(f"{cfg.name}: port {port} is already in use (a switch left running?)")
            try:  # bound by a connection, not a listener (gradswitch/net/local_ports.py)
                wait_port_free(port, address, cfg.name)
            except PortHeldError as e:
                raise SwitchStartError(str(e)) from None
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        if cfg.pcap:
            cfg.pcap_dir.mkdir(parents=True, exist_ok=True)
        cfg.log_file.unlink(missing_ok=True)
        build = probe(Path(shutil.which(cfg.executable) or cfg.executable), "PATH")
        with cfg.console_file.open("wb") as out:  # its own libraries first (bmv2_build.py)
            self.proc = subprocess.Popen(cfg.command(), stdout=out, stderr=subprocess.STDOUT, env=build.env(),
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_until(self._ready, timeout, interval=0.05,
                       what=f"{cfg.name} to listen on gRPC {cfg.grpc_port} and Thrift {cfg.thrift_port}")
        except TimeoutError as e:
            self.stop()
            raise SwitchStartError(self._failure(str(e))) from None

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise SwitchStartError(self._failure(f"exited with status {self.proc.returncode}"))
        return port_open(self.config.grpc_port) and port_open(self.config.thrift_port)

    def _failure(self, what: str) -> str:
        cfg = self.config
        return (f"BMv2 switch {cfg.name} did not start: {what}\n  command: {' '.join(cfg.command())}\n"
                f"  output ({cfg.console_file}):\n{log_tail(cfg.console_file)}\n"
                f"  log ({cfg.log_file}):\n{log_tail(cfg.log_file)}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop exactly this process: SIGTERM, then SIGKILL after timeout. A process stopped by SIGSTOP (the
        switch-hang fault) is let go on (SIGCONT) after the SIGTERM, so that it acts on it at once."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
            os.kill(proc.pid, signal.SIGCONT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)


def wait_port_closed(port: int, timeout: float = 5.0) -> None:
    wait_until(lambda: not port_open(port), timeout, what=f"port {port} to close")


_held = 0  # how many of this process's blocks hold the machine lock now


def lock_holder() -> str | None:
    """Who holds MACHINE_LOCK now, from the kernel's table of locks: 'pid N (its command)'."""
    try:
        inode = MACHINE_LOCK.stat().st_ino
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()  # 1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF
            if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                pid = fields[4]
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                return f"pid {pid} ({' '.join(a for a in argv if a)[:160]})"
    except OSError:
        pass
    return None


@contextlib.contextmanager
def one_switch_user_at_a_time(wait: bool = True) -> Iterator[None]:
    """Hold the machine-wide lock of BMv2 users (networks, tests, benchmarks) while the block runs.

    Switches listen on fixed ports and networks name their interfaces after their nodes, so two
    users on one machine would collide. With `wait` the second waits (tests, benchmarks);
    without, it gets a SwitchStartError naming who holds the lock (`gradswitch net`). Blocks
    nested in one process share the lock.
    """
    global _held
    if _held or os.environ.get(LOCK_HOLDER_ENV):  # this process, or the parent that started it, holds it
        _held += 1
        try:
            yield
        finally:
            _held -= 1
        return
    with MACHINE_LOCK.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = lock_holder() or "another process"
            raise SwitchStartError(f"this machine's switch ports are in use by {holder}; wait for it to "
                                   "finish or stop it (gradswitch clean removes what a killed one left)") from None
        _held = 1
        os.environ[LOCK_HOLDER_ENV] = str(os.getpid())  # children (the CLI a test starts) share it
        try:
            yield
        finally:
            _held = 0  # the lock goes with the file
            os.environ.pop(LOCK_HOLDER_ENV, None)
