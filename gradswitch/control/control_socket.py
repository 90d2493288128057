"""The control socket of a running network: how `gradswitch repl` reaches the controller.

The process that brought the network up holds the only primary P4Runtime session of every
switch. Rather than opening sessions of its own (and fighting over primary), a REPL in
another terminal calls that process's `ControlPlane` (its fabric, NetReduce jobs, DLCP
settings and load balancing) through a Unix socket
(<run dir>/control.sock, mode 0600, with a random key in control.key), using the standard
library's multiprocessing managers: every REPL write is carried out by the controller's
primary session, and errors come back as the same exceptions.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Callable
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any

from gradswitch.control.control_plane import ControlPlane

SOCKET_NAME = "control.sock"
KEY_NAME = "control.key"


class ControlSocketError(RuntimeError):
    """No running controller to attach to, or it refused the connection."""


class _ServerManager(BaseManager):
    pass


class _ClientManager(BaseManager):
    pass


PARTS = ("fabric", "netreduce", "dlcp", "balancing")  # the fields of ControlPlane, one proxy each
FAULTS = "faults"  # the network's fault injector (the REPL's `fault`), where the process serving it has one
for _part in (*PARTS, FAULTS):
    _ClientManager.register(_part)


class FaultInjector:
    """What the control socket serves as `faults`: fire(text) fires a fault (its command line form) on the
    network and says what it did (gradswitch.experiment.fault_schedule.injector: this layer only carries it)."""

    def __init__(self, inject: Callable[[str], str]) -> None:
        self._inject = inject

    def fire(self, text: str) -> str:
        return self._inject(text)


class ControlServer:
    """Serves one ControlPlane on <run_dir>/control.sock until closed."""

    def __init__(self, control: ControlPlane, run_dir: Path, inject: Callable[[str], str] | None = None) -> None:
        self.socket_path = run_dir / SOCKET_NAME
        self.key_path = run_dir / KEY_NAME
        self.socket_path.unlink(missing_ok=True)
        key = secrets.token_bytes(32)
        self.key_path.write_bytes(b"")
        os.chmod(self.key_path, 0o600)
        self.key_path.write_bytes(key)
        manager_cls: type[BaseManager] = type("ControlManager", (_ServerManager,), {})
        for part in PARTS:
            manager_cls.register(part, callable=lambda part=part: getattr(control, part))
        if inject is not None:
            injector = FaultInjector(inject)
            manager_cls.register(FAULTS, callable=lambda: injector)
        self._manager = manager_cls(address=str(self.socket_path), authkey=key)
        self._server = self._manager.get_server()
        os.chmod(self.socket_path, 0o600)
        self._thread = threading.Thread(target=self._serve, name="control-socket", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(SystemExit):
            self._server.serve_forever()

    def close(self) -> None:
        stop = getattr(self._server, "stop_event", None)
        if stop is not None:
            stop.set()
        listener = getattr(self._server, "listener", None)
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.close()
        self._thread.join(timeout=3)
        self.socket_path.unlink(missing_ok=True)
        self.key_path.unlink(missing_ok=True)

    def __enter__(self) -> ControlServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def attach(run_dir: Path) -> ControlPlane:
    """The running controller's ControlPlane, its parts proxies (same methods, executed there)."""
    socket_path = run_dir / SOCKET_NAME
    key_path = run_dir / KEY_NAME
    if not socket_path.exists() or not key_path.exists():
        raise ControlSocketError(f"no running network in {run_dir} (no {SOCKET_NAME}); start one with `gradswitch net`")
    try:
        key = key_path.read_bytes()
    except PermissionError:
        raise ControlSocketError(f"{key_path} is readable by its owner only (the user who started the network): "
                                 "run `gradswitch repl` as that user (sudo)") from None
    manager = _ClientManager(address=str(socket_path), authkey=key)
    try:
        manager.connect()
    except (OSError, EOFError) as e:
        raise ControlSocketError(f"cannot reach the controller at {socket_path}: {e}") from None
    proxies: dict[str, Any] = {part: getattr(manager, part)() for part in PARTS}
    return ControlPlane(**proxies)


def attach_faults(run_dir: Path) -> Callable[[str], str] | None:
    """The running network's fault injector through its control socket (None: the process that serves it has
    none); a bad fault comes back as the same exception, FaultError, one line."""
    manager = _ClientManager(address=str(run_dir / SOCKET_NAME), authkey=(run_dir / KEY_NAME).read_bytes())
    manager.connect()
    try:
        faults: Any = getattr(manager, FAULTS)()
    except Exception:  # the server registered no injector (a network started without one)
        return None
    return lambda text: str(faults.fire(text))
