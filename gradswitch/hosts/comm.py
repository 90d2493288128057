"""What every algorithm shares: QPs by peer, tagged writes, and driving reductions.

Conventions (so no connection set-up exchange is needed, every process derives them):
- QP numbers: gradswitch/protocol/qpn.py, qpn(local, remote, job).
- Every WRITE that completes a step carries immediate data naming it; a reduction waits until
  that exact tag has arrived (`Comm.arrived`, then `Comm.take`), whatever the arrival order of
  other tags, so several reductions can be in flight at once.
- A reduction is a generator that yields what it waits for (gradswitch/hosts/ring.py, ps.py, netreduce.py):
  `Comm.drive` runs one to its end (the all-reduce loop), `Comm.step` lets a scheduler run several
  while the emulated GPU computes (gradswitch/hosts/iteration.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Protocol

from gradswitch.protocol.qpn import qpn
from gradswitch.roce.engine import Engine, JobAborted, QueuePair
from gradswitch.roce.qp import MemoryRegion, Mode, QpConfig, RecvCompletion
from gradswitch.workload.dlcp import Magnitudes, Marker, Tag, layer_class
from gradswitch.workload.gradients import FloatArray, Int32Array, Profile
from gradswitch.workload.job import JobConfig, Node

Wait = Callable[[], bool]  # what a reduction in progress waits for (true: resume it)
OpGen = Generator[Wait, None, Int32Array]  # a non-blocking all-reduce: yields what it waits for, returns the sum


class Collective(Protocol):
    """An all-reduce algorithm of a worker: blocking per tensor, or as a non-blocking reduction."""

    def allreduce(self, iteration: int, index: int, data: Int32Array) -> Int32Array: ...

    def reduce_op(self, iteration: int, unit: int, seq: int, data: Int32Array, mark: int) -> OpGen: ...


class Comm:
    """One process's engine plus its QPs to the other nodes of the job."""

    def __init__(self, cfg: JobConfig, me: Node, engine: Engine) -> None:
        self.cfg = cfg
        self.me = me
        self.engine = engine
        self.qps: dict[int, QueuePair] = {}
        self.tags: dict[int, dict[int, RecvCompletion]] = {}  # qpn -> imm -> completion
        self.acked: dict[int, set[int]] = {}  # qpn -> ids of work requests fully acknowledged
        self.dlcp = cfg.dlcp
        self.marker = Marker(self.dlcp) if self.dlcp is not None else None
        self.magnitudes: dict[int, Magnitudes] = {}  # iteration -> this node's magnitude thresholds (DLCP)
        self.zero_filled = 0  # packets this node received as zeros (trimmed by a switch, within the budget)
        self.abort_file: Path | None = None  # written by the runner when a node of the job failed
        self._next_abort_check = 0.0
        # Called at every turn of the transport (step, wait_any): work of an algorithm's own that no reduction
        # waits for (NetReduce's fallback: reading the signal, redoing a reduction for the others).
        self.pollers: list[Callable[[], object]] = []
        # Called after every drain with the number of drains so far (NetReduce's fallback stays for the others).
        self.after_drain: list[Callable[[int], None]] = []
        self.drains = 0

    def qp(self, peer: int, initial_psn: int = 0) -> QueuePair:
        """The QP to a peer node (created on first use; both directions start at initial_psn)."""
        if peer not in self.qps:
            node = self.cfg.node(peer)
            job = self.cfg.job_id
            cfg = QpConfig(qpn=qpn(self.me.node_id, peer, job), remote_qpn=qpn(peer, self.me.node_id, job),
                           mode=self.cfg.transport, mtu=self.cfg.mtu, window=self.cfg.window,
                           ack_every=max(1, self.cfg.window // 4),
                           rto=self.cfg.rto, retry_limit=self.cfg.retry_limit, initial_psn=initial_psn,
                           remote_initial_psn=initial_psn, peer=f"{node.host} ({node.ip})",
                           loss_budget=self.dlcp.loss_budget if self.dlcp and self.dlcp.drop else 0.0,
                           reorder_delay=self.reorder_delay(), order_tolerant=self.order_tolerant)
            self.qps[peer] = self.engine.connect(cfg, node.ip)
            if self.marker is not None:
                self.qps[peer].requester.marker = self.marker
            self.tags[self.qps[peer].cfg.qpn] = {}
            self.acked[self.qps[peer].cfg.qpn] = set()
        return self.qps[peer]

    @property
    def order_tolerant(self) -> bool:
        """DLCP receivers place packets in any order and judge holes at a message's end (selective repeat)."""
        return self.dlcp is not None and self.dlcp.order_tolerant and self.cfg.transport == Mode.SR

    def reorder_delay(self) -> float:
        """How long a hole may be reordering before it is judged: priorities and spraying reorder packets.
        Order-tolerant receivers wait the network's reordering bound after the message's end (the job's
        reorder_window); the previous receivers a quarter of the RTO after the first packet past the hole."""
        if self.dlcp is None or not self.dlcp.reorder:
            return 0.0
        if self.order_tolerant and self.cfg.reorder_window is not None:
            return self.cfg.reorder_window
        return self.cfg.rto / 4

    def register(self, rkey: int, size: int) -> MemoryRegion:
        return self.engine.register(rkey, size)

    @property
    def run_dir(self) -> Path | None:
        """The run directory shared with the runner (where the abort file is); None outside a run."""
        return None if self.abort_file is None else self.abort_file.parent

    def collect(self) -> None:
        """Take the completions of every QP (as a turn of the transport does)."""
        self._collect()

    def _collect(self) -> None:
        for qp in self.qps.values():
            for c in self.engine.recv_completions(qp):
                self.zero_filled += c.zero_filled
                if c.imm is not None:
                    self.tags[qp.cfg.qpn][c.imm] = c
            self.acked[qp.cfg.qpn].update(s.wr_id for s in self.engine.send_completions(qp) if s.ok)

    # ---- DLCP marking ----

    def set_magnitudes(self, iteration: int, contributed: list[Int32Array]) -> None:
        """This node's magnitude thresholds for an iteration, from the int32 values it contributes
        (gradswitch/workload/dlcp.py Magnitudes); nothing without DLCP. Called before the iteration's first write."""
        if self.dlcp is not None:
            self._set_magnitudes(iteration, Magnitudes.of(contributed, self.values_per_packet))

    def set_magnitude_means(self, iteration: int, means: list[FloatArray]) -> None:
        """The same from per-packet mean |v| already computed (a parameter server's pushes)."""
        if self.dlcp is not None:
            self._set_magnitudes(iteration, Magnitudes.of_means(means))

    @property
    def values_per_packet(self) -> int:
        return self.cfg.mtu // 4

    def _set_magnitudes(self, iteration: int, magnitudes: Magnitudes) -> None:
        self.magnitudes[iteration] = magnitudes
        self.magnitudes.pop(iteration - 2, None)  # only the iterations whose writes may still be posted

    def tag_for(self, index: int, profile: Profile, iteration: int, contributions: int = 1) -> Tag:
        """The DLCP marking of a write of tensor `index` of the job's profile in an iteration, whose
        values sum `contributions` workers' gradients."""
        return Tag(layer_class(index, len(profile.tensors)), self.magnitudes.get(iteration), contributions,
                   profile.tensors[index].kind != "exponents")

    def write(self, peer: int, data: bytes, va: int, rkey: int, imm: int | None, tag: Tag | None = None) -> None:
        """One RDMA WRITE (with immediate) of data at the peer's va; `tag`: its DLCP class."""
        self.qp(peer).requester.post_write(data, va, rkey, imm=imm, tag=tag)

    def read(self, region: MemoryRegion, va: int, nbytes: int) -> bytes:
        return bytes(memoryview(region.buffer)[va : va + nbytes])

    def arrived(self, peer: int, imm: int) -> bool:
        """Has the write tagged imm from peer completed (as of the last collection)?"""
        return imm in self.tags[self.qps[peer].cfg.qpn]

    def take(self, peer: int, imm: int) -> RecvCompletion:
        return self.tags[self.qps[peer].cfg.qpn].pop(imm)

    def step(self, max_wait: float, what: str) -> None:
        """One turn of a scheduler that runs several reductions at once: transmit, wait for packets
        (at most max_wait, less when a timer is due), take them all, collect completions; a failed
        QP raises TransportError, another node's failure JobAborted (checked a few times a second)."""
        self.engine.poll(max_wait)
        self._collect()
        for poll in self.pollers:
            poll()
        for qp in self.qps.values():
            qp.check()
        now = time.monotonic()
        if now >= self._next_abort_check:
            self._next_abort_check = now + 0.2
            reason = self.aborted()
            if reason:
                raise JobAborted(f"{self.me.ip}: stopped waiting for {what}: {reason}")

    def drive(self, op: OpGen, what: str) -> Int32Array:
        """Run one reduction to its end, blocking (the all-reduce loop without computation)."""
        try:
            wait = next(op)
            while True:
                self.wait_any(wait, what)
                wait = op.send(None)
        except StopIteration as done:
            result: Int32Array = done.value
            return result

    def aborted(self) -> str | None:
        if self.abort_file is not None and self.abort_file.exists():
            return self.abort_file.read_text().strip() or "the job was aborted"
        return None

    def wait_any(self, done: Callable[[], bool], what: str) -> None:
        def collected() -> bool:
            self._collect()
            for poll in self.pollers:
                poll()
            return done()

        self.engine.run_until(collected, self.cfg.iteration_timeout, what, self.aborted)

    def drain(self) -> None:
        """Wait until every write this process posted is acknowledged."""
        def idle() -> bool:
            for poll in self.pollers:
                poll()
            return all(q.requester.idle() for q in self.qps.values())

        self.engine.run_until(idle, self.cfg.iteration_timeout, "the last acknowledgements", self.aborted)
        self.drains += 1
        for hook in self.after_drain:
            hook(self.drains)

    def stats(self) -> dict[str, object]:
        req = [q.requester.counters.values for q in self.qps.values()]
        resp = [q.responder.counters.values for q in self.qps.values()]

        def total(counters: list[dict[str, int]]) -> dict[str, int]:
            out: dict[str, int] = {}
            for c in counters:
                for k, v in c.items():
                    out[k] = out.get(k, 0) + v
            return out

        s = self.engine.stats
        rtts = {q.cfg.peer: {"srtt_ms": round((q.requester.srtt or 0) * 1000, 2),
                             "rto_ms": round(q.requester.rto * 1000, 2)}
                for q in self.qps.values() if q.requester.srtt is not None}
        return {"tx_packets": s.tx_packets, "tx_bytes": s.tx_bytes, "rx_packets": s.rx_packets,
                "rx_bytes": s.rx_bytes, "drops": dict(s.drops), "requester": total(req), "responder": total(resp),
                "rtt": rtts}
