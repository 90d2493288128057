"""What measuring a PyTorch model under DistributedDataParallel found (gradswitch/workload/pytorch/measure.py),
in plain dataclasses that need no torch: each layer's forward and backward time, and DDP's gradient
buckets in the order DDP launched their all-reduce. `ModelProfile.to_dict`/`from_dict` are the form a
profile file holds, so the job's graph can be built again at other rank counts without torch.

A layer is one call of a module without children (a module called twice in a forward, as a shared
ReLU, is two layers: `relu`, `relu#2`). Times are medians over the measured steps (warm-up steps
left out), in seconds of the device that ran them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROFILE_FORMAT = 1


class ProfileError(ValueError):
    """A profile that cannot be used: one line saying what and what to do."""


@dataclass(frozen=True)
class LayerProfile:
    name: str  # the module's qualified name in the model, `#k` for its k-th call in a forward (k >= 2)
    module: str  # the module's class (Linear, Conv2d, ...)
    forward_s: float
    backward_s: float
    param_bytes: int  # bytes of the gradients of the parameters the module itself holds (0 for the second call on)


@dataclass(frozen=True)
class BucketProfile:
    """One of DDP's gradient buckets: its all-reduce is launched once the gradients of all its
    parameters are ready, that is after the backward of `ready_after` (a LayerProfile's name)."""

    index: int  # DDP's GradBucket.index()
    nbytes: int  # the bucket's buffer: the bytes one rank all-reduces
    params: tuple[str, ...]  # qualified names of its parameters, in the bucket's order
    ready_after: str


@dataclass(frozen=True)
class ModelProfile:
    model: str  # what was measured (the factory's name)
    device: str  # where it ran: cpu, cuda (with the device's name)
    torch_version: str
    steps: int  # steps measured (after the warm-up)
    warmup: int
    batch: str  # what one step's input was (shapes), per rank
    layers: tuple[LayerProfile, ...]  # in forward order; backward runs them in reverse
    buckets: tuple[BucketProfile, ...]  # in the order DDP launched their all-reduces
    optimizer_s: float  # the optimizer's step, after every bucket's all-reduce

    @property
    def param_bytes(self) -> int:
        return sum(layer.param_bytes for layer in self.layers)

    def check(self) -> None:
        """ProfileError unless the graph can be built: layers named once, every bucket ready after a known layer."""
        if not self.layers:
            raise ProfileError(f"{self.model}: no layer ran in the forward (a module without children must be called)")
        names = [layer.name for layer in self.layers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ProfileError(f"{self.model}: layer {twice[0]!r} appears twice")
        for b in self.buckets:
            if b.ready_after not in names:
                raise ProfileError(f"{self.model}: bucket {b.index} is ready after layer {b.ready_after!r}, "
                                   "which is not one of the model's layers")
            if b.nbytes <= 0:
                raise ProfileError(f"{self.model}: bucket {b.index} holds {b.nbytes} bytes")

    def to_dict(self) -> dict[str, Any]:
        return {"format": PROFILE_FORMAT, "model": self.model, "device": self.device,
                "torch_version": self.torch_version, "steps": self.steps, "warmup": self.warmup,
                "batch": self.batch, "optimizer_s": self.optimizer_s,
                "layers": [{"name": x.name, "module": x.module, "forward_s": x.forward_s, "backward_s": x.backward_s,
                            "param_bytes": x.param_bytes} for x in self.layers],
                "buckets": [{"index": b.index, "nbytes": b.nbytes, "params": list(b.params),
                             "ready_after": b.ready_after} for b in self.buckets]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ModelProfile:
        if d.get("format") != PROFILE_FORMAT:
            raise ProfileError(f"profile format {d.get('format')!r}; this gradswitch reads format {PROFILE_FORMAT} "
                               "(measure the model again with `gradswitch trace-model --model ...`)")
        return ModelProfile(
            str(d["model"]), str(d["device"]), str(d["torch_version"]), int(d["steps"]), int(d["warmup"]),
            str(d["batch"]),
            tuple(LayerProfile(str(x["name"]), str(x["module"]), float(x["forward_s"]), float(x["backward_s"]),
                               int(x["param_bytes"])) for x in d["layers"]),
            tuple(BucketProfile(int(b["index"]), int(b["nbytes"]), tuple(str(p) for p in b["params"]),
                                str(b["ready_after"])) for b in d["buckets"]),
            float(d["optimizer_s"]))
