"""gradswitch.experiment.stats.spread: the one spread the summaries and the benchmarks write."""

from __future__ import annotations

import pytest

from gradswitch.experiment.stats import spread, spread_known


def test_spread_is_min_median_max_and_count() -> None:
    assert spread([3.0, 1.0, 2.0, 10.0]) == {"min": 1.0, "median": 2.5, "max": 10.0, "n": 4}


def test_spread_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        spread([])


def test_spread_known_skips_unknown_values() -> None:
    assert spread_known([None, 2.0, None, 4.0]) == {"min": 2.0, "median": 3.0, "max": 4.0, "n": 2}
    assert spread_known([None, None]) is None
