"""ExitSignals: a SIGTERM ends a blocked main thread, wherever the kernel delivered it, and a lost
SystemExit is raised again (gradswitch/net/exit_signals.py)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gradswitch.net.exit_signals import ExitSignals
from gradswitch.protocol.polling import wait_until

WATCHDOG_S = 10.0  # a test that would hang fails instead: the blocked read is fed after this long


@pytest.fixture
def exit_signals() -> Iterator[ExitSignals]:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    signals = ExitSignals()
    signals.install()
    try:
        yield signals
    finally:
        signals.restore()
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert signal.set_wakeup_fd(-1) == -1  # the wakeup descriptor was put back too


def blocked_in_read(tid: int, fd: int) -> bool:
    """Whether thread `tid` of this process sits in the read() system call on `fd` (x86-64: call 0)."""
    fields = Path(f"/proc/self/task/{tid}/syscall").read_text().split()
    return len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == fd


def test_a_signal_another_thread_received_interrupts_the_main_threads_read(exit_signals: ExitSignals) -> None:
    read_fd, write_fd = os.pipe()
    fed = threading.Event()

    def feed() -> None:
        fed.set()
        os.write(write_fd, b"watchdog\n")

    watchdog = threading.Timer(WATCHDOG_S, feed)
    main_tid = threading.get_native_id()

    def send() -> None:
        # The kernel hands a process-directed signal to any thread: here one that signals itself once
        # the main thread sits in read(). Its C-level handler runs here; nothing interrupts the read.
        wait_until(lambda: blocked_in_read(main_tid, read_fd), WATCHDOG_S / 2, what="the main thread to block in read")
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    sender = threading.Thread(target=send)
    watchdog.start()
    try:
        with pytest.raises(SystemExit) as exited:
            sender.start()
            data = os.read(read_fd, 64)
            pytest.fail(f"the read returned {data!r}: the signal never reached the main thread")
        assert not fed.is_set(), "the read ended only when the watchdog fed it: the signal never reached it"
        assert exited.value.code == 128 + signal.SIGTERM
        assert exit_signals.received == signal.SIGTERM
    finally:
        watchdog.cancel()
        sender.join()
        os.close(read_fd)
        os.close(write_fd)


def test_a_swallowed_exit_is_raised_again_and_a_second_signal_does_not_interrupt(
        exit_signals: ExitSignals) -> None:
    exit_signals.exit_if_received()  # nothing received yet: returns
    try:
        signal.raise_signal(signal.SIGHUP)
    except SystemExit as e:  # as C code (the compiler during an import) may do
        assert e.code == 128 + signal.SIGHUP
    else:
        pytest.fail("SIGHUP raised no SystemExit")
    signal.raise_signal(signal.SIGTERM)  # during the tear-down: ignored
    with pytest.raises(SystemExit) as exited:
        exit_signals.exit_if_received()
    assert exited.value.code == 128 + signal.SIGHUP


def test_install_elsewhere_than_the_main_thread_changes_nothing() -> None:
    before = signal.getsignal(signal.SIGTERM)
    signals = ExitSignals()
    worker = threading.Thread(target=signals.install)
    worker.start()
    worker.join()
    assert signal.getsignal(signal.SIGTERM) is before
    signals.restore()
