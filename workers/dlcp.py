"""DLCP on the hosts: per-packet class marking, droppable packets, bounded-loss message framing.

A DLCP job's writes are cut into messages of at most 64 packets, each ending with an 8-byte
trailer, the bitmap of its droppable packets (docs/dlcp.md). Packet i is droppable when the
job allows dropping, it is neither the first nor the last packet of its message nor holds
trailer bytes, its tensor's layer class is at least `drop_min_layer_class` and its magnitude
class at most `drop_max_magnitude_class`. Every packet carries its class in BTH.resv7.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from protocol.dlcp import LAYER_CLASSES, marking
from roce.qp import MAX_LOSSY_PACKETS, TRAILER_BYTES, WorkRequest, droppable_bitmap


@dataclass(frozen=True)
class DlcpPolicy:
    drop: bool = False  # packets may be marked droppable (bounded loss at the receivers)
    loss_budget: float = 0.1  # fraction of a message (and of a QP) a receiver may zero-fill
    drop_min_layer_class: int = 4  # only the back layers' packets may be dropped...
    drop_max_magnitude_class: int = 1  # ...and only small-valued ones
    max_relative_error: float = 0.2  # an iteration with zero-filled packets is correct below this
    reorder: bool = False  # the switches may reorder the job's packets (priority queues, spraying)
    # receivers place packets in any order and judge a hole only at its message's end (roce/order_tolerant.py);
    # False: selective repeat judging a hole a reorder delay after the first packet past it
    order_tolerant: bool = True


@dataclass(frozen=True)
class Tag:
    """What a write carries for the marker: its tensor's layer class and typical magnitude."""

    layer_class: int
    mean_abs: float
    droppable: bool = True  # False: no packet of the write may be dropped (e.g. exponent codes)


def layer_class(index: int, tensors: int) -> int:
    """Tensors are sent in back-propagation order (index 0 = last layer): front layers get class 0."""
    position = tensors - 1 - index
    return min(LAYER_CLASSES - 1, position * LAYER_CLASSES // max(1, tensors))


def magnitude_class(payload: bytes, mean_abs: float) -> int:
    values = np.frombuffer(payload[: len(payload) - len(payload) % 4], dtype=">i4")
    if not len(values) or mean_abs <= 0:
        return 0
    ratio = float(np.mean(np.abs(values.astype(np.int64)))) / mean_abs
    return 0 if ratio < 0.5 else 1 if ratio < 1.0 else 2 if ratio < 1.5 else 3


class Framing:
    """Messages of at most 64 packets with a trailer, and where their data lands."""

    def __init__(self, mtu: int, policy: DlcpPolicy) -> None:
        self.mtu = mtu
        self.policy = policy
        self.message_bytes = MAX_LOSSY_PACKETS * mtu
        self.piece = self.message_bytes - TRAILER_BYTES  # data bytes per message

    def slot_bytes(self, nbytes: int) -> int:
        """Receiver bytes for nbytes of data."""
        pieces = max(1, -(-nbytes // self.piece))
        return (pieces - 1) * self.message_bytes + (nbytes - (pieces - 1) * self.piece) + TRAILER_BYTES

    def messages(self, data: bytes, tag: Tag) -> list[tuple[int, bytes]]:
        """(offset from the slot's start, message bytes with trailer) for a write of `data`."""
        out = []
        for k in range(max(1, -(-len(data) // self.piece))):
            body = data[k * self.piece : (k + 1) * self.piece]
            out.append((k * self.message_bytes, body + self._bitmap(body, tag).to_bytes(TRAILER_BYTES, "big")))
        return out

    def _bitmap(self, body: bytes, tag: Tag) -> int:
        p = self.policy
        if not p.drop or not tag.droppable or tag.layer_class < p.drop_min_layer_class:
            return 0
        total = -(-(len(body) + TRAILER_BYTES) // self.mtu)
        bitmap = 0
        for i in range(1, total - 1):
            chunk = body[i * self.mtu : (i + 1) * self.mtu]
            if len(chunk) == self.mtu and magnitude_class(chunk, tag.mean_abs) <= p.drop_max_magnitude_class:
                bitmap |= 1 << i
        return bitmap

    def read(self, buffer: bytearray | memoryview, va: int, nbytes: int) -> bytes:
        """The data of a write of nbytes at va, without the trailers."""
        view = memoryview(buffer)
        parts = []
        left = nbytes
        offset = va
        while left > 0:
            take = min(left, self.piece)
            parts.append(bytes(view[offset : offset + take]))
            left -= take
            offset += self.message_bytes
        return b"".join(parts)

    def marker(self, wr: WorkRequest, index: int, payload: bytes) -> int:
        """BTH.resv7 of packet `index` of a request (roce.qp.Requester's marker)."""
        tag = wr.tag if isinstance(wr.tag, Tag) else Tag(0, 0.0)
        droppable = bool(droppable_bitmap(wr.data) >> index & 1) if self.policy.drop else False
        return marking(droppable, tag.layer_class, magnitude_class(payload, tag.mean_abs))
