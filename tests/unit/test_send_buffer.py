"""The switches' packet sockets get a send buffer their HTB tree cannot fill (gradswitch/net/shaping.py,
network.py): a full one made BMv2 block and hold every packet of the port in its FIFO, whatever its class."""

from __future__ import annotations

from pathlib import Path

from gradswitch.net.network import DefaultSendBuffer
from gradswitch.net.shaping import MAX_SEND_BUFFER_BYTES, PRIORITY_CLASSES, switch_send_buffer_bytes
from gradswitch.protocol.queues import buffer_bytes

DEFAULT = 212992  # Debian's net.core.wmem_default


def test_the_buffer_holds_every_class_of_the_fastest_link_with_room_for_small_packets():
    need = switch_send_buffer_bytes([5.0, 20.0])
    assert need == switch_send_buffer_bytes([20.0]) >= 3 * PRIORITY_CLASSES * buffer_bytes(20.0)
    assert need > buffer_bytes(20.0) > DEFAULT  # one full class at 20 Mb/s (250 KB) filled the default
    assert switch_send_buffer_bytes([]) == 0  # nothing shaped: nothing queues in HTB
    assert switch_send_buffer_bytes([10_000.0]) == MAX_SEND_BUFFER_BYTES


def test_the_default_is_raised_while_a_network_runs_and_put_back(tmp_path: Path):
    path = tmp_path / "wmem_default"
    path.write_text(f"{DEFAULT}\n")
    buf = DefaultSendBuffer(path)
    buf.raise_to(4_000_000)
    assert int(path.read_text()) == 4_000_000
    buf.raise_to(1_000)  # never lowered
    assert int(path.read_text()) == 4_000_000
    buf.restore()
    assert int(path.read_text()) == DEFAULT
    buf.restore()  # twice: nothing more
    assert int(path.read_text()) == DEFAULT
