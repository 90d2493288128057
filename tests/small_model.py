"""A small PyTorch model and batch for `gradswitch trace-model --model tests/small_model.py:make_model`
in the tests that replay a traced model on both backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any


def make_model() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 8 * 8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def make_batch() -> Any:
    import torch

    return torch.randn(16, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def trace_small_model(prefix: Path, ranks: int = 4) -> None:
    """`gradswitch trace-model` of this model on the CPU, as a user types it: PREFIX.{rank}.et at `ranks` ranks
    (2 iterations). Skips when torch is absent, fails instead with GRADSWITCH_REQUIRE_TORCH=1."""
    import importlib.util

    from tests.require import missing

    if importlib.util.find_spec("torch") is None:
        missing("torch", "torch is not installed: pip install torch==2.13.0")
    model = Path(__file__)
    made = subprocess.run([sys.executable, "-m", "gradswitch.cli.main", "trace-model", "--model", f"{model}:make_model",
                           "--batch", f"{model}:make_batch", "--ranks", str(ranks), "--iterations", "2", "--steps",
                           "3", "--device", "cpu", "--out", str(prefix)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
