"""A small PyTorch model and batch for `gradswitch trace-model --model tests/small_model.py:make_model`
in the tests that replay a traced model on both backends."""

from __future__ import annotations

from typing import Any


def make_model() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 8 * 8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def make_batch() -> Any:
    import torch

    return torch.randn(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))
