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

from mininet_topos.network import NetworkError, live_switch_interfaces, remove_orphan_interfaces
from protocol.polling import wait_until

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
    from mininet_topos.network import STATE_FILE, cleanup_run, switch_processes
    from protocol.polling import wait_until

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / STATE_FILE).write_text('{"switches": {"s1": {"pid": null}}}')
    other = subprocess.Popen(["simple_switch", "--no-p4", "--thrift-port", "19393",
                              "--log-file", str(tmp_path / "run2" / "s1")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ours = subprocess.Popen(["simple_switch", "--no-p4", "--thrift-port", "19392", "--log-file", str(run_dir / "s1")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Both are running switches before the cleanup looks (a switch that exited at once, e.g. on
        # a port in use, would make the assertion below fail for another reason).
        def running_or_exited() -> bool:
            exited = ours.poll() is not None or other.poll() is not None
            return exited or {ours.pid, other.pid} <= set(switch_processes())

        wait_until(running_or_exited, 10, what="both switches to run")
        assert (ours.poll(), other.poll()) == (None, None), (ours.returncode, other.returncode)
        assert "switch pid" in " ".join(cleanup_run(run_dir))
        assert ours.wait(timeout=10) == -9
        assert other.poll() is None  # a run directory that only shares a prefix is not ours
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()
