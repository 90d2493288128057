"""Parameter server in PHub's spirit: fine-grained keys sharded across K server processes.

Each tensor of a step is cut into keys of `ps_key_bytes`; keys are dealt round-robin to the
servers. A worker pushes every key to its server (RDMA WRITE with immediate into the slot
reserved for that worker and key); a server that has all N pushes of a key sums them and
writes the sum into every worker's result buffer (the pull), tagged with the key. A worker's
step is done when every key has come back.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from gradswitch.hosts.comm import Comm, OpGen
from gradswitch.hosts.loops import make_loop
from gradswitch.workload.dlcp import packet_means
from gradswitch.workload.encoding import job_profile
from gradswitch.workload.gradients import FloatArray, Int32Array, from_wire, to_wire
from gradswitch.workload.job import JobConfig
from gradswitch.workload.plan import op_mark
from gradswitch.workload.plan import plan as plan_of

RKEY_SERVER = 0x50535256  # "PSRV"
RKEY_WORKER = 0x5053574B  # "PSWK"


@dataclass(frozen=True)
class Unit:
    """What one reduction of a step moves: a profile tensor (all-reduce loop) or a training op's bucket."""

    elements: int
    mark: int  # the profile index whose DLCP class its writes carry


def units_of(cfg: JobConfig) -> list[Unit]:
    """The reductions of one step, in order: the profile's tensors, or the training plan's ops."""
    if cfg.training is None:
        return [Unit(t.elements, i) for i, t in enumerate(job_profile(cfg).tensors)]
    return [Unit(op.elements, op_mark(cfg, op)) for op in plan_of(cfg).ops]


@dataclass(frozen=True)
class Key:
    key_id: int  # position in the step, 0..
    tensor: int  # the unit (reduction) it belongs to
    lo: int  # element range within the tensor
    hi: int
    server: int  # node id
    server_offset: int  # bytes from the start of the server's per-worker block
    step_offset: int  # bytes from the start of a worker's result buffer

    @property
    def nbytes(self) -> int:
        return (self.hi - self.lo) * 4


def plan(comm: Comm) -> tuple[list[Key], dict[int, int], int]:
    """Keys of one step, bytes per worker block on each server, bytes of a whole step."""
    cfg = comm.cfg
    servers = [s.node_id for s in cfg.servers]
    if not servers:
        raise ValueError("the parameter server algorithm needs at least one server node")
    per_key = max(1, cfg.ps_key_bytes // 4)
    keys: list[Key] = []
    server_bytes = {s: 0 for s in servers}
    step_bytes = 0
    for t_index, t in enumerate(units_of(cfg)):
        for lo in range(0, t.elements, per_key):
            hi = min(t.elements, lo + per_key)
            server = servers[len(keys) % len(servers)]
            key = Key(len(keys), t_index, lo, hi, server, server_bytes[server], step_bytes)
            keys.append(key)
            server_bytes[server] += key.nbytes
            step_bytes += key.nbytes
    if len(keys) >= 1 << 24:
        raise ValueError("too many keys for 24-bit tags; raise ps_key_bytes")
    return keys, server_bytes, step_bytes


def tag(seq: int, key_id: int) -> int:
    return (seq & 0xFF) << 24 | key_id


class PsWorker:
    def __init__(self, comm: Comm) -> None:
        self.comm = comm
        self.keys, self.server_bytes, step_bytes = plan(comm)
        self.workers = [w.node_id for w in comm.cfg.workers]
        self.region = comm.register(RKEY_WORKER, max(4, 2 * step_bytes))
        self.step_bytes = step_bytes
        self.loop = make_loop(comm, self)
        self.profile = self.loop.profile
        self.by_tensor: dict[int, list[Key]] = {}
        for k in self.keys:
            self.by_tensor.setdefault(k.tensor, []).append(k)
            comm.qp(k.server)

    def allreduce(self, iteration: int, index: int, data: Int32Array) -> Int32Array:
        return self.comm.drive(self.reduce_op(iteration, index, iteration, data, index), f"tensor {index}")

    def reduce_op(self, iteration: int, unit: int, seq: int, data: Int32Array, mark: int) -> OpGen:
        """Push every key of reduction `unit` of this iteration, then wait for every pull."""
        me = self.workers.index(self.comm.me.node_id)
        keys = self.by_tensor[unit]
        marks = self.comm.tag_for(mark, self.profile, iteration)  # a push: this worker's own gradient
        for k in keys:
            va = (iteration % 2) * len(self.workers) * self.server_bytes[k.server] \
                + me * self.server_bytes[k.server] + k.server_offset
            self.comm.write(k.server, to_wire(data[k.lo : k.hi]), va, RKEY_SERVER, tag(iteration, k.key_id), marks)
        out = np.empty_like(data)
        for k in keys:
            imm = tag(iteration, k.key_id)
            if not self.comm.arrived(k.server, imm):
                yield partial(self.comm.arrived, k.server, imm)
            self.comm.take(k.server, imm)
            va = (iteration % 2) * self.step_bytes + k.step_offset
            out[k.lo : k.hi] = from_wire(self.comm.read(self.region, va, k.nbytes), k.hi - k.lo)
        return out


class PsServer:
    def __init__(self, comm: Comm) -> None:
        self.comm = comm
        self.keys, self.server_bytes, self.step_bytes = plan(comm)
        self.mine = [k for k in self.keys if k.server == comm.me.node_id]
        self.units = units_of(comm.cfg)
        self.workers = [w.node_id for w in comm.cfg.workers]
        self.profile = job_profile(comm.cfg)
        block = self.server_bytes[comm.me.node_id]
        self.block = block
        self.region = comm.register(RKEY_SERVER, max(4, 2 * len(self.workers) * block))
        for w in self.workers:
            comm.qp(w)

    def serve(self) -> int:
        """Aggregate every key of every iteration; returns the number of keys served.

        DLCP: a server's pulls are classed against magnitude thresholds from the pushes it received
        in the previous iteration (in the first, those received before its first pull), each pull per
        contribution (its sum over N)."""
        served = 0
        previous: list[FloatArray] = []  # per-packet mean |v| of the previous iteration's pushes
        for seq in range(self.comm.cfg.iterations):
            pending = list(self.mine)
            pushed: list[FloatArray] = []
            while pending:
                self.comm.wait_any(partial(self._any_complete, seq, pending),
                                   f"pushes of iteration {seq} ({len(pending)} keys left)")
                ready = [k for k in pending if self._complete(seq, k)]
                for k in ready:
                    total = np.zeros(k.hi - k.lo, dtype=np.int32)
                    for i, w in enumerate(self.workers):
                        self.comm.tags[self.comm.qp(w).cfg.qpn].pop(tag(seq, k.key_id))
                        va = ((seq % 2) * len(self.workers) + i) * self.block + k.server_offset
                        push = from_wire(self.comm.read(self.region, va, k.nbytes), k.hi - k.lo)
                        total += push
                        if self.comm.dlcp is not None:
                            pushed.append(packet_means(push, self.comm.values_per_packet))
                    if self.comm.dlcp is not None and seq not in self.comm.magnitudes:
                        self.comm.set_magnitude_means(seq, previous or pushed)
                    marks = self.comm.tag_for(self.units[k.tensor].mark, self.profile, seq, len(self.workers))
                    for w in self.workers:
                        va = (seq % 2) * self.step_bytes + k.step_offset
                        self.comm.write(w, to_wire(total), va, RKEY_WORKER, tag(seq, k.key_id), marks)
                    pending.remove(k)
                    served += 1
            previous = pushed
        self.comm.drain()
        return served

    def _any_complete(self, seq: int, keys: list[Key]) -> bool:
        return any(self._complete(seq, k) for k in keys)

    def _complete(self, seq: int, k: Key) -> bool:
        t = tag(seq, k.key_id)
        return all(t in self.comm.tags[self.comm.qp(w).cfg.qpn] for w in self.workers)
