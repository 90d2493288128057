"""Link-rate lower bounds of each collective: what no algorithm beats when every rank's link
carries B bytes per second each way on a non-blocking fabric (docs/collectives.md).

S is the rank's input buffer as the graph states it (gradswitch/workload/graph.py), except all-gather, whose
size is the rank's shard s (the output S = N s). With N ranks:

- all-reduce, ring: 2 (N-1)/N S/B (reduce-scatter then all-gather); in the network: S/B
- reduce-scatter: (N-1)/N S/B (each rank sends every shard but its own once); in the network: S/B (every rank
  sends its whole buffer to the switch, docs/netreduce.md)
- all-gather: (N-1) s/B = (N-1)/N S/B with S = N s (each rank receives every other shard once); in the network:
  S/B (a completer on each switch sends every message whole, gradswitch/workload/gather_completers.py: the P4 program
  cannot grow a placeholder into the values)
- all-to-all: (N-1)/N S/B (a rank keeps 1/N of its buffer and sends the rest)
- broadcast: S/B (every other rank must receive the whole buffer)
- send/recv: S/B
"""

from __future__ import annotations

from gradswitch.workload.graph import CollectiveKind


def collective_bound_s(kind: CollectiveKind, ranks: int, nbytes: float, rate_bytes_per_s: float,
                       in_network: bool = False) -> float:
    """Lower bound, in seconds, of one collective of `nbytes` (graph sizes) among `ranks` ranks;
    `in_network`: the switches reduce or replicate (all-reduce S/B instead of ring's 2 (N-1)/N S/B, reduce-scatter
    S/B instead of (N-1)/N S/B, all-gather N s/B instead of (N-1) s/B)."""
    if ranks < 1 or rate_bytes_per_s <= 0:
        raise ValueError(f"{ranks} ranks at {rate_bytes_per_s} B/s: a bound needs 1 rank or more and a rate above 0")
    if ranks == 1:
        return 0.0
    share = (ranks - 1) / ranks
    if kind == CollectiveKind.ALL_REDUCE:
        return (1.0 if in_network else 2 * share) * nbytes / rate_bytes_per_s
    if kind == CollectiveKind.REDUCE_SCATTER and in_network:
        return nbytes / rate_bytes_per_s
    if kind in (CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_TO_ALL):
        return share * nbytes / rate_bytes_per_s
    if kind == CollectiveKind.ALL_GATHER:
        return (ranks if in_network else ranks - 1) * nbytes / rate_bytes_per_s
    if kind == CollectiveKind.BROADCAST:
        return nbytes / rate_bytes_per_s
    raise ValueError(f"collective {kind!r}: no bound")


def point_to_point_bound_s(nbytes: float, rate_bytes_per_s: float) -> float:
    """A send of nbytes over one link: S/B."""
    return nbytes / rate_bytes_per_s
