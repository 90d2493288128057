"""SIGTERM and SIGHUP end a running network, whatever its main thread is doing.

Python runs a signal handler in the main thread, between two bytecodes. Two things can keep
that from happening, and did (a `kill` left `gradswitch net` waiting at its prompt, about one
time in ten when sent just as the prompt came up):

- The signal reaches the process just before the main thread blocks in read() on the prompt's
  standard input, after the last check for signals (or it is handed to another thread, gRPC's
  or the control socket's, while the main thread sits in read()). Nothing interrupts the read:
  the handler waits for the next line of input.
- The handler's SystemExit is raised inside C code that swallows it: the compiler, when the
  signal arrives while a module being imported is compiled.

`ExitSignals` closes both. The C-level handler writes each signal's number to a wakeup pipe; a
relay thread reading it sends the signal again to the main thread (pthread_kill), which
interrupts a blocking call, until the handler has run. The handler records the signal and
raises SystemExit(128 + signum) once: the signal it relayed, or a second SIGTERM, does not
interrupt the tear-down it started (SIGKILL does; `gradswitch clean` removes what is left).
Whatever is about to wait for input calls `exit_if_received` first, which raises the
SystemExit again if it was lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
RELAY_RETRY_S = 0.1  # how long the relay waits for the handler before sending the signal again


class ExitSignals:
    """SIGTERM and SIGHUP raise SystemExit(128 + signum) in the main thread, reliably.

    `install` from the main thread (elsewhere it does nothing: only the main thread may set
    handlers); `restore` puts back the handlers and wakeup descriptor it found.
    """

    def __init__(self) -> None:
        self.received: int | None = None  # the first SIGTERM or SIGHUP since install
        self._handled = threading.Event()
        self._closing = False
        self._old_handlers: dict[int, Any] = {}
        self._old_wakeup_fd = -1
        self._pipe: tuple[int, int] | None = None
        self._relay: threading.Thread | None = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self._pipe is not None:
            return
        self.received = None
        self._handled.clear()
        self._closing = False
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # the C handler must never block
        self._pipe = (read_fd, write_fd)
        for sig in SIGNALS:
            self._old_handlers[sig] = signal.signal(sig, self._handle)
        self._old_wakeup_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._relay = threading.Thread(target=self._run_relay, args=(read_fd, threading.main_thread().ident),
                                       name="exit-signal-relay", daemon=True)
        self._relay.start()

    def restore(self) -> None:
        if self._pipe is None or threading.current_thread() is not threading.main_thread():
            return  # (elsewhere the wakeup descriptor cannot be reset: it stays, and so do the handlers)
        read_fd, write_fd = self._pipe
        signal.set_wakeup_fd(self._old_wakeup_fd)
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers = {}
        self._closing = True
        with contextlib.suppress(BlockingIOError):
            os.write(write_fd, b"\0")  # wakes the relay, which sees _closing and returns
        if self._relay is not None:
            self._relay.join(timeout=5)
        self._relay = None
        os.close(read_fd)
        os.close(write_fd)
        self._pipe = None

    def exit_if_received(self) -> None:
        """Raise the SystemExit of a signal already received (in case C code swallowed it)."""
        if self.received is not None:
            raise SystemExit(128 + self.received)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            return  # relayed, or a second signal: the tear-down under way goes on
        self.received = signum
        self._handled.set()
        raise SystemExit(128 + signum)

    def _run_relay(self, read_fd: int, main_ident: int | None) -> None:
        while not self._closing:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            pending = {b for b in data if b in SIGNALS}
            for signum in sorted(pending):
                # Until the handler runs: it runs once the main thread executes bytecode again.
                while not self._closing and not self._handled.is_set() and main_ident is not None:
                    with contextlib.suppress(OSError):  # the main thread has gone: nothing to wake
                        signal.pthread_kill(main_ident, signum)
                    self._handled.wait(RELAY_RETRY_S)
