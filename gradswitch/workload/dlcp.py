"""DLCP on the hosts: every packet's class (layer, magnitude) and whether a switch may drop it.

Every data packet of a DLCP job carries its class in BTH.resv7 (gradswitch/protocol/dlcp.py, docs/dlcp.md
"Packet marking"). A packet is droppable when the job allows dropping, its write may lose
packets (exponent codes may not), its tensor's layer class is at least `drop_min_layer_class`
and its magnitude class at most `drop_max_magnitude_class`: any packet of a message, the first
and the last too, whatever the message's size. A switch that drops a droppable packet forwards
its headers (a trimmed packet), which the receiver completes as zeros within its loss budget.

Magnitude classes come from the values themselves: per worker and iteration, the thresholds are
the quartiles of the per-packet mean |v| of the gradient the worker contributes that iteration
(`Magnitudes.of`), and a packet is classed by its mean |v| per contribution (a ring's partial sum
of k gradients is divided by k), so a sum and a single gradient are judged on one scale.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gradswitch.protocol.dlcp import LAYER_CLASSES, MAGNITUDE_CLASSES, marking
from gradswitch.roce.qp import WorkRequest


@dataclass(frozen=True)
class DlcpPolicy:
    drop: bool = False  # packets may be marked droppable (switches trim them; receivers zero-fill within budget)
    loss_budget: float = 0.1  # fraction of a QP's packets (and of a message's) a receiver may zero-fill
    drop_min_layer_class: int = 4  # only the back layers' packets may be dropped...
    drop_max_magnitude_class: int = 1  # ...and only small-valued ones
    max_relative_error: float = 0.2  # an iteration with zero-filled packets is correct below this
    reorder: bool = False  # the switches may reorder the job's packets (priority queues, spraying)
    # receivers place packets in any order and judge a hole only at its message's end
    # (gradswitch/roce/order_tolerant.py);
    # False: selective repeat judging a hole a reorder delay after the first packet past it
    order_tolerant: bool = True


def packet_means(values: npt.NDArray[np.int32], per_packet: int) -> npt.NDArray[np.float64]:
    """Mean |v| of each run of `per_packet` values (a packet's worth; the last run may be shorter)."""
    if not len(values):
        return np.zeros(0)
    magnitudes = np.abs(values.astype(np.float64))
    starts = np.arange(0, len(values), per_packet)
    sums = np.add.reduceat(magnitudes, starts)
    counts = np.diff(np.append(starts, len(values)))
    means: npt.NDArray[np.float64] = sums / counts
    return means


@dataclass(frozen=True)
class Magnitudes:
    """Where one worker's magnitude classes change in one iteration: the k/MAGNITUDE_CLASSES quantiles
    (the quartiles) of the per-packet mean |v| of the gradient it contributes."""

    thresholds: tuple[float, ...]  # MAGNITUDE_CLASSES - 1 increasing bounds

    @classmethod
    def of(cls, tensors: Iterable[npt.NDArray[np.int32]], per_packet: int) -> Magnitudes:
        """From the int32 values a worker contributes, each tensor cut into packets of `per_packet`
        values from its start (as its writes are)."""
        return cls.of_means([packet_means(t, per_packet) for t in tensors])

    @classmethod
    def of_means(cls, means: list[npt.NDArray[np.float64]]) -> Magnitudes:
        """From per-packet mean |v| already computed (packet_means)."""
        pooled = np.concatenate(means) if means else np.zeros(0)
        if not len(pooled):
            return cls(tuple([0.0] * (MAGNITUDE_CLASSES - 1)))
        qs = np.quantile(pooled, [k / MAGNITUDE_CLASSES for k in range(1, MAGNITUDE_CLASSES)])
        return cls(tuple(float(q) for q in qs))

    def classify(self, mean_abs: float) -> int:
        """0 below the first quartile ... MAGNITUDE_CLASSES - 1 at or above the last."""
        return bisect_right(self.thresholds, mean_abs)


@dataclass(frozen=True)
class Tag:
    """What a write carries for the marker: its tensor's layer class, the sender's magnitude thresholds
    for the iteration, how many workers' gradients its values sum, and whether it may lose packets."""

    layer_class: int
    magnitudes: Magnitudes | None = None  # None: no thresholds, every packet in the top class
    contributions: int = 1  # a ring's partial sum after k steps holds k + 1; a full sum, N
    droppable: bool = True  # False: no packet of the write may be dropped (e.g. exponent codes)


def layer_class(index: int, tensors: int) -> int:
    """Tensors are sent in back-propagation order (index 0 = last layer): front layers get class 0."""
    position = tensors - 1 - index
    return min(LAYER_CLASSES - 1, position * LAYER_CLASSES // max(1, tensors))


def payload_mean(payload: bytes) -> float:
    """Mean |v| of a packet's int32 values (network byte order)."""
    values = np.frombuffer(payload[: len(payload) - len(payload) % 4], dtype=">i4")
    return float(np.mean(np.abs(values.astype(np.float64)))) if len(values) else 0.0


def magnitude_class(payload: bytes, tag: Tag) -> int:
    """The packet's magnitude class: its mean |v| per contribution against the sender's thresholds."""
    if tag.magnitudes is None:
        return MAGNITUDE_CLASSES - 1
    return tag.magnitudes.classify(payload_mean(payload) / max(1, tag.contributions))


class Marker:
    """BTH.resv7 of every packet of a DLCP job's writes (gradswitch.roce.qp.Requester's marker)."""

    def __init__(self, policy: DlcpPolicy) -> None:
        self.policy = policy

    def droppable(self, tag: Tag, magnitude: int) -> bool:
        p = self.policy
        return (p.drop and tag.droppable and tag.layer_class >= p.drop_min_layer_class
                and magnitude <= p.drop_max_magnitude_class)

    def __call__(self, wr: WorkRequest, index: int, payload: bytes) -> int:
        tag = wr.tag if isinstance(wr.tag, Tag) else Tag(0, droppable=False)
        magnitude = magnitude_class(payload, tag)
        return marking(self.droppable(tag, magnitude), tag.layer_class, magnitude)
