"""Gradient workloads, their deterministic contents, and their wire format.

Every worker's gradient of every iteration is generated from (seed, rank, iteration,
tensor index), so any worker can regenerate all of them and compute the exact sum locally
(gradswitch/workload/encoding.py): a result element that differs fails the run. float32 gradients reach
the wire as int32 (gradswitch/workload/floats.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gradswitch.formats import check_format
from gradswitch.protocol.paths import package_folder
from gradswitch.workload.compute import MODEL_FORMAT, Calibration, ComputeProfile, Module
from gradswitch.workload.job import Device, Precision

MODELS_DIR = package_folder("gradswitch.workload", "models")  # the model profiles, package data of an installed wheel
INT_RANGE = 1 << 20  # synthetic int32 gradients are uniform in [-2**20, 2**20): no overflow for N <= 1024
FLOAT_STD = 0.01

Int32Array = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Tensor:
    name: str
    elements: int
    kind: str = "synthetic"  # conv | fc | norm | embedding | synthetic


@dataclass(frozen=True)
class Profile:
    model: str
    source: str
    tensors: tuple[Tensor, ...]

    @property
    def elements(self) -> int:
        return sum(t.elements for t in self.tensors)


DIGITS_MLP = (64, 128, 10)  # train-digits: the widths of the MLP gradswitch/workload/digits.py defines


def digits_profile() -> Profile:
    """train-digits' tensors in back-propagation order (output layer first), like every profile."""
    inputs, hidden, classes = DIGITS_MLP
    shapes = [("fc1.weight", inputs * hidden, "fc"), ("fc1.bias", hidden, "fc"), ("fc2.weight", hidden * classes, "fc"),
              ("fc2.bias", classes, "fc")]
    return Profile("train-digits", "MLP on scikit-learn digits", tuple(Tensor(n, e, k) for n, e, k in reversed(shapes)))


def model_names() -> list[str]:
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


def workload_names() -> list[str]:
    """Every workload `workload` knows: synthetic, the model profiles (also as <model>-stanza), train-digits."""
    return ["synthetic", *model_names(), *(m + "-stanza" for m in model_names()), "train-digits"]


def read_profile(path: Path) -> dict[str, Any]:
    """A model profile's JSON (FormatError, naming it: of another format than MODEL_FORMAT; one without `format`,
    written before it had one, reads as 1)."""
    return check_format(json.loads(path.read_text()), path, "model profile", MODEL_FORMAT, missing_is=1)


@cache
def load_model(name: str) -> Profile:
    path = MODELS_DIR / f"{name.removesuffix('-stanza')}.json"
    if not path.exists():
        known = ", ".join(model_names() + [m + "-stanza" for m in model_names()])
        raise ValueError(f"unknown model profile {name!r} (known: synthetic, {known})")
    raw = read_profile(path)
    tensors = tuple(Tensor(t["name"], t["elements"], t["kind"]) for t in raw["layers"])
    if name.endswith("-stanza"):
        # Stanza-style layer separation: the workers exchange only the convolutional (and their
        # normalisation) gradients; the fully connected layers live on a few separate nodes.
        tensors = tuple(t for t in tensors if t.kind in ("conv", "norm"))
        if not tensors:
            raise ValueError(f"{name}: the model has no convolutional layers to separate")
    return Profile(name, raw["source"], tensors)


@cache
def compute_profile(name: str) -> ComputeProfile | None:
    """A model profile's computation (modules, FLOPs, calibrations); None for synthetic workloads."""
    if name in ("synthetic", "train-digits"):
        return None
    path = MODELS_DIR / f"{name.removesuffix('-stanza')}.json"
    if not path.exists():
        return None
    raw = read_profile(path).get("compute")
    if raw is None:
        return None
    modules = tuple(Module(m["name"], float(m["forward_flops"]), tuple(m["tensors"])) for m in raw["modules"])
    cals = tuple(Calibration(Device(c["device"]), Precision(c["precision"]), int(c["batch"]), float(c["samples_per_s"]),
                             c["measured_model"], float(c["efficiency"]), c["source"], c.get("note", ""))
                 for c in raw["calibrations"])
    return ComputeProfile(name, raw["input"], modules, cals)


def workload(name: str, size_bytes: int, scale: float) -> Profile:
    """The tensors of one training step in back-propagation order (last layer first)."""
    if name == "synthetic":
        return Profile("synthetic", "uniform synthetic tensor", (Tensor("gradient", max(1, size_bytes // 4)),))
    if name == "train-digits":
        return digits_profile()
    model = load_model(name)
    scaled = tuple(Tensor(t.name, max(1, round(t.elements * scale)), t.kind) for t in reversed(model.tensors))
    return Profile(model.model, model.source, scaled)


def _rng(seed: int, rank: int, iteration: int, index: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, rank, iteration, index])))


def int_gradient(elements: int, seed: int, rank: int, iteration: int, index: int) -> Int32Array:
    """Worker `rank`'s int32 gradient for one tensor of one iteration."""
    return _rng(seed, rank, iteration, index).integers(-INT_RANGE, INT_RANGE, size=elements, dtype=np.int32)


def float_gradient(elements: int, seed: int, rank: int, iteration: int, index: int) -> FloatArray:
    """Worker `rank`'s float32 gradient (held as float64) for one tensor of one iteration."""
    rng = _rng(seed, rank, iteration, index)
    return rng.normal(0.0, FLOAT_STD, size=elements).astype(np.float32).astype(np.float64)


def to_wire(values: Int32Array) -> bytes:
    """int32 in network byte order (the switch adds big-endian 32-bit fields)."""
    return values.astype(">i4").tobytes()


def from_wire(data: bytes | bytearray | memoryview, elements: int) -> Int32Array:
    return np.frombuffer(data, dtype=">i4", count=elements).astype(np.int32)
