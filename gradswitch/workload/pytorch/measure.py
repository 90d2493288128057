"""Measure a user's PyTorch model as data-parallel training runs it: each layer's forward and
backward time and DistributedDataParallel's gradient buckets (profile.py holds the result).

The model runs for `warmup + steps` training steps under DistributedDataParallel in this process,
world size 1 (gloo on CPU, NCCL on CUDA, a HashStore: no network; the group is made once per process and
destroyed at its exit, as gloo and NCCL can hang when a group is made again after destroy_process_group:
pytorch/pytorch#74666, #114585), on the device the user has
(CUDA where there is one, else the CPU). One rank's computation does not depend on how many ranks
there are, and DDP forms and launches its buckets the same way at any world size, so one process
measures what every rank of a larger job does.

- Forward: a forward pre-hook and a forward hook on every module without children (a layer).
- Backward: a full backward pre-hook (the gradient of the layer's output is there) to the later of
  its full backward hook and the accumulation of its parameters' gradients
  (register_post_accumulate_grad_hook): the first layer's input needs no gradient, so its full
  backward hook fires before its weights' gradients are computed. In-place modules (ReLU(inplace=True))
  run out of place while measured, as full backward hooks require; the result is the same.
- A parameter's gradient is ready after the backward of the layer in progress when it is
  accumulated; a bucket is ready after the last of its parameters' layers in backward order.
- Buckets: a DDP communication hook (register_comm_hook) records each GradBucket's index, buffer
  size and parameters in the order DDP launches them, then runs DDP's own all-reduce hook, so
  training stays correct. DDP rebuilds its buckets after the first step (in the order gradients
  became ready); the buckets of the measured steps are used, and must agree with each other.
- On CUDA every hook synchronizes the device, so each layer's time is its own.

Times are medians over the measured steps (the warm-up steps left out).
"""

from __future__ import annotations

import atexit
import statistics
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gradswitch.workload.pytorch.profile import BucketProfile, LayerProfile, ModelProfile, ProfileError

INSTALL = "pip install 'gradswitch[pytorch]'"
LossFn = Callable[[Any, Any], Any]  # (the model's output, the batch) -> a scalar tensor


def import_torch() -> Any:
    """torch, or ProfileError saying how to install it."""
    try:
        import torch
    except ImportError:
        raise ProfileError(f"measuring a PyTorch model needs PyTorch, which is not installed: {INSTALL} "
                           "(or your own build of torch)") from None
    return torch


_made_here: list[str] = []  # the backend of the world-size-1 group this module made in this process (at most one)


def world_of_one(backend: str) -> None:
    """The default process group: this process alone, with `backend`; made on the first call and kept until the
    process exits (ProfileError where another group is in place: one this module did not make, or another
    backend's)."""
    import torch.distributed as dist

    if dist.is_initialized():
        if _made_here == [backend]:
            return
        raise ProfileError("a torch.distributed process group is already initialized in this process"
                           + (f" (for {_made_here[0]}, not {backend})" if _made_here else "")
                           + "; measure the model in a process of its own")
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    _made_here.append(backend)
    atexit.register(_destroy)


def _destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized() and _made_here:
        dist.destroy_process_group()
    _made_here.clear()


@dataclass
class _Step:
    """What the hooks saw in one training step, in the order it happened."""

    forward: list[tuple[str, float, float]] = field(default_factory=list)  # (module, start, end) per call
    open_forward: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    backward: list[tuple[str, str, float]] = field(default_factory=list)  # (event, module or param, time)
    buckets: list[tuple[int, int, tuple[str, ...]]] = field(default_factory=list)  # (index, bytes, params)


def measure_model(module: Any, batch: Any, *, model_name: str, steps: int = 5, warmup: int = 2,
                  device: str = "auto", bucket_mb: float | None = None, loss: LossFn | None = None) -> ModelProfile:
    """Train `module` on `batch` (a tensor, a tuple of the forward's arguments, or a dict of its keyword
    arguments) for warmup + steps steps under DDP and return what was measured (ProfileError: one line).
    `bucket_mb` is DDP's bucket_cap_mb; None leaves DDP's default (25 MiB, the first bucket 1 MiB)."""
    torch = import_torch()
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    if steps < 1 or warmup < 0:
        raise ProfileError(f"steps {steps}, warm-up {warmup}: measure 1 step or more after 0 warm-up steps or more")
    if bucket_mb is not None and not bucket_mb > 0:
        raise ProfileError(f"bucket size {bucket_mb} MiB: give a positive size (DDP's default is 25)")
    if not isinstance(module, torch.nn.Module):
        raise ProfileError(f"{model_name} returned a {type(module).__name__}, not a torch.nn.Module")
    on = _device(torch, device)
    cuda = on.type == "cuda"
    sync: Callable[[], None] = torch.cuda.synchronize if cuda else (lambda: None)
    clock = time.perf_counter
    names = {id(p): n for n, p in module.named_parameters() if p.requires_grad}
    if not names:
        raise ProfileError(f"{model_name}: the model has no parameter that requires a gradient: nothing to all-reduce")
    inplace = [m for m in module.modules() if isinstance(getattr(m, "inplace", None), bool) and m.inplace]
    handles: list[Any] = []
    step = _Step()

    def now() -> float:
        sync()
        return clock()

    def on_layers() -> None:
        for name, m in module.named_modules():
            if next(m.children(), None) is not None:
                continue
            handles.append(m.register_forward_pre_hook(lambda _m, _a, n=name: step.open_forward[n].append(now())))
            handles.append(m.register_forward_hook(
                lambda _m, _a, _o, n=name: step.forward.append((n, step.open_forward[n].pop(), now()))))
            handles.append(m.register_full_backward_pre_hook(
                lambda _m, _g, n=name: step.backward.append(("start", n, now()))))
            handles.append(m.register_full_backward_hook(
                lambda _m, _gi, _go, n=name: step.backward.append(("end", n, now()))))
        for name, p in module.named_parameters():
            if p.requires_grad:
                handles.append(p.register_post_accumulate_grad_hook(
                    lambda _p, n=name: step.backward.append(("grad", n, now()))))

    def comm_hook(state: Any, bucket: Any) -> Any:
        buffer = bucket.buffer()
        params = tuple(names.get(id(p), f"<unnamed {tuple(p.shape)}>") for p in bucket.parameters())
        step.buckets.append((int(bucket.index()), int(buffer.numel() * buffer.element_size()), params))
        return default_hooks.allreduce_hook(state, bucket)

    comm_hook.__annotations__ = {}  # DDP refuses a hook annotated with other types than its own (these are strings)

    args, kwargs = _forward_arguments(batch, on, torch)
    loss_fn = loss or _default_loss(torch)
    world_of_one("nccl" if cuda else "gloo")
    measured: list[_Step] = []
    optimizer_s: list[float] = []
    try:
        for m in inplace:
            m.inplace = False
        module.to(on).train()
        ddp = DistributedDataParallel(module, device_ids=[on.index or 0] if cuda else None, bucket_cap_mb=bucket_mb)
        ddp.register_comm_hook(None, comm_hook)
        optimizer = torch.optim.SGD(module.parameters(), lr=1e-3)
        on_layers()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            for i in range(warmup + steps):
                step = _Step()
                optimizer.zero_grad(set_to_none=True)
                out = ddp(*args, **kwargs)
                loss_fn(out, batch).backward()
                t0 = now()
                optimizer.step()
                t1 = now()
                if i >= warmup:
                    measured.append(step)
                    optimizer_s.append(t1 - t0)
    except RuntimeError as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ProfileError(f"{model_name}: a training step under DistributedDataParallel failed: {first}") from None
    finally:
        for h in handles:
            h.remove()
        for m in inplace:
            m.inplace = True
    device_name = f"cuda ({torch.cuda.get_device_name(on)})" if cuda else "cpu"
    return _profile(measured, optimizer_s, model_name=model_name, device=device_name,
                    torch_version=str(torch.__version__), warmup=warmup, batch=_describe(batch, torch),
                    param_bytes={n: p.numel() * p.element_size() for n, p in module.named_parameters()},
                    classes={n: type(m).__name__ for n, m in module.named_modules()})


def _device(torch: Any, device: str) -> Any:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ProfileError(f"device {device!r}: give auto, cpu, cuda or cuda:N")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProfileError(f"device {device!r}: this torch sees no CUDA device; give --device cpu (or auto)")
    return torch.device(device)


def _forward_arguments(batch: Any, on: Any, torch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    def move(x: Any) -> Any:
        return x.to(on) if isinstance(x, torch.Tensor) else x

    if isinstance(batch, dict):
        return (), {str(k): move(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return tuple(move(x) for x in batch), {}
    if isinstance(batch, torch.Tensor):
        return (move(batch),), {}
    raise ProfileError(f"the batch is a {type(batch).__name__}: give a tensor, a tuple of the forward's arguments "
                       "or a dict of its keyword arguments")


def _default_loss(torch: Any) -> LossFn:
    """The mean square of every floating-point tensor the model returns (any loss has the same backward cost
    through the model; only the last step differs)."""

    def tensors(x: Any) -> list[Any]:
        if isinstance(x, torch.Tensor):
            return [x] if x.is_floating_point() else []
        if isinstance(x, dict):
            x = list(x.values())
        if isinstance(x, (tuple, list)):
            return [t for v in x for t in tensors(v)]
        return []

    def loss(out: Any, _batch: Any) -> Any:
        found = tensors(out)
        if not found:
            raise ProfileError(f"the model returned a {type(out).__name__} with no floating-point tensor; "
                               "give a loss (--loss module:function of the output and the batch)")
        return sum(t.float().pow(2).mean() for t in found)

    return loss


def _describe(batch: Any, torch: Any) -> str:
    if isinstance(batch, torch.Tensor):
        return f"{tuple(batch.shape)} {str(batch.dtype).removeprefix('torch.')}"
    if isinstance(batch, dict):
        return "{" + ", ".join(f"{k}: {_describe(v, torch)}" for k, v in batch.items()) + "}"
    if isinstance(batch, (tuple, list)):
        return "(" + ", ".join(_describe(v, torch) for v in batch) + ")"
    return type(batch).__name__


def _layer_names(calls: list[str]) -> list[str]:
    """`relu`, then `relu#2` for a module's second call in the same forward."""
    seen: dict[str, int] = defaultdict(int)
    out = []
    for module in calls:
        seen[module] += 1
        out.append(module if seen[module] == 1 else f"{module}#{seen[module]}")
    return out


@dataclass(frozen=True)
class _StepLayers:
    names: list[str]
    modules: list[str]
    forward_s: list[float]
    backward_s: list[float]
    ready: dict[str, str]  # parameter -> the layer after whose backward its gradient is ready


def _step_layers(step: _Step) -> _StepLayers:
    modules = [m for m, _, _ in step.forward]
    names = _layer_names(modules)
    calls: dict[str, list[int]] = defaultdict(list)  # module -> its layers' positions, in forward order
    for i, m in enumerate(modules):
        calls[m].append(i)
    backward_calls: dict[str, int] = defaultdict(int)
    start: dict[int, float] = {}
    end: dict[int, float] = {}
    ready: dict[str, str] = {}
    current: int | None = None  # the layer whose backward started last
    for event, who, t in step.backward:
        if event == "grad":
            layer = current if current is not None else len(names) - 1
            ready[who] = names[layer]
            end[layer] = max(end.get(layer, t), t)
            continue
        positions = calls.get(who, [])
        k = backward_calls[who] if event == "start" else backward_calls[who] - 1
        if not 0 <= k < len(positions):
            continue
        layer = positions[len(positions) - 1 - k]  # backward meets a module's calls in reverse
        if event == "start":
            backward_calls[who] += 1
            start[layer] = t
            current = layer
        else:
            end[layer] = max(end.get(layer, t), t)
    backward_s = [max(0.0, end[i] - start[i]) if i in start and i in end else 0.0 for i in range(len(names))]
    return _StepLayers(names, modules, [e - s for _, s, e in step.forward], backward_s, ready)


def _profile(measured: list[_Step], optimizer_s: list[float], *, model_name: str, device: str, torch_version: str,
             warmup: int, batch: str, param_bytes: dict[str, int], classes: dict[str, str]) -> ModelProfile:
    per_step = [_step_layers(s) for s in measured]
    last = per_step[-1]
    for s in per_step:
        if s.names != last.names:
            raise ProfileError(f"{model_name}: the layers called differ between steps ({len(s.names)} and "
                               f"{len(last.names)} calls); gradswitch traces models whose forward is the same "
                               "every step")
    bucket_runs = [tuple(s.buckets) for s in measured]
    if any(b != bucket_runs[-1] for b in bucket_runs):
        raise ProfileError(f"{model_name}: DDP's buckets changed between measured steps; give more warm-up steps "
                           "(--warmup)")
    position = {name: i for i, name in enumerate(last.names)}
    owned: dict[str, int] = defaultdict(int)
    for p, layer in last.ready.items():
        owned[layer] += param_bytes[p]
    layers = tuple(LayerProfile(name, classes.get(module, "Module"),
                                statistics.median(s.forward_s[i] for s in per_step),
                                statistics.median(s.backward_s[i] for s in per_step), owned[name])
                   for i, (name, module) in enumerate(zip(last.names, last.modules, strict=True)))
    buckets = []
    for index, nbytes, params in bucket_runs[-1]:
        ready = [last.ready[p] for p in params if p in last.ready]
        if not ready:
            raise ProfileError(f"{model_name}: bucket {index}'s gradients were never accumulated during the backward")
        buckets.append(BucketProfile(index, nbytes, params, min(ready, key=position.__getitem__)))
    profile = ModelProfile(model_name, device, torch_version, len(measured), warmup, batch, layers, tuple(buckets),
                           statistics.median(optimizer_s))
    profile.check()
    return profile


def random_batch(shape: tuple[int, ...], seed: int = 0) -> Any:
    """A float32 tensor of this shape, normally distributed (the same every time for one seed)."""
    torch = import_torch()
    if not shape or any(n < 1 for n in shape):
        raise ProfileError(f"input shape {shape}: give positive sizes, the batch first (e.g. 32,3,224,224)")
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
