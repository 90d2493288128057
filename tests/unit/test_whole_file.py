"""A host's progress file is written whole: a reader (the runner, or the record of a worker killed mid-write) never
sees it empty or half written. With a plain truncate-then-write a SIGKILL between the two left an empty file, read as
no iteration completed (a killed worker's kept iterations lost)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gradswitch.hosts.whole_file import progress_path, write_progress, write_whole

WRITER = """
import sys
from pathlib import Path
from gradswitch.hosts.whole_file import write_progress
run_dir = Path(sys.argv[1])
i = 0
while True:
    i += 1
    write_progress(run_dir, 3, i)
"""


def test_a_whole_file_replaces_the_old_one_and_leaves_no_temporary(tmp_path: Path) -> None:
    write_whole(tmp_path / "f", "one")
    write_whole(tmp_path / "f", "two")
    assert (tmp_path / "f").read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_progress_file_read_while_written_or_after_a_kill_is_always_a_count(tmp_path: Path) -> None:
    """A writer rewriting its progress as fast as it can, read meanwhile, then SIGKILLed at a moment of no choosing:
    every read (and the file it leaves) is a whole count, never empty, never going back."""
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    path = progress_path(tmp_path, 3)
    seen: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while (not seen or seen[-1] < 20_000) and time.monotonic() < deadline:
            try:
                text = path.read_text()
            except FileNotFoundError:
                assert not seen, "the progress file went away"
                continue
            seen.append(int(text))  # an empty or partial file fails here
        assert seen and seen[-1] >= 20_000, "the writer did not get far enough within 30 s"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert seen == sorted(seen)
    assert int(path.read_text()) >= seen[-1]
    write_progress(tmp_path, 4, 7)
    assert progress_path(tmp_path, 4).read_text() == "7"
