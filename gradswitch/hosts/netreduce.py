"""NetReduce worker: all-reduce by the switches, over an ordinary RC connection to the next worker.

Worker w writes its gradient, message by message, on its QP to w+1; the switches sum the
N workers' messages and deliver the sum on every connection, so w receives the result on its
QP from w-1, in the region that mirrors the job's aggregation window (docs/netreduce.md).
Credits: message k+C is sent only when the result of message k has arrived and message k
is fully acknowledged.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import replace
from functools import partial

import numpy as np

from gradswitch.hosts.comm import Comm, OpGen, Wait
from gradswitch.hosts.fallback import MIN_WORKERS, Fallback, ReverseRing, finished_file
from gradswitch.hosts.loops import make_loop
from gradswitch.hosts.netreduce_quorum import QuorumRequester, tag_of
from gradswitch.protocol.dlcp import TRIMMED
from gradswitch.protocol.netreduce import MESSAGE_BYTES, MESSAGE_ELEMENTS, MTU, PACKETS, JobLayout
from gradswitch.protocol.qpn import qpn
from gradswitch.roce.headers import Bth, Opcode, Reth, Transport
from gradswitch.roce.order_tolerant import make_responder
from gradswitch.roce.qp import RecvCompletion, Requester
from gradswitch.workload.gradients import Int32Array, from_wire, to_wire
from gradswitch.workload.job import JobConfig


def layout_of_config(cfg: JobConfig, scatter: bool = False, gather: bool = False) -> JobLayout:
    """The NetReduce layout of a job: its id, its workers and its credits (`scatter`, `gather`: its switches were
    told that its messages may be reduce-scatter, or all-gather, ones: gradswitch.control.netreduce_jobs.place_job)."""
    return JobLayout(cfg.job_id, len(cfg.workers), cfg.credits, scatter, gather, cfg.netreduce_k,
                     cfg.netreduce_deadline_us)


PLACEHOLDER = "netreduce-placeholder"  # the tag of an all-gather message this rank does not own


class PlaceholderRequester(Requester):
    """A requester that sends the packets of a write tagged PLACEHOLDER as their headers alone, marked trimmed
    (an all-gather message another rank owns: the switch takes them as zeros, docs/netreduce.md "All-gather"),
    the first time; a retransmission goes whole (zeros), since the switch may answer it, or complete a cell
    with it, only whole. Every other write as any requester does; PSNs, ACKs and retransmissions are RC's own."""

    def build(self, psn: int, retransmission: bool = False) -> Transport:
        t = super().build(psn, retransmission)
        if retransmission or self.packets[psn][0].tag != PLACEHOLDER:
            return t
        return replace(t, bth=replace(t.bth, pad_count=0, resv7=t.bth.resv7 | TRIMMED), payload=b"")


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
    """`scatter`: the job also reduce-scatters (gradswitch/hosts/netreduce_scatter.py); `gather`: it also all-gathers
    (gradswitch/hosts/netreduce_gather.py). Either way its receivers take the headers of a message that is not theirs,
    trimmed by the switch, as the zeros of a drop notification (loss budget 1); an all-gather job's requester
    sends the messages other ranks own as placeholders (PlaceholderRequester)."""

    def __init__(self, comm: Comm, scatter: bool = False, gather: bool = False, largest_op: int | None = None
                 ) -> None:
        """`largest_op`: the elements of the largest reduction the worker will run (its fallback ring's slots);
        default: its job's loop's (a graph's rank gives its own largest all-reduce)."""
        self.comm = comm
        self.layout = layout_of_config(comm.cfg, scatter, gather)
        ranks = [w.node_id for w in comm.cfg.workers]
        self.rank = ranks.index(comm.me.node_id)
        self.peer = ranks[self.layout.peer(self.rank)]
        self.sender = ranks[self.layout.sender_to(self.rank)]
        if comm.cfg.mtu != MTU:
            raise ValueError(f"NetReduce packets are {MTU}-byte: the job's MTU must be {MTU}")
        self.send_qp = comm.qp(self.peer, initial_psn=self.layout.initial_psn)
        self.recv_qp = comm.qp(self.sender, initial_psn=self.layout.initial_psn)
        if self.layout.owned:
            self.recv_qp.responder.cfg = replace(self.recv_qp.responder.cfg, loss_budget=1.0)
        if gather:
            old = self.send_qp.requester
            if old.requests or old.next_post != self.layout.initial_psn:
                raise ValueError(f"QP {self.send_qp.cfg.qpn:#x} already carried writes: an all-gather job needs "
                                 "a job id of its own")
            self.send_qp.requester = PlaceholderRequester(old.cfg, old.marker)
        if self.layout.k_of_n:  # k of N: its sums are delivered on this connection with or without this worker
            old = self.send_qp.requester
            self.send_qp.requester = QuorumRequester(old.cfg, old.marker)
            # ... so the others' credits alone pace them: the sum of message k + 2C may land in message k's place
            # of the window before this worker read k's (it computed, or was not scheduled): each result is read
            # as it was when it completed
            self.recv_qp.responder.cfg = replace(self.recv_qp.responder.cfg, keep_writes=True)
        self.last_contributors: list[tuple[int, ...]] = []  # the ranks each message of the last reduction holds
        self.region = comm.register(self.layout.rkey, self.layout.region_bytes)
        self.loop = make_loop(comm, self)
        self.k = 0  # next message number to give a reduction (continues over reductions and iterations)
        self.first_message = 0  # the job QPs' first message (a return from the fallback restarts them: resume)
        self.posted = 0  # messages posted on the QP so far (they are posted in number order)
        self.wr_of: dict[int, int] = {}  # message -> work request id, until acknowledged
        self.results: set[int] = set()  # messages whose result arrived, until their credit is used
        self.stats = {"messages": 0, "credit_waits": 0}
        if self.layout.k_of_n:  # results whose place a later sum had written again before this worker read them
            self.stats["overwritten"] = 0
        self.fallback = self._fallback(ranks, self.loop.largest_op if largest_op is None else largest_op)

    def _fallback(self, ranks: list[int], largest_op: int) -> Fallback | None:
        """Ring all-reduce for the reductions the switch cannot finish (gradswitch/hosts/fallback.py): in a run (its
        directory carries the signal), for an all-reduce job of N of N (k of N runs on one switch) and at least
        MIN_WORKERS workers."""
        run_dir = self.comm.run_dir
        if run_dir is None or self.layout.owned or self.layout.k_of_n or len(ranks) < MIN_WORKERS:
            return None
        ring = ReverseRing(self.comm, self.rank, ranks, largest_op)
        fb = Fallback(self.comm, self, run_dir, self.layout.job, self.rank, len(ranks), ring)
        self.comm.pollers.append(fb.poll)
        last_drain = 1 if self.comm.cfg.training is not None else self.comm.cfg.iterations

        def settle(drains: int) -> None:
            if drains == last_drain:
                self.settle_fallback()

        self.comm.after_drain.append(settle)
        return fb

    def settle_fallback(self, timeout: float | None = None) -> None:
        """Once this worker has run all its reductions: say so, and stay (answering agreements, redoing reductions
        by ring for the others) until every worker of the job has said so; nothing without a fallback."""
        fb, run_dir = self.fallback, self.comm.run_dir
        if fb is None or run_dir is None:
            return
        workers = len(self.comm.cfg.workers)
        finished_file(run_dir, self.layout.job, self.rank).write_text("")
        fb.settle(lambda: all(finished_file(run_dir, self.layout.job, r).exists() for r in range(workers)),
                  self.comm.cfg.iteration_timeout if timeout is None else timeout)

    # ---- the fallback's view of the in-network path (gradswitch/hosts/fallback.py SwitchPath) ----

    @property
    def next_message(self) -> int:
        return self.k

    def switch_op(self, data: Int32Array) -> OpGen:
        return self._switch_op(data)

    def abandon(self) -> None:
        old = self.send_qp.requester
        self.send_qp.requester = type(old)(replace(old.cfg, initial_psn=old.next_post), old.marker)

    def resume(self, message: int) -> None:
        psn = self.layout.psn(message, 0)
        old = self.send_qp.requester
        self.send_qp.requester = type(old)(replace(old.cfg, initial_psn=psn), old.marker)
        responder = self.recv_qp.responder
        self.recv_qp.responder = make_responder(replace(responder.cfg, remote_initial_psn=psn),
                                                self.comm.engine.regions)
        self.comm.tags[self.recv_qp.cfg.qpn].clear()
        self.comm.acked[self.send_qp.cfg.qpn].clear()
        self.results.clear()
        self.wr_of.clear()
        self.k = self.posted = self.first_message = message

    def _credit(self, k: int) -> bool:
        """May message k be sent? Its slot copy is free once message k - C is done here."""
        old = k - self.layout.credits
        if old < self.first_message:
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
        """All-reduce of `data`: its messages' sums, every one to every receiver (by ring instead while the
        job's switch is lost: gradswitch/hosts/fallback.py)."""
        self.last_contributors = []  # (k of N: a reduction the ring does holds every worker)
        if self.fallback is not None:
            return self.fallback.reduce_op(iteration, data)
        return self._switch_op(data)

    def _switch_op(self, data: Int32Array) -> OpGen:
        n = len(data)
        count = max(1, -(-n // MESSAGE_ELEMENTS))
        padded = np.zeros(count * MESSAGE_ELEMENTS, dtype=np.int32)
        padded[:n] = data
        chunks = [padded[i * MESSAGE_ELEMENTS : (i + 1) * MESSAGE_ELEMENTS] for i in range(count)]
        sums = yield from self.messages_op(chunks, [None] * count)
        out = np.concatenate([s for s in sums if s is not None]) if sums else padded
        return out[:n]

    def messages_op(self, chunks: Sequence[Int32Array], owners: Sequence[int | None],
                    placeholders: Sequence[bool] | None = None) -> Generator[Wait, None, list[Int32Array | None]]:
        """One message per chunk (MESSAGE_ELEMENTS values each); owners[i] None: message i is an all-reduce one
        (its sum comes back here), else a reduce-scatter one whose sum goes to rank owners[i] alone (the others
        get its headers, trimmed by the switch), or on an all-gather job one that rank owners[i] sends and every
        other rank receives; the others send zeros, as a placeholder (headers alone) where placeholders[i] says
        so (default: every message this rank does not own), else whole. Returns what this rank received whole
        (else None).

        The messages get the next message numbers when this starts (every worker starts operations in the
        same order, so message k carries the same chunk everywhere) and go on the QP in number order: a later
        operation posts only after every earlier message is posted. It ends once every result is here and every
        message posted (k of N: the results may all be here first)."""
        count = len(chunks)
        out: list[Int32Array | None] = [None] * count
        first = self.k
        self.k += count
        sent = 0
        done = 0
        tags = self.comm.tags[self.recv_qp.cfg.qpn]
        view = memoryview(self.region.buffer)
        contributors: list[tuple[int, ...]] = []

        def va(i: int) -> int:
            owner = owners[i]
            return self.layout.va(first + i) if owner is None else self.layout.owner_va(first + i, owner)

        while done < count or sent < count:
            while sent < count and self.posted == first + sent and self._credit(first + sent):
                k = first + sent
                self._release(k)
                placeholder = self.layout.gather and owners[sent] not in (None, self.rank) and (
                    placeholders is None or placeholders[sent])
                wr = self.send_qp.requester.post_write(to_wire(chunks[sent]), va(sent), self.layout.rkey,
                                                       imm=self.layout.imm(k), tag=PLACEHOLDER if placeholder else None)
                self.wr_of[k] = wr.wr_id
                sent += 1
                self.posted += 1
                self.stats["messages"] += 1
            if done == count:  # k of N: every sum is here, some without this worker, which still posts each message
                # (settled unsent where its sum was delivered): else no later message of its would ever be posted
                self.stats["credit_waits"] += 1
                yield partial(self._postable, first + sent)
                continue
            k = first + done
            key = tag_of(self.layout, tags, k)
            if key is None:
                if sent < count and self.posted == first + sent and not self._credit(first + sent):
                    self.stats["credit_waits"] += 1
                yield partial(self._progress, k, first + sent if sent < count else None)
                continue
            completion = tags.pop(key)
            contributors.append(self.layout.contributors(key))
            owner = owners[done]
            if owner is None or (owner == self.rank) != self.layout.gather:  # this rank's to receive whole
                if owner is not None and completion.zero_filled:
                    raise RuntimeError(f"rank {self.rank}: message {k} (rank {owner}'s shard) came trimmed "
                                       f"({completion.zero_filled} packets): the switch must send it whole here")
                out[done] = self._result(completion, view[va(done) : va(done) + MESSAGE_BYTES])
            elif completion.zero_filled != PACKETS:
                raise RuntimeError(f"rank {self.rank}: message {k} (rank {owner}'s shard) came with "
                                   f"{PACKETS - completion.zero_filled} whole packets: the switch must trim them all")
            self.results.add(k)
            done += 1
        self.last_contributors = contributors
        return out

    def _result(self, completion: RecvCompletion, placed: memoryview) -> Int32Array:
        """A message's result: as its write completed (k of N: kept by the receiver, its place in the window may
        hold a later sum by now), else where it was placed."""
        if not completion.data:
            return from_wire(placed, MESSAGE_ELEMENTS)
        if completion.data != placed:
            self.stats["overwritten"] += 1
        return from_wire(completion.data, MESSAGE_ELEMENTS)

    def _postable(self, k: int) -> bool:
        """May message k be posted now (every earlier one is, and its credit is free)?"""
        return self.posted == k and self._credit(k)

    def _progress(self, awaited: int, next_send: int | None) -> bool:
        """The awaited result is here, or the next message may now be posted."""
        tags = self.comm.tags[self.recv_qp.cfg.qpn]
        return tag_of(self.layout, tags, awaited) is not None or (next_send is not None and self._postable(next_send))

    def overtaken(self) -> bool:
        """k of N: the sum of this worker's next message is here already (its contribution would be late)."""
        return self.layout.k_of_n and tag_of(self.layout, self.comm.tags[self.recv_qp.cfg.qpn], self.k) is not None

    def report(self) -> dict[str, object]:
        out: dict[str, object] = {"netreduce": dict(self.stats)}
        if self.fallback is not None:
            out["fallback"] = self.fallback.report()
        return out
