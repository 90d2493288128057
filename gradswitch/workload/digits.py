"""The model, data and minibatches of workload "train-digits": what every worker of the job computes, the same on
every engine (the iteration loop, gradswitch/hosts/digits_job.py; the graph engine, gradswitch/hosts/graph_digits.py).

An MLP (64 -> HIDDEN -> 10, ReLU, softmax) learns scikit-learn's digits data set (1797 8x8 images, shipped with
scikit-learn). The job's seed gives the train/test split, the initial model and every worker's minibatch draws,
so that a worker computes every other worker's gradient, and the exact sum they add up to, on its own model.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gradswitch.workload.gradients import DIGITS_MLP

INPUTS, HIDDEN, CLASSES = DIGITS_MLP
BATCH = 32
LEARNING_RATE = 0.5
TEST_FRACTION = 0.25
FloatArray = npt.NDArray[np.float64]
Labels = npt.NDArray[np.int64]

DIGITS_EXTRA = "the digits data set needs scikit-learn: pip install 'gradswitch[digits]'"


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

    def copy(self) -> Model:
        return Model(self.w1.copy(), self.b1.copy(), self.w2.copy(), self.b2.copy())

    def forward(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        h = np.maximum(0.0, x @ self.w1 + self.b1)
        logits = h @ self.w2 + self.b2
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return h, p / p.sum(axis=1, keepdims=True)

    def gradients(self, x: FloatArray, y: Labels) -> tuple[list[FloatArray], float]:
        h, p = self.forward(x)
        loss = float(-np.mean(np.log(p[np.arange(len(y)), y] + 1e-12)))
        d = p.copy()
        d[np.arange(len(y)), y] -= 1
        d /= len(y)
        gw2 = h.T @ d
        gb2 = d.sum(axis=0)
        dh = (d @ self.w2.T) * (h > 0)
        return [x.T @ dh, dh.sum(axis=0), gw2, gb2], loss

    def accuracy(self, x: FloatArray, y: Labels) -> float:
        return float(np.mean(self.forward(x)[1].argmax(axis=1) == y))

    def digest(self) -> str:
        """A digest of the parameters: equal on two workers exactly when their models are identical."""
        h = hashlib.sha256()
        for t in self.tensors():
            h.update(np.ascontiguousarray(t).tobytes())
        return h.hexdigest()[:16]

    def shapes(self) -> list[tuple[int, ...]]:
        """The gradients' shapes in back-propagation order (the profile's,
        gradswitch.workload.gradients.digits_profile)."""
        return [t.shape for t in reversed(self.tensors())]

    def step(self, updates: list[FloatArray]) -> None:
        """SGD: each parameter less LEARNING_RATE x its update (`updates`: flat, in back-propagation order)."""
        shaped = [u.reshape(shape) for u, shape in zip(updates, self.shapes(), strict=True)]
        for tensor, update in zip(self.tensors(), reversed(shaped), strict=True):
            tensor -= LEARNING_RATE * update


def digits_available() -> bool:
    """Whether the digits data set's scikit-learn is installed (the `digits` extra)."""
    return importlib.util.find_spec("sklearn") is not None


def require_digits() -> None:
    """Refuse, in one line saying what to install, when the digits data set's scikit-learn is missing."""
    if not digits_available():
        raise SystemExit(f"error: {DIGITS_EXTRA}")


def data(seed: int) -> tuple[FloatArray, Labels, FloatArray, Labels]:
    """The training inputs and labels, then the held-out ones, split by the seed."""
    require_digits()
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = digits.data.astype(np.float64) / 16.0
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    split = int(len(y) * (1 - TEST_FRACTION))
    return x[order[:split]], y[order[:split]], x[order[split:]], y[order[split:]]


class Minibatches:
    """Every worker's shard of the training set and its minibatch draws (from the seed), so that any worker can
    compute any worker's next gradient; and the held-out set the accuracy is measured on."""

    def __init__(self, seed: int, workers: int) -> None:
        x, y, self.x_test, self.y_test = data(seed)
        self.shards = [(x[r::workers], y[r::workers]) for r in range(workers)]
        self.draws = [np.random.default_rng(seed * 1000 + r) for r in range(workers)]

    def gradients(self, model: Model, r: int) -> tuple[list[FloatArray], float]:
        """Worker r's gradients of its next minibatch on `model` (its draws advance), flat, in back-propagation
        order (the profile's), and the minibatch's loss."""
        x, y = self.shards[r]
        batch = self.draws[r].choice(len(y), size=min(BATCH, len(y)), replace=False)
        grads, loss = model.gradients(x[batch], y[batch])
        return [g.ravel() for g in reversed(grads)], loss

    def accuracy(self, model: Model) -> float:
        return model.accuracy(self.x_test, self.y_test)
