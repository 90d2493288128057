"""What a job runs, as data: written by the experiment runner, read by every worker process."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gradswitch.formats import check_format
from gradswitch.protocol.choice import Choice
from gradswitch.protocol.netreduce import DEFAULT_CREDITS
from gradswitch.roce.qp import Mode
from gradswitch.workload.dlcp import DlcpPolicy


class Algorithm(Choice):
    RING = "ring"  # ring all-reduce between the workers
    PS = "ps"  # parameter servers (PHub-style keys)
    NETREDUCE = "netreduce"  # the switches sum the workers' messages


class DType(Choice):
    INT32 = "int32"  # exact
    FLOAT32 = "float32"  # converted to int32 on the wire (gradswitch/workload/floats.py)


class FloatMode(Choice):
    FIXED = "fixed"  # one fixed-point scale
    EXPONENT = "exponent"  # a shared exponent per block (SwitchML-style)


class Role(Choice):
    WORKER = "worker"
    SERVER = "server"


@dataclass(frozen=True)
class Node:
    """One worker or server process: its id in the job, its host and address."""

    node_id: int
    role: Role
    host: str
    ip: str
    ifname: str = "eth0"


@dataclass(frozen=True)
class Crash:
    """Fault injection for experiments and tests: node `node` dies abruptly (no clean-up, no
    result) after iteration `after`, like a crashed worker; its writes of that iteration delivered first, so
    that every peer completes the iteration it ended (the iterations kept are then `after` + 1 on either engine)."""

    node: int
    after: int


class Device(Choice):
    V100 = "v100"  # NVIDIA V100 SXM2
    A100 = "a100"  # NVIDIA A100 SXM4


class Precision(Choice):
    FP32 = "fp32"  # single precision (TF32 tensor cores on A100, PyTorch's default there)
    AMP = "amp"  # mixed precision: FP16 tensor cores, FP32 master weights


class Sync(Choice):
    """When the next iteration's forward pass may use a layer's reduced gradient."""

    ITERATION = "iteration"  # after every gradient is back (PyTorch DDP, Horovod)
    LAYER = "layer"  # layer l as soon as its gradient is back and layer l-1's forward is done (P3, ByteScheduler)


class Scheduling(Choice):
    """Which gradients a worker starts reducing first."""

    FIFO = "fifo"  # in the order backward produces them, in buckets (DDP)
    PRIORITY = "priority"  # front layers first, tensors partitioned so they overtake (P3, ByteScheduler)


@dataclass(frozen=True)
class Emulation:
    """The real cluster a run emulates: its link rate, its GPUs and batch per GPU.

    In a TOML spec `emulate = { link_gbps = 25, device = "v100", batch = 64 }`.
    """

    link_gbps: float = 25.0  # the real cluster's link rate
    device: Device = Device.V100
    precision: Precision = Precision.FP32
    batch: int = 64  # samples per GPU per iteration
    compute_scale: float = 1.0  # 1: the modelled computation; 0: none (communication only)


def dilation(scale: float, link_gbps: float, testbed_mbps: float) -> float:
    """D = s R / r: how much slower the testbed runs than the emulated cluster, so that computation
    stretched by D keeps the real ratio of computation to communication (docs/training.md)."""
    return scale * link_gbps * 1000.0 / testbed_mbps


JOB_FORMAT = 1  # job<id>.json's format (gradswitch/formats.py; one written before it had one reads as 1)
MAX_IN_FLIGHT = 64  # a training job's reductions at once, at most (spec.algorithm.in_flight, export-et --in-flight)


@dataclass(frozen=True)
class Training:
    """A job that trains the way frameworks do (gradswitch/hosts/iteration.py), with the emulated cluster's
    computation."""

    emulate: Emulation
    dilation: float  # testbed seconds per real second (gradswitch.workload.job.dilation)
    sync: Sync = Sync.ITERATION
    scheduling: Scheduling = Scheduling.FIFO
    bucket_bytes: int = 25 << 20  # testbed bytes per bucket (DDP's 25 MB times the scale)
    partition_bytes: int = 4 << 20  # priority: testbed bytes per partition
    warmup: int = 1  # iterations left out of the steady-state figures
    in_flight: int = 4  # reductions started and not complete, at most

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Training:
        e = dict(raw["emulate"])
        e["device"], e["precision"] = Device(e["device"]), Precision(e["precision"])
        return cls(**{**raw, "emulate": Emulation(**e), "sync": Sync(raw["sync"]),
                      "scheduling": Scheduling(raw["scheduling"])})


def job_dir(run_dir: Path, job_id: int) -> Path:
    """Where a job's nodes meet in a run directory (their ready/go/progress/result files and signals)."""
    return run_dir / f"job{job_id}"


def job_file(out_dir: Path, job_id: int) -> Path:
    """A job's configuration file in a run's output directory (what `python -m gradswitch.hosts.main` reads)."""
    return out_dir / f"job{job_id}.json"


@dataclass(frozen=True)
class JobConfig:
    algo: Algorithm
    nodes: tuple[Node, ...]
    iterations: int = 10
    workload: str = "synthetic"  # synthetic, or a model profile name (gradswitch/workload/models/*.json)
    size_bytes: int = 8 << 20  # synthetic: bytes of the gradient tensor
    scale: float = 1.0  # model profiles: fraction of every layer's size kept (to fit BMv2's speed)
    dtype: DType = DType.INT32
    float_mode: FloatMode = FloatMode.FIXED
    fixed_point_bits: int = 20  # fixed: float32 -> int32 scale 2**bits
    exponent_floor: int = -24  # exponent: smallest shared block exponent
    transport: Mode = Mode.GBN  # go-back-N (RoCE) or selective repeat (IRN)
    mtu: int = 1024
    window: int = 64  # packets in flight per QP
    rto: float = 0.02  # first retransmission timeout (s)
    # DLCP with reordering switches: how late a packet may arrive behind a later packet of its message
    # (a full shaped queue's time, behind higher priorities or on a busier sprayed path); None: rto / 4
    reorder_window: float | None = None
    retry_limit: int = 7
    ps_key_bytes: int = 64 << 10  # parameter server: bytes per key (PHub-style fine-grained chunks)
    credits: int = DEFAULT_CREDITS  # NetReduce: messages in flight per worker
    netreduce_k: int | None = None  # NetReduce k of N: a sum leaves the switch once k workers are in (None: all)
    netreduce_deadline_us: int = 0  # ... or this long after a cell's first contribution, with fewer (0: never)
    dlcp: DlcpPolicy | None = None  # DLCP marking and zero-filling of trimmed packets on the hosts (None: off)
    crash: Crash | None = None
    # None: all-reduce every tensor in a row, no computation (gradswitch/hosts/loops.py)
    training: Training | None = None
    seed: int = 1
    iteration_timeout: float = 120.0  # an iteration that takes longer fails the run
    start_timeout: float = 60.0  # all processes must be ready within this
    linger_timeout: float = 10.0  # after finishing, keep answering peers at most this long
    job_id: int = 1

    def __post_init__(self) -> None:
        if self.workload == "train-digits" and self.dtype != DType.FLOAT32:
            raise ValueError("the train-digits workload trains a float model: use dtype float32")

    @property
    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == Role.WORKER]

    @property
    def servers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == Role.SERVER]

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def to_json(self) -> str:
        return json.dumps({"format": JOB_FORMAT, **asdict(self)}, indent=2)

    @classmethod
    def from_json(cls, text: str, where: str = "a job's configuration") -> JobConfig:
        """The configuration in `text`; FormatError (naming `where`) when it is of another format than this code's
        (one written before configurations had `format` reads as format 1)."""
        raw: dict[str, Any] = dict(check_format(json.loads(text), where, "job configuration", JOB_FORMAT,
                                                missing_is=1))
        raw.pop("format", None)
        raw["nodes"] = tuple(Node(n["node_id"], Role(n["role"]), n["host"], n["ip"], n["ifname"])
                             for n in raw["nodes"])
        raw["algo"] = Algorithm(raw["algo"])
        raw["dtype"] = DType(raw["dtype"])
        raw["float_mode"] = FloatMode(raw["float_mode"])
        raw["transport"] = Mode(raw["transport"])
        raw["dlcp"] = DlcpPolicy(**raw["dlcp"]) if raw["dlcp"] is not None else None
        raw["crash"] = Crash(**raw["crash"]) if raw["crash"] is not None else None
        raw["training"] = Training.from_dict(raw["training"]) if raw.get("training") is not None else None
        return cls(**raw)

    def save(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def load(cls, path: Path) -> JobConfig:
        return cls.from_json(path.read_text(), str(path))
