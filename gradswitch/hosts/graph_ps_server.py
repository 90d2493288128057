"""A parameter server of a graph run (algo = ps): it serves its keys of every all-reduce the servers run
(gradswitch/hosts/collectives/ps.py), in whatever order their pushes complete, since the members may run several
at once. `prepare` makes every region and queue pair before the server says ready; `serve` sums a key once
every member's push of it is in and writes the sum to every member; returns the number of keys served.

DLCP (a training graph's or train-digits' droppable all-reduces): the server classes its sums as the loop's server
does (gradswitch/hosts/ps.py PsServer.serve), against magnitude thresholds of the pushes it received in the
iteration before (in the first, of those received before its first sum of it), each sum per contribution (over N).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradswitch.hosts.collectives.ops import Op, all_ops
from gradswitch.hosts.collectives.ps import PS_RKEY_BASE, PsKey, PsLayout, layout, op_on_servers, server_region_bytes
from gradswitch.hosts.comm import Comm
from gradswitch.roce.qp import MemoryRegion
from gradswitch.workload.dlcp import packet_means
from gradswitch.workload.gradients import FloatArray, from_wire, to_wire
from gradswitch.workload.graph import JobGraph


@dataclass(frozen=True)
class ServedKey:
    op: Op
    plan: PsLayout
    key: PsKey
    region: MemoryRegion  # the operation's region here


def server_ops(graph: JobGraph, servers: tuple[int, ...]) -> list[Op]:
    """Every operation the servers run, once (each from the rank that holds it first), by number."""
    found: dict[str, Op] = {}
    for ops in all_ops(graph).values():
        for op in ops.values():
            if op.key not in found and op_on_servers(graph, op, servers):
                found[op.key] = op
    return sorted(found.values(), key=lambda o: o.number)


def prepare(comm: Comm, graph: JobGraph) -> list[ServedKey]:
    """This server's keys of the job, with their regions registered and a queue pair to every member."""
    servers = tuple(s.node_id for s in comm.cfg.servers)
    me = comm.me.node_id
    out = []
    for op in server_ops(graph, servers):
        plan = layout(op, servers, comm.cfg.ps_key_bytes)
        mine = plan.at(me)
        if mine:
            region = comm.register(PS_RKEY_BASE + op.number, server_region_bytes(op, plan, me))
            out += [ServedKey(op, plan, k, region) for k in mine]
    for r in range(graph.world_size):
        comm.qp(r)
    return out


def serve(comm: Comm, keys: list[ServedKey]) -> int:
    """Sum and return every key as its pushes complete; then wait for the last acknowledgements."""
    pending = list(keys)

    def complete(s: ServedKey) -> bool:
        imm = s.op.imm(s.key.index)
        return all(comm.arrived(m, imm) for m in s.op.members)

    served = 0
    me = comm.me.node_id
    pushed: dict[int, list[FloatArray]] = {}  # DLCP: per training iteration, its pushes' per-packet mean |v|
    while pending:
        comm.wait_any(lambda: any(complete(s) for s in pending), f"pushes of {len(pending)} keys")
        for s in [s for s in pending if complete(s)]:
            imm, n = s.op.imm(s.key.index), s.key.hi - s.key.lo
            total = np.zeros(n, dtype=np.int32)
            it = s.op.iteration
            for position, m in enumerate(s.op.members):
                comm.take(m, imm)
                push = from_wire(comm.read(s.region, position * s.plan.block[me] + s.key.offset, s.key.nbytes), n)
                total += push
                if comm.dlcp is not None and it is not None:
                    pushed.setdefault(it, []).append(packet_means(push, comm.values_per_packet))
            if comm.dlcp is not None and it is not None and it not in comm.magnitudes:
                comm.set_magnitude_means(it, pushed.pop(it - 1, []) or pushed[it])
            tag = s.op.sum_tag(comm.magnitudes.get(it) if it is not None else None)
            wire = to_wire(total)
            for m in s.op.members:
                comm.write(m, wire, s.key.lo * 4, s.op.rkey, imm, tag)
            pending.remove(s)
            served += 1
    comm.drain()
    return served
