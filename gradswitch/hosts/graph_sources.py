"""The data source (gradswitch/hosts/graph_data.py) of a graph job's payload (GraphJob.payload)."""

from __future__ import annotations

from collections.abc import Mapping

from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.graph_data import DataSource, SyntheticData
from gradswitch.hosts.graph_digits import DigitsData
from gradswitch.hosts.graph_gradients import GradientData
from gradswitch.workload.graph_payload import PayloadKind
from gradswitch.workload.job import JobConfig


def data_source(payload: PayloadKind, cfg: JobConfig, rank: int, ops: Mapping[int, Op]) -> DataSource:
    """The data source of a job's payload for rank `rank` and its operations (ValueError, one line, for a graph
    the payload cannot fill)."""
    if payload == PayloadKind.SYNTHETIC:
        return SyntheticData(cfg.seed)
    if payload == PayloadKind.DIGITS:
        return DigitsData(cfg, rank, ops)
    if payload == PayloadKind.GRADIENTS:
        return GradientData(cfg, rank, ops)
    raise ValueError(f"payload {payload!r}: the hosts carry {', '.join(str(k) for k in PayloadKind)}")
