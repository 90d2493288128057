"""The plan of a training iteration, computed identically on every node of a job.

All-reduce needs every worker to reduce the same tensors in the same order (ring tags must
match the neighbours', NetReduce message k must carry the same chunk everywhere, a credit limit
with two orders deadlocks). So the order in which reductions START is global: each node
derives it from the job alone (the profile, the compute model, the bucket plan and, for
`priority`, a modelled send queue at the emulated link rate), as Horovod's coordinator or
BytePS's scheduler would agree it. At run time a worker starts op i only after op i-1, once
its gradients exist, and while op i - in_flight is complete (gradswitch/hosts/iteration.py).

- `fifo` (PyTorch DDP): tensors in the order backward produces them (the profile's order,
  last layer first), grouped into buckets of at least `bucket_bytes` (a tensor is never
  split; a bucket is closed once it reaches the size, as DDP does); op order = bucket order.
- `priority` (P3, ByteScheduler): each layer's gradients (its tensors together) cut into
  partitions of at most `partition_bytes`; a modelled sender at the emulated link rate takes,
  whenever it is free, the ready partition of the front-most layer. A front layer whose
  gradient appears while a back layer is being sent therefore goes before the back layer's
  remaining partitions: that is the overtaking.

Times here are real seconds of the emulated cluster.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from gradswitch.workload.compute import layer_times
from gradswitch.workload.encoding import uses_exponents
from gradswitch.workload.floats import BlockExponent
from gradswitch.workload.gradients import Profile, compute_profile, workload
from gradswitch.workload.job import Algorithm, JobConfig, Scheduling


def allreduce_bound_s(algo: Algorithm, workers: int, servers: int, nbytes: float, rate_bytes_per_s: float) -> float:
    """Link-rate lower bound of one all-reduce of nbytes: ring 2(N-1)S/(N B), a parameter server
    N S/(P B) with P servers, in-network aggregation S/B (docs/architecture.md)."""
    if algo == Algorithm.RING:
        return 2 * (workers - 1) * nbytes / (workers * rate_bytes_per_s) if workers > 1 else 0.0
    if algo == Algorithm.PS:
        return workers * nbytes / (max(1, servers) * rate_bytes_per_s)
    return nbytes / rate_bytes_per_s


@dataclass(frozen=True)
class Layer:
    """A module with parameters, in forward order, and its computation (real seconds)."""

    index: int  # forward position: 0 is the first layer
    name: str
    forward_s: float
    backward_s: float
    tensors: tuple[int, ...]  # logical tensor indices (the profile's back-propagation order)


@dataclass(frozen=True)
class Piece:
    """Elements lo..hi of logical tensor `tensor` (exponent codes of the whole tensor when codes)."""

    tensor: int
    lo: int
    hi: int
    codes: bool = False

    @property
    def elements(self) -> int:
        return self.hi - self.lo


@dataclass(frozen=True)
class Op:
    """One all-reduce of the concatenation of its pieces: a bucket (fifo) or a partition (priority)."""

    index: int  # position in the global order
    pieces: tuple[Piece, ...]
    layer: int  # the front-most layer it carries (its priority)
    ready_s: float  # when backward has produced all its gradients, from backward's start (real s)
    codes: bool = False  # exponent mode: the exponent codes of its tensors, before their values

    @property
    def elements(self) -> int:
        return sum(p.elements for p in self.pieces)

    @property
    def tensors(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(p.tensor for p in self.pieces))


@dataclass(frozen=True)
class Plan:
    layers: tuple[Layer, ...]  # forward order
    ops: tuple[Op, ...]  # the global start order
    tensor_layer: tuple[int, ...]  # logical tensor -> its layer
    elements: tuple[int, ...]  # logical tensor -> elements

    def layer_ops(self) -> dict[int, set[int]]:
        """Layer -> the ops that carry any of its gradient (values or codes)."""
        out: dict[int, set[int]] = {layer.index: set() for layer in self.layers}
        for op in self.ops:
            for t in op.tensors:
                out[self.tensor_layer[t]].add(op.index)
        return out


def plan_layers(cfg: JobConfig, profile: Profile) -> list[Layer]:
    """The job's layers with their real computation times (zero without an emulated cluster)."""
    names = {t.name: j for j, t in enumerate(profile.tensors)}
    compute = compute_profile(cfg.workload)
    tr = cfg.training
    if compute is None or tr is None:
        raise ValueError(f"workload {cfg.workload!r} has no compute model: emulate a model profile")
    times = layer_times(compute, tr.emulate.device, tr.emulate.precision, tr.emulate.batch)
    layers: list[Layer] = []
    for t in times:
        # a -stanza profile leaves some modules' gradients out (no tensors); their computation stays
        tensors = tuple(sorted(names[n] for n in t.tensors if n in names))
        k = tr.emulate.compute_scale
        layers.append(Layer(len(layers), t.name, t.forward_s * k, t.backward_s * k, tensors))
    return layers


def backward_ready(layers: list[Layer]) -> dict[int, float]:
    """Layer -> when backward (starting at 0, last layer first) has produced its gradients."""
    t = 0.0
    out = {}
    for layer in reversed(layers):
        t += layer.backward_s
        out[layer.index] = t
    return out


def fifo_ops(layers: list[Layer], elements: list[int], bucket_elements: int) -> list[Op]:
    ready = backward_ready(layers)
    layer_of = {j: layer.index for layer in layers for j in layer.tensors}
    ops: list[Op] = []
    bucket: list[Piece] = []
    for j in range(len(elements)):  # the profile's order: backward's
        bucket.append(Piece(j, 0, elements[j]))
        if sum(p.elements for p in bucket) >= bucket_elements or j == len(elements) - 1:
            ops.append(Op(len(ops), tuple(bucket), min(layer_of[p.tensor] for p in bucket),
                          max(ready[layer_of[p.tensor]] for p in bucket)))
            bucket = []
    return ops


def priority_ops(layers: list[Layer], elements: list[int], partition_elements: int, per_element_s: float) -> list[Op]:
    """Partitions in the order a sender that always takes the front-most ready one would send them,
    each taking per_element_s per element of the link's time."""
    ready = backward_ready(layers)
    parts: list[tuple[float, int, int, tuple[Piece, ...]]] = []  # (ready, layer, seq, pieces)
    for layer in layers:
        current: list[Piece] = []
        size = 0
        for j in sorted(layer.tensors, reverse=True):  # the layer's tensors in forward order, cut and packed
            lo, hi = 0, elements[j]
            while lo < hi:
                take = min(hi - lo, partition_elements - size)
                current.append(Piece(j, lo, lo + take))
                size += take
                lo += take
                if size == partition_elements:
                    parts.append((ready[layer.index], layer.index, len(parts), tuple(current)))
                    current, size = [], 0
        if current:
            parts.append((ready[layer.index], layer.index, len(parts), tuple(current)))
    arrivals = sorted(parts)
    queue: list[tuple[int, int, float, tuple[Piece, ...]]] = []
    ops: list[Op] = []
    t, i = 0.0, 0
    while i < len(arrivals) or queue:
        while i < len(arrivals) and arrivals[i][0] <= t:
            r, layer_index, seq, pieces = arrivals[i]
            heapq.heappush(queue, (layer_index, seq, r, pieces))
            i += 1
        if not queue:
            t = arrivals[i][0]
            continue
        layer_index, _, r, pieces = heapq.heappop(queue)
        size = sum(p.elements for p in pieces)
        # Pack: the next front-most ready partitions ride along while they fit in one partition
        # (small layers queued behind a busy link become one reduction, not one each).
        while queue and size + (more := sum(p.elements for p in queue[0][3])) <= partition_elements:
            _, _, r_more, more_pieces = heapq.heappop(queue)
            pieces, size, r = pieces + more_pieces, size + more, max(r, r_more)
        ops.append(Op(len(ops), pieces, layer_index, r))
        t += per_element_s * size
    return ops


def with_codes(ops: list[Op], codes: BlockExponent, elements: list[int]) -> list[Op]:
    """Exponent mode: before the first op carrying a tensor, an op carrying that tensor's codes."""
    seen: set[int] = set()
    out: list[Op] = []
    for op in ops:
        new = [t for t in op.tensors if t not in seen]
        seen.update(new)
        if new:
            pieces = tuple(Piece(t, 0, codes.blocks(elements[t]), codes=True) for t in new)
            out.append(Op(len(out), pieces, op.layer, op.ready_s, codes=True))
        out.append(Op(len(out), op.pieces, op.layer, op.ready_s))
    return out


def plan(cfg: JobConfig) -> Plan:
    """The job's iteration plan (the same on every node)."""
    tr = cfg.training
    if tr is None:
        raise ValueError("the job does not train (JobConfig.training is None)")
    profile = workload(cfg.workload, cfg.size_bytes, cfg.scale)
    layers = plan_layers(cfg, profile)
    elements = [t.elements for t in profile.tensors]
    if tr.scheduling == Scheduling.FIFO:
        ops = fifo_ops(layers, elements, max(1, tr.bucket_bytes // 4))
    else:
        # the modelled sender runs at the emulated link rate on real-size gradients
        rate = tr.emulate.link_gbps * 1e9 / 8
        servers = len(cfg.servers)
        per_element = allreduce_bound_s(cfg.algo, len(cfg.workers), servers, 4 / cfg.scale, rate)
        ops = priority_ops(layers, elements, max(1, tr.partition_bytes // 4), per_element)
    if uses_exponents(cfg):
        ops = with_codes(ops, BlockExponent(len(cfg.workers), cfg.exponent_floor), elements)
    tensor_layer = [0] * len(elements)
    for layer in layers:
        for j in layer.tensors:
            tensor_layer[j] = layer.index
    return Plan(tuple(layers), tuple(ops), tuple(tensor_layer), tuple(elements))


def op_mark(cfg: JobConfig, op: Op) -> int:
    """The job-profile index whose DLCP layer class an op's packets carry: its front-most tensor's."""
    j = max(op.tensors)
    if not uses_exponents(cfg):
        return j
    return 2 * j if op.codes else 2 * j + 1
