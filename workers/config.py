"""What a job runs, as data: written by the experiment runner, read by every worker process."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

ALGORITHMS = ("ring", "ps", "netreduce")


@dataclass(frozen=True)
class Node:
    """One worker or server process: its id in the job, its host and address."""

    node_id: int
    role: str  # "worker" or "server"
    host: str
    ip: str
    ifname: str = "eth0"


@dataclass(frozen=True)
class JobConfig:
    algo: str  # ring | ps | netreduce
    nodes: tuple[Node, ...]
    iterations: int = 10
    workload: str = "synthetic"  # synthetic, or a model profile name (workers/models/*.json)
    size_bytes: int = 8 << 20  # synthetic: bytes of the gradient tensor
    scale: float = 1.0  # model profiles: fraction of every layer's size kept (to fit BMv2's speed)
    dtype: str = "int32"  # int32 (exact) or float32 (converted to int32, see workers/floats.py)
    float_mode: str = "fixed"  # float32: "fixed" scale or a shared "exponent" per 64-value block
    fixed_point_bits: int = 20  # fixed: float32 -> int32 scale 2**bits
    exponent_floor: int = -24  # exponent: smallest shared block exponent
    transport: str = "gbn"  # gbn (RoCE) or sr (IRN)
    mtu: int = 1024
    window: int = 64  # packets in flight per QP
    rto: float = 0.02  # first retransmission timeout (s)
    retry_limit: int = 7
    ps_key_bytes: int = 64 << 10  # parameter server: bytes per key (PHub-style fine-grained chunks)
    seed: int = 1
    iteration_timeout: float = 120.0  # an iteration that takes longer fails the run
    start_timeout: float = 60.0  # all processes must be ready within this
    linger_timeout: float = 10.0  # after finishing, keep answering peers at most this long
    job_id: int = 1
    extra: dict[str, object] = field(default_factory=dict)  # algorithm-specific (e.g. netreduce)

    def __post_init__(self) -> None:
        if self.algo not in ALGORITHMS:
            raise ValueError(f"algorithm {self.algo!r} is not one of {ALGORITHMS}")
        if self.dtype not in ("int32", "float32"):
            raise ValueError(f"dtype {self.dtype!r} must be int32 or float32")
        if self.workload == "train-digits" and self.dtype != "float32":
            raise ValueError("the train-digits workload trains a float model: use dtype float32")
        if self.float_mode not in ("fixed", "exponent"):
            raise ValueError(f"float_mode {self.float_mode!r} must be fixed or exponent")
        if self.transport not in ("gbn", "sr"):
            raise ValueError(f"transport {self.transport!r} must be gbn or sr")

    @property
    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "worker"]

    @property
    def servers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "server"]

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> JobConfig:
        raw = json.loads(text)
        raw["nodes"] = tuple(Node(**n) for n in raw["nodes"])
        return cls(**raw)

    def save(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def load(cls, path: Path) -> JobConfig:
        return cls.from_json(path.read_text())
