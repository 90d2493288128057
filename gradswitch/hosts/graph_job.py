"""What a graph run's host processes read (RUN_DIR/job<N>.json) and what each writes back
(RUN_DIR/graph-<rank>.json): the transport's settings as a JobConfig (rank r is node r), the job's
execution graphs, the run's dilation, and the NetReduce job of each collective type the switches run
(gradswitch/hosts/collectives/in_network.py; none when the hosts run everything), and what its communication carries
(gradswitch/workload/graph_payload.py: synthetic data, or the digits MLP's gradients); back, the rank's node timings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradswitch.formats import check_format
from gradswitch.workload.graph import CollectiveKind, JobGraph, from_dict, to_dict
from gradswitch.workload.graph_payload import PayloadKind
from gradswitch.workload.graph_timing import TIMING_FORMAT, GraphRun
from gradswitch.workload.job import JobConfig

# job<N>.json of a graph run: `format` beside the job (which carries its own, JOB_FORMAT) and its graph (GRAPH_FORMAT);
# a job file written before it had one reads as 1
GRAPH_JOB_FORMAT = 1


@dataclass(frozen=True)
class GraphJob:
    job: JobConfig  # nodes 0..N-1 are ranks 0..N-1; its seed seeds the inputs, its iteration_timeout the graph
    graph: JobGraph
    dilation: float = 1.0  # clock seconds per emulated second (compute waits are stretched by it)
    in_network: dict[CollectiveKind, int] = field(default_factory=dict)  # collective type -> its NetReduce job
    payload: PayloadKind = PayloadKind.SYNTHETIC  # what the communication nodes carry (gradswitch/hosts/graph_data.py)

    def to_json(self) -> str:
        return json.dumps({"format": GRAPH_JOB_FORMAT, "job": json.loads(self.job.to_json()),
                           "graph": to_dict(self.graph), "dilation": self.dilation,
                           "in_network": {k.value: j for k, j in self.in_network.items()},
                           "payload": self.payload.value}, indent=1)

    @classmethod
    def from_json(cls, text: str, where: str = "graph job") -> GraphJob:
        """FormatError, naming `where`: of another format than GRAPH_JOB_FORMAT."""
        raw: dict[str, Any] = check_format(json.loads(text), where, "graph run's job", GRAPH_JOB_FORMAT,
                                              missing_is=1)
        return cls(JobConfig.from_json(json.dumps(raw["job"])), from_dict(raw["graph"]), float(raw["dilation"]),
                   {CollectiveKind(k): int(j) for k, j in raw.get("in_network", {}).items()},
                   PayloadKind(raw.get("payload", PayloadKind.SYNTHETIC.value)))

    def save(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def load(cls, path: Path) -> GraphJob:
        return cls.from_json(path.read_text(), str(path))


def timing_path(run_dir: Path, rank: int, partial: bool = False) -> Path:
    """A rank's node timings: graph-<rank>.json once it ran its graph; graph-<rank>.partial.json, the nodes it
    ended, when it stopped before the end (gradswitch/hosts/graph_main.py keep_partial)."""
    return run_dir / (f"graph-{rank}.partial.json" if partial else f"graph-{rank}.json")


def write_timing(run_dir: Path, rank: int, run: GraphRun, partial: bool = False) -> None:
    timing_path(run_dir, rank, partial).write_text(json.dumps(run.to_dict()))


def read_timing(run_dir: Path, rank: int, partial: bool = False) -> GraphRun:
    """A rank's node timings (FormatError, naming the file: of another format than TIMING_FORMAT)."""
    path = timing_path(run_dir, rank, partial)
    return GraphRun.from_dict(check_format(json.loads(path.read_text()), path, "graph rank's timings", TIMING_FORMAT))
