"""NetReduce worker: all-reduce by the switches, over an ordinary RC connection to the next worker.

Worker w writes its gradient, message by message, on its QP to w+1; the switches sum the
N workers' messages and deliver the sum on every connection, so w receives the result on its
QP from w-1, in the region that mirrors the job's aggregation window (docs/netreduce.md).
Credits: message k+C is sent only when the result of message k has arrived and message k
is fully acknowledged.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from protocol.netreduce import MESSAGE_BYTES, MESSAGE_ELEMENTS, MTU, PACKETS, JobLayout
from protocol.qpn import qpn
from roce.headers import Bth, Opcode, Reth, Transport
from workers.comm import Comm, OpGen
from workers.loops import make_loop
from workload.gradients import Int32Array, from_wire, to_wire
from workload.job import JobConfig


def layout_of_config(cfg: JobConfig) -> JobLayout:
    """The NetReduce layout of a job: its id, its workers and its credits."""
    return JobLayout(cfg.job_id, len(cfg.workers), cfg.credits)


def message_packet(layout: JobLayout, rank: int, k: int, i: int, payload: bytes, opcode: Opcode | None = None
                   ) -> Transport:
    """Packet i of worker `rank`'s message k exactly as its QP sends it (for tests and the fuzzer:
    the worker itself posts whole messages to its requester, which cuts them the same way)."""
    op = opcode or (Opcode.WRITE_FIRST if i == 0 else Opcode.WRITE_LAST_IMM if i == PACKETS - 1
                    else Opcode.WRITE_MIDDLE)
    bth = Bth(op, qpn(layout.peer(rank), rank, layout.job), layout.psn(k, i), ack_req=i == PACKETS - 1)
    return Transport(bth, payload, reth=Reth(layout.va(k), layout.rkey, MESSAGE_BYTES) if op == Opcode.WRITE_FIRST
                     else None, imm=layout.imm(k) if op in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM) else None)


class NetReduceWorker:
    def __init__(self, comm: Comm) -> None:
        self.comm = comm
        self.layout = layout_of_config(comm.cfg)
        ranks = [w.node_id for w in comm.cfg.workers]
        self.rank = ranks.index(comm.me.node_id)
        self.peer = ranks[self.layout.peer(self.rank)]
        self.sender = ranks[self.layout.sender_to(self.rank)]
        if comm.cfg.mtu != MTU:
            raise ValueError(f"NetReduce packets are {MTU}-byte: the job's MTU must be {MTU}")
        self.send_qp = comm.qp(self.peer, initial_psn=self.layout.initial_psn)
        self.recv_qp = comm.qp(self.sender, initial_psn=self.layout.initial_psn)
        self.region = comm.register(self.layout.rkey, self.layout.window_messages * MESSAGE_BYTES)
        self.loop = make_loop(comm, self)
        self.k = 0  # next message number to give a reduction (continues over reductions and iterations)
        self.posted = 0  # messages posted on the QP so far (they are posted in number order)
        self.wr_of: dict[int, int] = {}  # message -> work request id, until acknowledged
        self.results: set[int] = set()  # messages whose result arrived, until their credit is used
        self.stats = {"messages": 0, "credit_waits": 0}

    def _credit(self, k: int) -> bool:
        """May message k be sent? Its slot copy is free once message k - C is done here."""
        old = k - self.layout.credits
        if old < 0:
            return True
        acked = self.comm.acked[self.send_qp.cfg.qpn]
        return old in self.results and self.wr_of.get(old) in acked

    def _release(self, k: int) -> None:
        old = k - self.layout.credits
        if old >= 0:
            self.results.discard(old)
            self.comm.acked[self.send_qp.cfg.qpn].discard(self.wr_of.pop(old, -1))

    def allreduce(self, iteration: int, index: int, data: Int32Array) -> Int32Array:
        return self.comm.drive(self.reduce_op(iteration, index, 0, data, index), f"tensor {index}")

    def reduce_op(self, iteration: int, unit: int, seq: int, data: Int32Array, mark: int) -> OpGen:
        """The reduction's messages get the next message numbers when it starts (every worker starts
        reductions in the same order, so message k carries the same chunk everywhere) and go on the
        QP in number order: a later reduction posts only after every earlier message is posted."""
        n = len(data)
        count = max(1, -(-n // MESSAGE_ELEMENTS))
        padded = np.zeros(count * MESSAGE_ELEMENTS, dtype=np.int32)
        padded[:n] = data
        out = np.empty_like(padded)
        first = self.k
        self.k += count
        sent = 0
        done = 0
        tags = self.comm.tags[self.recv_qp.cfg.qpn]
        view = memoryview(self.region.buffer)
        while done < count:
            while sent < count and self.posted == first + sent and self._credit(first + sent):
                k = first + sent
                self._release(k)
                chunk = padded[sent * MESSAGE_ELEMENTS : (sent + 1) * MESSAGE_ELEMENTS]
                wr = self.send_qp.requester.post_write(to_wire(chunk), self.layout.va(k), self.layout.rkey,
                                                       imm=self.layout.imm(k))
                self.wr_of[k] = wr.wr_id
                sent += 1
                self.posted += 1
                self.stats["messages"] += 1
            k = first + done
            if self.layout.imm(k) not in tags:
                if sent < count and self.posted == first + sent and not self._credit(first + sent):
                    self.stats["credit_waits"] += 1
                yield partial(self._progress, k, first + sent if sent < count else None)
                continue
            tags.pop(self.layout.imm(k))
            va = self.layout.va(k)
            out[done * MESSAGE_ELEMENTS : (done + 1) * MESSAGE_ELEMENTS] = from_wire(
                view[va : va + MESSAGE_BYTES], MESSAGE_ELEMENTS)
            self.results.add(k)
            done += 1
        return out[:n]

    def _progress(self, awaited: int, next_send: int | None) -> bool:
        """The awaited result is here, or the next message may now be posted."""
        tags = self.comm.tags[self.recv_qp.cfg.qpn]
        return self.layout.imm(awaited) in tags or (
            next_send is not None and self.posted == next_send and self._credit(next_send))

    def report(self) -> dict[str, object]:
        return {"netreduce": dict(self.stats)}
