"""Switch-port veths left by a run killed outright are removed; those a live switch uses are not.

A run whose state file is gone (its temporary directory deleted, the machine's session cut)
used to leave `leaf1-eth4@spine1-eth1` in the root namespace, and the next leaf-spine
bring-up failed with Mininet's "RTNETLINK answers: File exists".
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gradswitch.net.network import NetworkError, live_switch_interfaces, remove_orphan_interfaces
from gradswitch.protocol.polling import wait_until

pytestmark = [pytest.mark.root, pytest.mark.bmv2]

A, B = "gsorph9-eth1", "gsorph9-eth2"  # names no topology uses


def _exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


@pytest.fixture
def veth() -> Iterator[None]:
    subprocess.run(["ip", "link", "add", A, "type", "veth", "peer", "name", B], check=True)
    yield
    subprocess.run(["ip", "link", "del", A], check=False, capture_output=True)


def test_an_orphan_veth_is_removed(veth: None) -> None:
    assert remove_orphan_interfaces([A, "gsorph9-eth7"]) == [A]  # the absent one is no error
    assert not _exists(A) and not _exists(B)


def test_clean_finds_orphans_by_name(veth: None) -> None:
    removed = remove_orphan_interfaces()
    assert A in removed or B in removed
    assert not _exists(A) and not _exists(B)


def test_an_interface_a_live_switch_uses_is_kept(veth: None, tmp_path: Path) -> None:
    switch = subprocess.Popen(["simple_switch", "--no-p4", "-i", f"1@{A}", "--thrift-port", "19391",
                               "--log-file", str(tmp_path / "sw")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        def listed() -> bool:
            assert switch.poll() is None, "simple_switch exited"
            return A in live_switch_interfaces()

        wait_until(listed, 10, what="simple_switch to show up in /proc")
        assert live_switch_interfaces()[A] == switch.pid
        with pytest.raises(NetworkError, match=rf"{A} \(simple_switch pid {switch.pid}\)"):
            remove_orphan_interfaces([A])
        assert A not in remove_orphan_interfaces()  # clean leaves it alone
        assert _exists(A)
    finally:
        switch.kill()
        switch.wait()


def test_a_switch_started_but_not_recorded_is_stopped_by_cleanup(tmp_path: Path) -> None:
    """Ctrl-C inside Popen leaves a switch whose pid nobody recorded; its paths name the run."""
    from gradswitch.net.bmv2 import port_open
    from gradswitch.net.local_ports import free_ports
    from gradswitch.net.network import STATE_FILE, cleanup_run
    from gradswitch.protocol.polling import wait_until

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "run2").mkdir()  # another run's directory, whose name starts like ours
    (run_dir / STATE_FILE).write_text('{"switches": {"s1": {"pid": null}}}')
    ports = dict(zip((91, 92), free_ports(2), strict=True))

    def switch(device: int, log_dir: Path) -> subprocess.Popen[bytes]:
        """A simple_switch of its own device id, Thrift port and notification socket (two with the
        defaults share /tmp/bmv2-0-notifications.ipc, and the second exits at once)."""
        return subprocess.Popen(["simple_switch", "--no-p4", "--device-id", str(device),
                                 "--thrift-port", str(ports[device]), "--log-file", str(log_dir / "s1"),
                                 "--notifications-addr", f"ipc://{tmp_path}/notifications-{device}.ipc"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    other = switch(91, tmp_path / "run2")
    ours = switch(92, run_dir)
    try:
        def listening_or_exited() -> bool:  # one that exited would fail the test for another reason
            exited = ours.poll() is not None or other.poll() is not None
            return exited or all(port_open(p) for p in ports.values())

        wait_until(listening_or_exited, 10, what="both switches to listen")
        assert (ours.poll(), other.poll()) == (None, None), (ours.returncode, other.returncode)
        assert "switch pid" in " ".join(cleanup_run(run_dir))
        assert ours.wait(timeout=10) == -9
        assert other.poll() is None  # a run directory that only shares a prefix is not ours
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()
