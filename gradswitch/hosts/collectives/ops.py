"""Every communication node of a job's graph as an operation the hosts run: its key (the same on every
rank that takes part), its number (rkeys and immediate data derive from it), its members in order,
this rank's position and schedule, and the check of its output.

An operation is the k-th collective of a process group (key `c/GROUP/k`) or the k-th send from one
rank to another with one tag (key `p/SRC-DST/TAG/k`), counted in each rank's topological order, which
gradswitch.workload.graph.validate makes the same sequence on every member.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gradswitch.hosts.collectives import chain, p2p, pairwise, ring
from gradswitch.hosts.collectives.data import elements_of, expected, input_of
from gradswitch.hosts.collectives.schedule import Schedule
from gradswitch.workload.dlcp import Magnitudes, Tag
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, JobGraph, RecvNode, SendNode, topological_order
from gradswitch.workload.node_names import iteration_prefix

STEP_BITS = 12  # a write's immediate data: operation number << STEP_BITS | step
MAX_OPS = 1 << (32 - STEP_BITS)
STEPS = 1 << STEP_BITS  # the steps one number names; an operation of more runs them in rounds (Op.imm)
RKEY_BASE = 0x47000000  # an operation's memory region: RKEY_BASE + its number


@dataclass(frozen=True)
class Op:
    """One communication node as this rank runs it."""

    key: str
    number: int
    kind: str  # "collective", "send" or "recv"
    collective: CollectiveKind | None
    members: tuple[int, ...]  # global ranks by position (send/recv: sender, receiver)
    position: int  # this rank's
    elements: int  # of the node's size (all-gather: the shard)
    root: int = 0  # broadcast: the root's position
    sequence: int = 0  # the k of its key: its group's k-th collective (the k-th send with its tag)
    layer_class: int = 0  # DLCP: the layer class every packet of its writes carries (a collective node's)
    droppable: bool = False  # DLCP dropping: its packets may be droppable (a training graph's all-reduces)
    iteration: int | None = None  # a training graph's (or train-digits') iteration (its node's name); None: another's
    numbers: int = 0  # the graph's operations are numbered 1..numbers - 1 (an operation's rounds: Op.imm)

    @property
    def tag(self) -> Tag:
        """Its writes' DLCP tag without magnitudes (marked only in a DLCP job): its layer class, every packet in the
        top magnitude class, none droppable (tag_at gives a droppable operation's)."""
        return Tag(self.layer_class, droppable=False)

    def tag_at(self, step: int, magnitudes: Magnitudes | None) -> Tag:
        """The DLCP tag of its step's write, as the training loop's writes carry theirs (gradswitch/hosts/comm.py
        tag_for): its layer class, the sender's magnitude thresholds of the iteration (None: every packet in the top
        class), how many members' inputs the values sum (a ring's reduce-scatter step s: s + 1; its all-gather's:
        all; any other write: its sender's own), and whether its packets may be droppable."""
        if not self.droppable or magnitudes is None:
            return self.tag
        n = len(self.members)
        contributions = 1
        if self.collective in (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER):
            contributions = min(step + 1, n)
        return Tag(self.layer_class, magnitudes, contributions, droppable=True)

    def sum_tag(self, magnitudes: Magnitudes | None) -> Tag:
        """The DLCP tag of a write of the whole sum (a parameter server's, to every member), as the loop's server
        marks its pulls: the sum of every member's input, classed per contribution (over N)."""
        if not self.droppable or magnitudes is None:
            return self.tag
        return Tag(self.layer_class, magnitudes, len(self.members), droppable=True)

    @property
    def rkey(self) -> int:
        return RKEY_BASE + self.number

    def imm(self, step: int) -> int:
        """Step `step`'s immediate data: number << STEP_BITS | step for the first STEPS steps (every operation's
        wire as ever); an operation of more steps (a parameter server's keys) runs them in rounds of STEPS, round r
        under the number r x `numbers` + number, after every operation's own, so no two operations' writes share
        one (ValueError, one line, past what the immediate data can number: at most MAX_OPS - 1)."""
        rounds, within = divmod(step, STEPS)
        number = self.number + rounds * self.numbers
        if rounds and (not self.numbers or number >= MAX_OPS):
            raise ValueError(f"{self.key}: step {step} needs round {rounds} of its {STEPS}-step numbers, past the "
                             f"{MAX_OPS - 1} numbers immediate data of {32 - STEP_BITS} bits hold for "
                             f"{max(1, self.numbers) - 1} operations")
        return number << STEP_BITS | within

    def most_steps(self) -> int:
        """The most steps this operation can number (in rounds of STEPS)."""
        if not self.numbers:
            return STEPS
        return STEPS * (1 + (MAX_OPS - 1 - self.number) // self.numbers)

    def schedule(self, position: int | None = None) -> Schedule:
        """The schedule of the member at `position` (this rank's by default)."""
        p = self.position if position is None else position
        n, e = len(self.members), self.elements
        if self.kind == "send" or self.kind == "recv":
            return p2p.send(e) if p == 0 else p2p.recv(e)
        if self.collective == CollectiveKind.ALL_REDUCE:
            return ring.all_reduce(p, n, e)
        if self.collective == CollectiveKind.REDUCE_SCATTER:
            return ring.reduce_scatter(p, n, e)
        if self.collective == CollectiveKind.ALL_GATHER:
            return ring.all_gather(p, n, e)
        if self.collective == CollectiveKind.ALL_TO_ALL:
            return pairwise.all_to_all(p, n, e)
        if self.collective == CollectiveKind.BROADCAST:
            return chain.broadcast(p, n, e, self.root)
        raise ValueError(f"{self.key}: no algorithm for {self.collective!r}")

    def slot_elements(self) -> int:
        """Every member's receive slots have the size of the largest receive of any member, so a sender
        knows where step i lands: at i x slot."""
        return max(max(self.schedule(q).slot_elements for q in range(len(self.members))), 1)

    def region_bytes(self) -> int:
        return max(4, len(self.schedule().steps) * self.slot_elements() * 4)

    def input(self, seed: int, position: int | None = None) -> Int32Array:
        p = self.position if position is None else position
        return input_of(seed, self.key, self.members[p], self.elements)

    def check_values(self) -> int:
        """Values expected() makes and a check compares: every member's input (a receive: the sender's), and
        the output."""
        made = self.elements * (1 if self.kind in ("send", "recv") else len(self.members))
        return made + self.elements

    def expected(self, seed: int) -> Int32Array:
        """What this rank's output must be."""
        if self.kind == "recv":
            return self.input(seed, 0)
        if self.kind == "send":
            return self.input(seed)[:0]
        assert self.collective is not None
        inputs = [self.input(seed, q) for q in range(len(self.members))]
        return expected(self.collective, inputs, self.position, self.root)


def ops_of(graph: JobGraph, rank: int) -> dict[int, Op]:
    """Rank `rank`'s communication nodes by node id, as operations numbered alike on every rank."""
    return _ops_of(graph, rank, _numbering(graph))


def all_ops(graph: JobGraph) -> dict[int, dict[int, Op]]:
    """ops_of(graph, r) of every rank r, by rank: the graph's operations numbered once (ops_of numbers them over
    every rank each time it is called)."""
    numbering = _numbering(graph)
    return {r.rank: _ops_of(graph, r.rank, numbering) for r in graph.ranks}


# (rank, node id) -> (key, k); key -> number
_Numbering = tuple[dict[tuple[int, int], tuple[str, str]], dict[str, int]]


def _numbering(graph: JobGraph) -> _Numbering:
    """Every communication node's key and k (counted in each rank's topological order) and every key's number."""
    keys: dict[tuple[int, int], tuple[str, str]] = {}  # (rank, node id) -> (key, kind)
    for r in graph.ranks:
        counts: dict[str, int] = defaultdict(int)
        for n in topological_order(r):
            if isinstance(n, CollectiveNode):
                base = f"c/{n.group}"
            elif isinstance(n, SendNode):
                base = f"p/{r.rank}-{n.peer}/{n.tag}"
            elif isinstance(n, RecvNode):
                base = f"p/{n.peer}-{r.rank}/{n.tag}"
            else:
                continue
            keys[(r.rank, n.id)] = (f"{base}/{counts[base]}", str(counts[base]))
            counts[base] += 1
    numbers = {k: i + 1 for i, k in enumerate(sorted({k for k, _ in keys.values()}))}
    if len(numbers) >= MAX_OPS:
        raise ValueError(f"{graph.name}: {len(numbers)} communication operations; the hosts number at most "
                         f"{MAX_OPS - 1} (immediate data of {32 - STEP_BITS} bits)")
    return keys, numbers


def _ops_of(graph: JobGraph, rank: int, numbering: _Numbering) -> dict[int, Op]:
    keys, numbers = numbering
    count = len(numbers) + 1  # numbers 1..len(numbers); an operation's later rounds after them (Op.imm)
    out: dict[int, Op] = {}
    for n in graph.ranks[rank].nodes:
        if (rank, n.id) not in keys:
            continue
        key, k = keys[(rank, n.id)]
        number, sequence = numbers[key], int(k)
        if isinstance(n, CollectiveNode):
            members = graph.group(n.group).ranks
            root = members.index(n.root) if n.collective == CollectiveKind.BROADCAST else 0
            out[n.id] = Op(key, number, "collective", n.collective, members, members.index(rank),
                           elements_of(n.nbytes), root, sequence, n.layer_class, n.droppable, iteration_prefix(n.name),
                           count)
        elif isinstance(n, SendNode):
            out[n.id] = Op(key, number, "send", None, (rank, n.peer), 0, elements_of(n.nbytes), sequence=sequence,
                           numbers=count)
        elif isinstance(n, RecvNode):
            out[n.id] = Op(key, number, "recv", None, (n.peer, rank), 1, elements_of(n.nbytes), sequence=sequence,
                           numbers=count)
    return out
