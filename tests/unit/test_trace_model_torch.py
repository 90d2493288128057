"""`gradswitch trace-model` with PyTorch (torch==2.13.0, the CPU build here): a small model, defined
here, measured under DistributedDataParallel (gradswitch/workload/pytorch/measure.py). DDP's own record of its
rebuilt buckets (sizes, parameters, order) is what the communication hook's view is judged against;
training with the hook in place must move the weights exactly as plain training does.

Without torch these tests skip with the reason; with GRADSWITCH_REQUIRE_TORCH=1 (.ci/run) they fail."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gradswitch.cli.main import main
from gradswitch.workload.graph import CollectiveNode, ComputeNode, to_dict, validate
from gradswitch.workload.pytorch.job_graph import job_graph
from gradswitch.workload.pytorch.profile import ModelProfile
from tests.require import missing

BUCKET_MB = 0.001  # small buckets (1 KiB: DDP closes one once it holds that much), so that there are several
LAYERS = ["conv1", "relu", "conv2", "relu#2", "flatten", "fc1", "act", "fc2"]  # `relu` is called twice


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        missing("torch", "torch is not installed: pip install 'gradswitch[pytorch]' (the suite uses the torch "
                "pyproject.toml's dev extra pins: make venv)")
    return torch


def make_model() -> Any:
    """Two convolutions sharing one in-place ReLU, then two linear layers (the factory the command loads)."""
    nn = _torch().nn

    class Small(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(8, 8, 3)
            self.flatten = nn.Flatten()
            self.fc1 = nn.Linear(8 * 4 * 4, 32)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x: Any) -> Any:
            x = self.relu(self.conv2(self.relu(self.conv1(x))))
            return self.fc2(self.act(self.fc1(self.flatten(x))))

    torch = _torch()
    torch.manual_seed(0)
    return Small()


def make_batch() -> Any:
    return _torch().randn(4, 3, 8, 8, generator=_torch().Generator().manual_seed(1))


def _ddp_own_buckets(model: Any, batch: Any) -> list[tuple[int, list[str]]]:
    """DDP's record of its rebuilt buckets after three plain steps: (bytes, parameter names) in order."""
    torch = _torch()
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from gradswitch.workload.pytorch.measure import world_of_one

    world_of_one("gloo")  # the group measure_model uses too: one per process (measure.py says why)
    assert dist.get_world_size() == 1
    ddp = DistributedDataParallel(model, bucket_cap_mb=BUCKET_MB)
    for _ in range(3):
        ddp(batch).float().pow(2).mean().backward()
    data = ddp._get_ddp_logging_data()
    names = [n for n, _ in model.named_parameters()]
    sizes = [int(x) for x in str(data["rebuilt_bucket_sizes"]).split(",")]
    params = [[names[int(i)] for i in group.split()] for group in str(data["rebuilt_per_bucket_param_indices"])
              .split(",")]
    assert torch is not None and len(sizes) == len(params)
    return list(zip(sizes, params, strict=True))


@pytest.fixture(scope="module")
def measured() -> tuple[ModelProfile, Any, Any]:
    """The profile, the model after measuring and a copy of it from before."""
    from gradswitch.workload.pytorch.measure import measure_model

    model = make_model()
    before = copy.deepcopy(model)
    profile = measure_model(model, make_batch(), model_name="make_model", steps=3, warmup=2, device="cpu",
                            bucket_mb=BUCKET_MB)
    return profile, model, before


def test_layers_are_each_call_in_forward_order_with_positive_times(measured):
    profile, model, _ = measured
    assert [x.name for x in profile.layers] == LAYERS
    assert [x.module for x in profile.layers] == ["Conv2d", "ReLU", "Conv2d", "ReLU", "Flatten", "Linear", "ReLU",
                                                  "Linear"]
    assert all(x.forward_s > 0 and x.backward_s > 0 for x in profile.layers), profile.layers
    assert profile.optimizer_s > 0 and (profile.steps, profile.warmup, profile.device) == (3, 2, "cpu")
    assert profile.batch == "(4, 3, 8, 8) float32"
    owned = {x.name: x.param_bytes for x in profile.layers}
    for layer in ("conv1", "conv2", "fc1", "fc2"):
        assert owned[layer] == sum(p.numel() * 4 for p in getattr(model, layer).parameters())
    assert profile.param_bytes == sum(p.numel() * p.element_size() for p in model.parameters()) == 21_064


def test_buckets_are_ddps_own_in_its_order_and_hold_every_gradient_byte(measured):
    profile, model, _ = measured
    own = _ddp_own_buckets(copy.deepcopy(model), make_batch())
    assert len(own) == 4, own  # the cap makes several buckets: their order is a real check
    assert [(b.nbytes, sorted(b.params)) for b in profile.buckets] == [(n, sorted(p)) for n, p in own]
    assert [b.index for b in profile.buckets] == list(range(len(own)))
    assert sum(b.nbytes for b in profile.buckets) == profile.param_bytes
    # each bucket is ready after the backward of the layer, of those whose parameters it holds, that runs last
    order = {name: i for i, name in enumerate(LAYERS)}
    for b in profile.buckets:
        assert b.ready_after == min((p.split(".")[0] for p in b.params), key=order.__getitem__), b


def test_training_under_the_hook_moves_the_weights_as_plain_training_does(measured):
    """The communication hook returns DDP's all-reduce's future: at world size 1, the 5 steps measure_model
    ran equal 5 plain SGD steps on the same batch and loss; the module's hooks are gone, its ReLU in place again."""
    torch = _torch()
    _, model, before = measured
    optimizer = torch.optim.SGD(before.parameters(), lr=1e-3)
    batch = make_batch()
    for _ in range(5):
        optimizer.zero_grad(set_to_none=True)
        before(batch).float().pow(2).mean().backward()
        optimizer.step()
    for (name, a), b in zip(model.named_parameters(), before.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7), name
    assert not torch.equal(next(model.parameters()), next(make_model().parameters()))  # it did train
    assert model.relu.inplace and not model.act.inplace
    assert not any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
                   for m in model.modules())
    assert not any(p._post_accumulate_grad_hooks for p in model.parameters())


def test_the_measured_graph_is_valid_at_any_rank_count(measured):
    profile, _, _ = measured
    for ranks in (1, 2, 7):
        graph = job_graph(profile, ranks, iterations=2)
        validate(graph)
        nodes = graph.ranks[0].nodes
        assert len(nodes) == 2 * (2 * len(LAYERS) + len(profile.buckets) + 1)
        assert sum(n.nbytes for n in nodes if isinstance(n, CollectiveNode)) == 2 * profile.param_bytes
        assert sum(n.duration_s for n in nodes if isinstance(n, ComputeNode) and ".fwd." in n.name) == pytest.approx(
            2 * sum(x.forward_s for x in profile.layers))


def _rounded(graph: Any) -> dict[str, Any]:
    """The plain form with each duration as a trace holds it (whole microseconds) and no file names."""
    d = to_dict(graph)
    for r in d["ranks"]:
        r["source"] = ""
        for n in r["nodes"]:
            if "duration_s" in n:
                n["duration_s"] = round(n["duration_s"] * 1e6) / 1e6
    d["name"] = ""
    return d


def test_the_command_writes_chakra_traces_that_read_back_equal(tmp_path, capsys):
    _torch()
    from gradswitch.workload.chakra import read_traces

    prefix = tmp_path / "traces" / "small"
    assert main(["trace-model", "--model", f"{__name__}:make_model", "--batch", f"{__name__}:make_batch",
                 "--ranks", "3", "--iterations", "2", "--steps", "2", "--bucket-mb", str(BUCKET_MB),
                 "--device", "cpu", "--out", str(prefix)]) == 0
    out = capsys.readouterr().out
    assert "8 layers" in out and "21064 gradient bytes" in out, out
    assert sorted(p.name for p in prefix.parent.iterdir()) == [
        "small.0.et", "small.1.et", "small.2.et", "small.profile.json"]
    profile = ModelProfile.from_dict(json.loads((tmp_path / "traces" / "small.profile.json").read_text()))
    assert [x.name for x in profile.layers] == LAYERS
    back = read_traces(prefix)
    assert _rounded(back) == _rounded(job_graph(profile, 3, 2))
    # the profile builds the job again at another rank count, without measuring
    again = tmp_path / "again" / "small"
    assert main(["trace-model", "--from-profile", str(tmp_path / "traces" / "small.profile.json"), "--ranks", "5",
                 "--out", str(again)]) == 0
    assert read_traces(again).world_size == 5


def test_a_parameter_the_model_holds_itself_is_counted_and_ready_after_a_layer():
    """A parameter of a module with children (here the model's own output scale) belongs to no layer's
    module: its gradient is ready after the backward in progress when it is accumulated."""
    torch = _torch()
    from gradswitch.workload.pytorch.measure import measure_model

    class Scaled(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(6, 16)
            self.fc2 = torch.nn.Linear(16, 4)
            self.scale = torch.nn.Parameter(torch.ones(4))

        def forward(self, x: Any) -> Any:
            return self.fc2(torch.relu(self.fc1(x))) * self.scale

    model = Scaled()
    profile = measure_model(model, {"x": torch.randn(3, 6)}, model_name="Scaled", steps=2, warmup=1, device="cpu")
    assert [x.name for x in profile.layers] == ["fc1", "fc2"]
    assert profile.param_bytes == sum(b.nbytes for b in profile.buckets) == (6 * 16 + 16 + 16 * 4 + 4 + 4) * 4
    # the scale's gradient is accumulated before fc2's backward starts (the product is the last operation):
    # it counts with the first layer of the backward
    assert [x.param_bytes for x in profile.layers] == [(6 * 16 + 16) * 4, (16 * 4 + 4 + 4) * 4]
    (bucket,) = profile.buckets  # DDP's default cap: one bucket
    assert "scale" in bucket.params and bucket.ready_after == "fc1"
    assert profile.batch == "{x: (3, 6) float32}"
    validate(job_graph(profile, 2))


@pytest.mark.parametrize(("device", "message"), [
    ("gpu", "device 'gpu': give auto, cpu, cuda or cuda:N"),
    ("cuda", "device 'cuda': this torch sees no CUDA device; give --device cpu (or auto)"),
])
def test_a_device_that_is_not_there_is_one_line(tmp_path, capsys, monkeypatch, device, message):
    torch = _torch()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # what a machine without CUDA sees
    assert main(["trace-model", "--model", f"{__name__}:make_model", "--input-shape", "4,3,8,8", "--device", device,
                 "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not list(tmp_path.iterdir())


def test_one_group_per_process_and_another_is_refused_in_one_line():
    """measure_model makes its world-size-1 group once and uses it again (gloo can hang when a group is made
    again after destroy_process_group); a group it did not make, or for another backend, is refused."""
    _torch()
    import torch.distributed as dist

    from gradswitch.workload.pytorch.measure import world_of_one
    from gradswitch.workload.pytorch.profile import ProfileError

    world_of_one("gloo")
    group = dist.group.WORLD
    world_of_one("gloo")
    assert dist.group.WORLD is group and dist.get_world_size() == 1
    with pytest.raises(ProfileError, match=r"already initialized in this process \(for gloo, not nccl\); measure"):
        world_of_one("nccl")
