"""Figures a person can read: no committed image is wider than a screen at its natural size, and the
comparison plots lay many panels, or many links, out in a grid instead of one long row."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from gradswitch.experiment.plots import grid, plot_figures, plot_link_loads

ROOT = Path(__file__).resolve().parents[2]
MAX_WIDTH = 1600  # pixels: about a screen's width, where 8-point labels at 110 dpi can still be read
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, which the format puts first."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def committed_pngs() -> list[Path]:
    """The project's PNGs: git's list in a checkout, else every PNG but build outputs, runs and environments."""
    git = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.png"], cwd=ROOT, capture_output=True,
                         text=True)
    if git.returncode == 0:
        return [ROOT / name for name in git.stdout.splitlines() if (ROOT / name).exists()]
    skip = {".git", ".venv", "build", "runs"}
    return sorted(p for p in ROOT.rglob("*.png") if not skip & set(p.relative_to(ROOT).parts))


def test_the_repository_has_images_to_check():
    assert any(p.parent.name == "results" for p in committed_pngs()), "no PNG under bench/results/: git ls-files?"


@pytest.mark.parametrize("path", committed_pngs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_image_is_wider_than_a_screen(path: Path):
    width, height = png_size(path)
    assert width <= MAX_WIDTH, (f"{path.relative_to(ROOT)} is {width}x{height} px, wider than {MAX_WIDTH}: lay its "
                                f"panels out in a grid (gradswitch/experiment/plots.py) and draw it again")


def test_panels_fill_rows_of_at_most_three():
    assert [grid(n) for n in (1, 2, 3, 4, 5, 7, 9)] == [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 3), (3, 3)]


def _summary(runs: int, keys: list[str]) -> dict[str, dict[str, object]]:
    return {f"run-{i}": {k: float(i + 1) for k in keys} for i in range(runs)}


def test_seven_figures_of_eleven_runs_fit_a_screen(tmp_path):
    keys = [f"figure_{k}" for k in range(7)]
    path = tmp_path / "figures.png"
    assert plot_figures(_summary(11, keys), keys, path)
    width, height = png_size(path)
    assert width <= MAX_WIDTH and height > width / 2, f"{width}x{height}: not a grid"


def test_the_loads_of_sixteen_links_over_eleven_runs_fit_a_screen(tmp_path):
    links = [f"leaf{a}->spine{b}" for a in range(1, 5) for b in range(1, 5)]
    reports = {f"run-{i}": [{"link_loads": {link: 0.1 * (i % 10) for link in links}}] for i in range(11)}
    path = tmp_path / "links.png"
    assert plot_link_loads(reports, path)
    width, height = png_size(path)
    assert width <= MAX_WIDTH and height > 440, f"{width}x{height}: the links in one long row"
