"""A real (small) training job whose gradients go through the switches.

Workload "train-digits": an MLP (64 -> HIDDEN -> 10, ReLU, softmax) learns scikit-learn's
digits data set (1797 8x8 images, shipped with the package). Every worker holds a shard of
the training set; each iteration it computes the gradient of a minibatch with numpy, sends
it as int32 fixed point through the chosen all-reduce (ring, PS or NetReduce, through BMv2),
averages, and takes an SGD step. Accuracy on the held-out set is measured every iteration,
so runs with and without DLCP's bounded-loss dropping can be compared on learning, not only
on time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from workers.comm import Comm
from workers.encoding import AllReduce, Encoder, job_profile
from workers.records import IterationRecord
from workers.tensors import DIGITS_MLP, digits_profile

INPUTS, HIDDEN, CLASSES = DIGITS_MLP
BATCH = 32
LEARNING_RATE = 0.5
TEST_FRACTION = 0.25
FloatArray = npt.NDArray[np.float64]


@dataclass
class Model:
    w1: FloatArray
    b1: FloatArray
    w2: FloatArray
    b2: FloatArray

    @classmethod
    def initial(cls, seed: int) -> Model:
        rng = np.random.default_rng(seed)
        return cls(rng.normal(0, 0.1, (INPUTS, HIDDEN)), np.zeros(HIDDEN), rng.normal(0, 0.1, (HIDDEN, CLASSES)),
                   np.zeros(CLASSES))

    def tensors(self) -> list[FloatArray]:
        return [self.w1, self.b1, self.w2, self.b2]

    def forward(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        h = np.maximum(0.0, x @ self.w1 + self.b1)
        logits = h @ self.w2 + self.b2
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return h, p / p.sum(axis=1, keepdims=True)

    def gradients(self, x: FloatArray, y: npt.NDArray[np.int64]) -> tuple[list[FloatArray], float]:
        h, p = self.forward(x)
        loss = float(-np.mean(np.log(p[np.arange(len(y)), y] + 1e-12)))
        d = p.copy()
        d[np.arange(len(y)), y] -= 1
        d /= len(y)
        gw2 = h.T @ d
        gb2 = d.sum(axis=0)
        dh = (d @ self.w2.T) * (h > 0)
        return [x.T @ dh, dh.sum(axis=0), gw2, gb2], loss

    def accuracy(self, x: FloatArray, y: npt.NDArray[np.int64]) -> float:
        return float(np.mean(self.forward(x)[1].argmax(axis=1) == y))


def data(seed: int) -> tuple[FloatArray, npt.NDArray[np.int64], FloatArray, npt.NDArray[np.int64]]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = digits.data.astype(np.float64) / 16.0
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    split = int(len(y) * (1 - TEST_FRACTION))
    return x[order[:split]], y[order[:split]], x[order[split:]], y[order[split:]]


class TrainLoop:
    """Like WorkerLoop, but the gradients are a model's, and the records carry accuracy and loss."""

    def __init__(self, comm: Comm, allreduce: AllReduce) -> None:
        self.comm = comm
        self.cfg = comm.cfg
        self.allreduce = allreduce
        self.profile = job_profile(self.cfg, digits_profile())  # what the all-reduce moves
        self.encoder = Encoder(self.cfg)
        ranks = [w.node_id for w in self.cfg.workers]
        self.rank = ranks.index(comm.me.node_id)
        self.n = len(ranks)
        x, y, self.x_test, self.y_test = data(self.cfg.seed)
        self.x, self.y = x[self.rank :: self.n], y[self.rank :: self.n]
        self.model = Model.initial(self.cfg.seed)
        self.largest_op = max(t.elements for t in self.profile.tensors)
        self.in_flight = 1

    def extra(self) -> dict[str, object]:
        return {}

    def run(self, progress: Callable[[int], None] = lambda i: None) -> list[IterationRecord]:
        records = []
        rng = np.random.default_rng(self.cfg.seed * 1000 + self.rank)
        for it in range(self.cfg.iterations):
            batch = rng.choice(len(self.y), size=min(BATCH, len(self.y)), replace=False)
            grads, loss = self.model.gradients(self.x[batch], self.y[batch])
            zero_before = self.comm.zero_filled
            start = time.monotonic()
            # Back-propagation order: the last layer's gradient first (profile() order).
            summed: dict[int, FloatArray] = {}
            saturated = 0
            for index, g in enumerate(reversed(grads)):
                r = self.encoder.reduce(self.allreduce, it, index, g.ravel())
                saturated += r.saturated
                summed[index] = self.encoder.decode(r).reshape(g.shape) / self.n
            self.comm.drain()
            end = time.monotonic()
            for tensor, update in zip(self.model.tensors(), reversed([summed[i] for i in range(len(grads))]),
                                      strict=True):
                tensor -= LEARNING_RATE * update
            accuracy = self.model.accuracy(self.x_test, self.y_test)
            extra = {"accuracy": accuracy, "loss": loss,
                     "zero_filled_packets": float(self.comm.zero_filled - zero_before)}
            records.append(IterationRecord(it, start, end, True, 0, 0.0, saturated, extra))
            progress(it)
        return records
