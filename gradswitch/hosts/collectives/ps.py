"""A graph's all-reduces through parameter servers (an experiment's algo = ps), PHub-style as the training loop's
(gradswitch/hosts/ps.py): the world group's all-reduces, each cut into keys of ps_key_bytes dealt round-robin to the
servers (from the operation's k on, the world group's k-th collective, so one-key operations spread too; the
simulator's graph engine deals them alike, gradswitch/sim/ns3/model/gs-graph-spec.cc PsKeys). A member pushes every key
to its server (an RDMA WRITE with immediate into the member's block of the operation's region there); a server that has
every member's push of a key sums them and writes the sum into every member's region of the operation (the pull). A
member's operation ends when every key's sum has come back (its output complete; it does not wait for its pushes'
acknowledgements, as gradswitch/hosts/collectives/executor.py); a server waits for its pulls' at its end.

Everything else (other collective types, smaller groups, send/recv) stays on the hosts' algorithms
(gradswitch/hosts/collectives/ops.py). Immediate data are the operation's (ops.Op.imm) with the key's index as the step
(past ops.STEPS keys in rounds numbered after every operation's own), so keys of operations in flight at once never
mix; regions: the operation's own rkey at the members (as a ring
step's), PS_RKEY_BASE + its number at the servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from gradswitch.hosts.collectives.executor import OpRun, Received
from gradswitch.hosts.collectives.in_network import is_world
from gradswitch.hosts.collectives.ops import Op
from gradswitch.hosts.comm import Comm
from gradswitch.roce.qp import MemoryRegion
from gradswitch.workload.gradients import Int32Array, from_wire, to_wire
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, Node

PS = "ps"  # the algorithm's name in a report
PS_RKEY_BASE = 0x50000000  # an operation's region at a server: PS_RKEY_BASE + its number


def servers_run(graph: JobGraph, group: str, kind: CollectiveKind, servers: Sequence[int]) -> bool:
    """The job's parameter servers (if it has any) run this group's collectives of this type: the world's
    all-reduces."""
    return bool(servers) and kind == CollectiveKind.ALL_REDUCE and is_world(graph, group)


def runs_on_servers(graph: JobGraph, node: Node, servers: Sequence[int]) -> bool:
    return isinstance(node, CollectiveNode) and servers_run(graph, node.group, node.collective, servers)


def op_on_servers(graph: JobGraph, op: Op, servers: Sequence[int]) -> bool:
    """The operation is one the servers run (its members are its group's ranks: the world's, in rank order)."""
    return (bool(servers) and op.collective == CollectiveKind.ALL_REDUCE
            and op.members == tuple(range(graph.world_size)))


@dataclass(frozen=True)
class PsKey:
    index: int  # within the operation: its immediate data's step
    lo: int  # element range of the operation's buffer
    hi: int
    server: int  # node id
    offset: int  # bytes from the start of a member's block at that server

    @property
    def nbytes(self) -> int:
        return (self.hi - self.lo) * 4


@dataclass(frozen=True)
class PsLayout:
    """An operation's keys, and the bytes of one member's block at each server."""

    keys: tuple[PsKey, ...]
    block: dict[int, int]

    def at(self, server: int) -> tuple[PsKey, ...]:
        return tuple(k for k in self.keys if k.server == server)


def key_count(op: Op, key_bytes: int) -> int:
    """How many keys of `key_bytes` the operation's buffer makes (the last may be short)."""
    return -(-op.elements // max(1, key_bytes // 4))


def layout(op: Op, servers: Sequence[int], key_bytes: int) -> PsLayout:
    """The keys of `op` over these servers (ValueError, one line, for more keys than immediate data can number: the
    first ops.STEPS under the operation's number, the rest in rounds of as many, Op.imm)."""
    per_key = max(1, key_bytes // 4)
    count = key_count(op, key_bytes)
    most = op.most_steps()
    if count > most:
        raise ValueError(f"{op.key}: {op.elements * 4} bytes make {count} keys of ps_key_bytes = {key_bytes}; this "
                         f"operation can number at most {most} (immediate data of 32 bits, beside the graph's "
                         f"{max(1, op.numbers) - 1} operations): raise ps_key_bytes to at least "
                         f"{-(-op.elements // most) * 4}")
    keys, block = [], dict.fromkeys(servers, 0)
    for i in range(count):
        lo, hi = i * per_key, min(op.elements, (i + 1) * per_key)
        server = servers[(op.sequence + i) % len(servers)]
        keys.append(PsKey(i, lo, hi, server, block[server]))
        block[server] += (hi - lo) * 4
    return PsLayout(tuple(keys), block)


def member_region_bytes(op: Op) -> int:
    """A member's region of the operation: the pulled sums."""
    return max(4, op.elements * 4)


def server_region_bytes(op: Op, plan: PsLayout, server: int) -> int:
    """A server's region of the operation: every member's block."""
    return max(4, len(op.members) * plan.block[server])


def ps_all_reduce(comm: Comm, op: Op, plan: PsLayout, region: MemoryRegion, data: Int32Array,
                  received: Received | None = None) -> OpRun:
    """This member's all-reduce of `data` through the servers; `region`: the operation's region here; `received`
    counts the packets of its pulls taken as zeros (DLCP)."""
    rkey = PS_RKEY_BASE + op.number
    # DLCP: a push carries this member's own values (one contribution), classed as the loop's pushes; the servers'
    # sums as the loop's pulls (gradswitch/hosts/graph_ps_server.py)
    tag = op.tag_at(0, comm.magnitudes.get(op.iteration) if op.iteration is not None else None)
    for k in plan.keys:
        qp = comm.qp(k.server)
        va = op.position * plan.block[k.server] + k.offset
        qp.requester.post_write(to_wire(data[k.lo : k.hi]), va, rkey, imm=op.imm(k.index), tag=tag)
    out: Int32Array = np.empty_like(data)
    for k in plan.keys:
        imm = op.imm(k.index)
        if not comm.arrived(k.server, imm):
            yield partial(comm.arrived, k.server, imm)
        completion = comm.take(k.server, imm)
        if received is not None:
            received.zero_filled += completion.zero_filled
        out[k.lo : k.hi] = from_wire(comm.read(region, k.lo * 4, k.nbytes), k.hi - k.lo)
    return out
