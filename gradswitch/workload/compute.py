"""The computation of a training iteration: per-layer forward and backward time on an emulated GPU.

Every model profile (gradswitch/workload/models/*.json, written by gradswitch/workload/models/generate.py) lists, per
module (a layer with parameters, e.g. `layer1.0.conv2`), its forward FLOPs for one sample and,
per emulated device and precision, an efficiency calibrated on a published single-GPU
training throughput (docs/training.md). A module's forward time for a batch of B samples is

    forward_s = B x flops / (peak x efficiency)

and its backward time is BACKWARD_FACTOR times that (input gradient and weight gradient, each
about the forward's cost), except for the network's first module, whose input gradient no
one needs (backward = 1 x forward). Times are real seconds on the emulated GPU; a run
stretches them by its dilation (gradswitch/workload/plan.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.workload.job import Device, Precision

MODEL_FORMAT = 1  # a model profile's `format` (models/*.json: generate.py writes it, gradients.read_profile reads it)
BACKWARD_FACTOR = 2.0  # backward FLOPs of a module over its forward FLOPs (input + weight gradients)
FIRST_BACKWARD_FACTOR = 1.0  # the first module: weight gradient only


# Peak dense throughput, FLOP/s, from NVIDIA's V100 and A100 data sheets. The efficiency of each
# model is calibrated against these, so only their ratios to a measurement matter.
PEAK_FLOPS: dict[tuple[Device, Precision], float] = {
    (Device.V100, Precision.FP32): 15.7e12,
    (Device.V100, Precision.AMP): 125e12,
    (Device.A100, Precision.FP32): 156e12,  # TF32 tensor cores
    (Device.A100, Precision.AMP): 312e12,
}


@dataclass(frozen=True)
class Module:
    """A layer with parameters, in forward order: its forward FLOPs per sample and its tensors' names."""

    name: str
    forward_flops: float
    tensors: tuple[str, ...]


@dataclass(frozen=True)
class Calibration:
    """A published single-GPU training throughput and the efficiency it gives this model."""

    device: Device
    precision: Precision
    batch: int  # the measurement's batch per GPU
    samples_per_s: float  # the measured throughput (of `measured_model`)
    measured_model: str  # the model measured; another one's efficiency is borrowed when it is not this one
    efficiency: float  # achieved fraction of the peak for this model's FLOPs
    source: str  # where the measurement is published (address)
    note: str = ""


@dataclass(frozen=True)
class ComputeProfile:
    """What a model profile says about computation."""

    model: str
    input: str  # what one sample is (image size, sequence length)
    modules: tuple[Module, ...]
    calibrations: tuple[Calibration, ...]

    @property
    def forward_flops(self) -> float:
        return sum(m.forward_flops for m in self.modules)

    @property
    def train_flops(self) -> float:
        """Forward plus backward FLOPs of one sample under the backward rule."""
        return train_flops([m.forward_flops for m in self.modules])

    def calibration(self, device: Device, precision: Precision) -> Calibration | None:
        return next((c for c in self.calibrations if c.device == device and c.precision == precision), None)


def train_flops(forward: list[float]) -> float:
    """Forward + backward FLOPs of one sample of a network whose modules (forward order) cost `forward`."""
    if not forward:
        return 0.0
    return sum(forward) + FIRST_BACKWARD_FACTOR * forward[0] + BACKWARD_FACTOR * sum(forward[1:])


def efficiency(train_flops_per_sample: float, samples_per_s: float, device: Device, precision: Precision) -> float:
    """The fraction of the peak a measured throughput achieves on a model of that many FLOPs per sample."""
    return train_flops_per_sample * samples_per_s / PEAK_FLOPS[(device, precision)]


@dataclass(frozen=True)
class LayerTime:
    """One module's computation for one batch, in real seconds on the emulated GPU."""

    name: str
    forward_s: float
    backward_s: float
    tensors: tuple[str, ...]


def layer_times(profile: ComputeProfile, device: Device, precision: Precision, batch: int) -> list[LayerTime]:
    """Every module's forward and backward time (forward order) for one batch on one GPU."""
    cal = profile.calibration(device, precision)
    if cal is None:
        raise ValueError(f"{profile.model}: no calibration for {device} {precision}")
    rate = PEAK_FLOPS[(device, precision)] * cal.efficiency
    out = []
    for i, m in enumerate(profile.modules):
        fwd = batch * m.forward_flops / rate
        out.append(LayerTime(m.name, fwd, fwd * (FIRST_BACKWARD_FACTOR if i == 0 else BACKWARD_FACTOR), m.tensors))
    return out


def iteration_s(profile: ComputeProfile, device: Device, precision: Precision, batch: int) -> float:
    """Modelled single-GPU iteration time (forward + backward of one batch), real seconds."""
    return sum(t.forward_s + t.backward_s for t in layer_times(profile, device, precision, batch))
