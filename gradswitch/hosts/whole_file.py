"""Files a host process writes for the runner to read while it runs (progress, slowdown, fallback agreements):
written whole, a temporary file renamed over the old one, so that a reader (or a process killed mid-write)
never leaves half of one. A progress file truncated by a SIGKILL between its open and its write read as 0
iterations completed and lost the killed worker's record."""

from __future__ import annotations

import os
from pathlib import Path


def write_whole(path: Path, text: str) -> None:
    """Replace `path` by `text` at once: a reader sees the old file or the new one, never part of either."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def progress_path(run_dir: Path, node_id: int) -> Path:
    """Where a worker says how many iterations it completed (read should it be killed)."""
    return run_dir / f"progress-{node_id}"


def write_progress(run_dir: Path, node_id: int, done: int) -> None:
    """A worker completed `done` iterations."""
    write_whole(progress_path(run_dir, node_id), str(done))
