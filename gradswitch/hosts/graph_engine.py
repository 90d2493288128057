"""A rank's execution graph run on a host: a node starts once every node it depends on is done.

Computation is emulated as today's training does (gradswitch/hosts/iteration.py): a compute node occupies the
rank's one emulated GPU for duration_s x the run's dilation D on the clock, while the transport keeps
running (the engine polls it), never by sleeping blind. One computation at a time per rank (one GPU
stream, as ASTRA-sim runs a Chakra trace's compute nodes); ready computations take the GPU in the
graph's order. A computation's start and end are the GPU's modelled timeline: it starts when its last
dependency ended or the GPU was free, whichever is later, and ends D x duration_s after, even if this
loop notices a little later. Communication nodes start when noticed ready and end when their operation
(gradswitch/hosts/collectives) has its output complete (everything received, its own last step done), not waiting
for its writes' acknowledgements (gradswitch/hosts/collectives/executor.py); any number run at once.

A finished operation's output goes to the runtime, which checks it when the host has nothing better to
do: while the emulated GPU computes and no communication is in progress, as the training path checks its
sums, and only a check expected to end BACKGROUND_SLACK_S before the computation does (a host busy past it
would notice the next communication late, and a late member stalls a whole collective); the rest after the
graph.

`GraphScheduler` is the timing logic alone, driven through a `Runtime` (a clock, a way to let the
transport run, operations to start, outputs to keep, host work to do); tests drive it on a simulated
clock. Times it records are the runtime's clock; gradswitch/hosts/graph_main.py turns them into seconds of the
emulated cluster (/ D).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Protocol

from gradswitch.hosts.comm import Wait
from gradswitch.hosts.slowdown import stretch
from gradswitch.workload.gradients import Int32Array
from gradswitch.workload.graph import ComputeNode, Node, RankGraph, topological_order

POLL_S = 0.01  # longest single wait for packets
BACKGROUND_SLACK_S = 0.02  # host work (output checks) ends at least this long before the emulated GPU's computation

OpRun = Generator[Wait, None, Int32Array]


class Runtime(Protocol):
    def now(self) -> float: ...

    def wait(self, max_wait: float, what: str) -> None:
        """Let communication progress for at most max_wait seconds (less when something happens)."""

    def start(self, node: Node) -> OpRun:
        """Begin a communication node; the generator yields what it waits for and returns the output."""

    def finish(self, node: Node, output: Int32Array) -> None:
        """A communication node ended with this output (to be checked)."""

    def background(self, budget_s: float) -> bool:
        """Do one piece of host work (check an output) expected to take at most budget_s; False when there is
        none that fits."""


@dataclass(frozen=True)
class Span:
    """When a node ran (the runtime's clock)."""

    node_id: int
    start: float
    end: float


@dataclass
class GraphScheduler:
    rank: RankGraph
    runtime: Runtime
    dilation: float  # clock seconds per emulated second: a computation of d s takes d x dilation
    timeout: float  # the whole graph must be done within this many clock seconds
    spans: dict[int, Span] = field(default_factory=dict)
    # a slow worker's factor (gradswitch/hosts/slowdown.py), read as each computation starts: it takes d x dilation x it
    slowdown: Callable[[], float] = lambda: 1.0
    on_end: Callable[[int], None] = lambda node_id: None  # each node's id once it ended (a rank's progress)
    # the host's own computation each compute node stands for (clock seconds; the digits model's minibatch gradient,
    # which the data source computes as the all-reduce after it starts): a slow worker waits (factor - 1) x it more,
    # as the loop that computes for real does (gradswitch/hosts/slowdown.py stretch)
    host_compute_s: float = 0.0
    # k of N: the sum the rank's next operation would contribute to is here already (NetReduceWorker.overtaken): the
    # computation on the GPU ends now, its contribution would be dropped anyway, as the loop's slow worker cuts its
    # wait short (gradswitch/hosts/digits_job.py)
    overtaken: Callable[[], bool] = lambda: False

    def run(self) -> dict[int, Span]:
        rt = self.runtime
        order = topological_order(self.rank)  # GraphError on a cycle or a missing dependency
        position = {n.id: i for i, n in enumerate(order)}
        waiting = {n.id: len(set(n.deps)) for n in order}
        users: dict[int, list[Node]] = {n.id: [] for n in order}
        for n in order:
            for d in set(n.deps):
                users[d].append(n)
        by_id = {n.id: n for n in order}
        ready_at: dict[int, float] = {}
        start_time = rt.now()
        deadline = start_time + self.timeout
        ready_compute: list[ComputeNode] = []
        ready_comm: list[Node] = []
        for n in order:
            if waiting[n.id] == 0:
                ready_at[n.id] = start_time
                if isinstance(n, ComputeNode):
                    ready_compute.append(n)
                else:
                    ready_comm.append(n)
        gpu: tuple[ComputeNode, float, float] | None = None  # the computation on the GPU: node, start, end
        gpu_free = start_time
        running: dict[int, tuple[OpRun, Wait, float]] = {}

        def finished(n: Node, end: float) -> None:
            self.on_end(n.id)
            for u in users[n.id]:
                waiting[u.id] -= 1
                ready_at[u.id] = max(ready_at.get(u.id, end), end)
                if waiting[u.id] == 0:
                    if isinstance(u, ComputeNode):
                        ready_compute.append(u)
                        ready_compute.sort(key=lambda c: position[c.id])
                    else:
                        ready_comm.append(u)

        while len(self.spans) < len(order):
            progressed = True
            while progressed:
                progressed = False
                now = rt.now()
                while ready_comm:
                    n = ready_comm.pop(0)
                    running[n.id] = (rt.start(n), lambda: True, now)
                    progressed = True
                if gpu is not None and (now >= gpu[2] or (now >= gpu[1] and self.overtaken())):
                    node, s, e = gpu
                    e = min(e, now)
                    self.spans[node.id] = Span(node.id, s, e)
                    gpu, gpu_free = None, e
                    finished(node, e)
                    progressed = True
                if gpu is None and ready_compute:
                    c = ready_compute.pop(0)
                    s = max(ready_at[c.id], gpu_free)
                    factor = self.slowdown()
                    gpu = (c, s, s + c.duration_s * self.dilation * factor + stretch(self.host_compute_s, factor))
                    progressed = True
                for i, (gen, wait, began) in list(running.items()):
                    if not wait():
                        continue
                    progressed = True
                    try:
                        running[i] = (gen, gen.send(None), began)
                    except StopIteration as done:
                        del running[i]
                        end = rt.now()
                        self.spans[i] = Span(i, began, end)
                        rt.finish(by_id[i], done.value)
                        finished(by_id[i], end)
            if len(self.spans) == len(order):
                break
            now = rt.now()
            if now > deadline:
                busy = [f"node {i}" for i in sorted(running)] + ([f"node {gpu[0].id} (compute)"] if gpu else [])
                raise TimeoutError(f"{self.rank.where()}: the graph took over {self.timeout:.1f} s; still running: "
                                   f"{', '.join(busy) or 'nothing (a dependency never ended)'}")
            if gpu is not None and not running and rt.background(gpu[2] - now - BACKGROUND_SLACK_S):
                continue
            what = ", ".join(f"node {i}" for i in sorted(running)) or "the emulated GPU"
            rt.wait(POLL_S if gpu is None else max(0.0, min(POLL_S, gpu[2] - now)), what)
        return self.spans
