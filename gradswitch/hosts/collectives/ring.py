"""Ring reduce-scatter, all-gather and all-reduce (NCCL's ring): member p sends to p+1 and receives
from p-1, one chunk per step, N-1 steps per phase.

- reduce-scatter: the input (E elements) is cut into N chunks; at step s member p sends chunk p-s-1 and
  adds the chunk p-s-2 it receives; after N-1 steps it holds the whole sum of chunk p, its shard.
- all-gather: the output holds N blocks of the shard size, block q member q's shard; at step s member p
  sends block p-s (its own first) and stores the block p-s-1 it receives.
- all-reduce: reduce-scatter, then all-gather of the reduced chunks: 2 (N-1) steps.
"""

from __future__ import annotations

from gradswitch.hosts.collectives.schedule import Schedule, Span, Step, chunk_bounds


def _rs_steps(p: int, n: int, chunks: list[Span]) -> list[Step]:
    return [Step((p + 1) % n, chunks[(p - s - 1) % n], (p - 1) % n, chunks[(p - s - 2) % n], add=True)
            for s in range(n - 1)]


def _ag_steps(p: int, n: int, blocks: list[Span]) -> list[Step]:
    return [Step((p + 1) % n, blocks[(p - s) % n], (p - 1) % n, blocks[(p - s - 1) % n]) for s in range(n - 1)]


def reduce_scatter(p: int, n: int, elements: int) -> Schedule:
    chunks = chunk_bounds(elements, n)
    return Schedule(tuple(_rs_steps(p, n, chunks)), elements, in_place=True, output=chunks[p])


def all_gather(p: int, n: int, shard: int) -> Schedule:
    blocks = [(q * shard, (q + 1) * shard) for q in range(n)]
    return Schedule(tuple(_ag_steps(p, n, blocks)), n * shard, in_place=True, input_at=p * shard,
                    output=(0, n * shard))


def all_reduce(p: int, n: int, elements: int) -> Schedule:
    chunks = chunk_bounds(elements, n)
    return Schedule(tuple(_rs_steps(p, n, chunks) + _ag_steps(p, n, chunks)), elements, in_place=True,
                    output=(0, elements))
