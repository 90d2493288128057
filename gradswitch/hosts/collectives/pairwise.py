"""All-to-all by pairwise exchange: the input (E elements) is cut into N chunks, chunk q for member q;
member p keeps its own chunk p and at step k (1..N-1) sends chunk p+k to member p+k and receives from
member p-k that member's chunk p. The output holds N blocks of chunk p's size, block q from member q.
A step ends when its send is acknowledged and its receive is in (MPI_Sendrecv): without that, members drift
apart and several write into one at once, overflowing its link's queue (at N = 8 on BMv2, 3x the bound). The
last step ends with its receive (the operation ends with its output, gradswitch/hosts/collectives/executor.py)."""

from __future__ import annotations

from gradswitch.hosts.collectives.schedule import Schedule, Step, chunk_bounds


def all_to_all(p: int, n: int, elements: int) -> Schedule:
    chunks = chunk_bounds(elements, n)
    size = chunks[p][1] - chunks[p][0]  # every member's chunk p: what p receives from each
    blocks = [(q * size, (q + 1) * size) for q in range(n)]
    steps = tuple(Step((p + k) % n, chunks[(p + k) % n], (p - k) % n, blocks[(p - k) % n], settle=True)
                  for k in range(1, n))
    return Schedule(steps, n * size, in_place=False, keep=(chunks[p], blocks[p]), output=(0, n * size))
