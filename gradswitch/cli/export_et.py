"""`gradswitch export-et` and `gradswitch check-et`: gradswitch's workloads out as Chakra execution
traces, and any trace checked and summarised before a run (docs/workloads.md).

A refused trace or value is one `error:` line naming the file, node and problem (exit status 2).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from gradswitch.workload.chakra import read_traces, write_traces
from gradswitch.workload.chakra.reader import rank_ranges
from gradswitch.workload.generators import (
    SEND_RECV,
    collective_graph,
    digits_graph,
    send_recv_graph,
    training_graph,
    training_job,
)
from gradswitch.workload.gradients import compute_profile, workload_names
from gradswitch.workload.graph import (
    CollectiveKind,
    CollectiveNode,
    ComputeNode,
    GraphError,
    JobGraph,
    SendNode,
    node_kind,
)
from gradswitch.workload.job import MAX_IN_FLIGHT, Device, Emulation, Precision, Scheduling, Sync, Training

MIB = 1 << 20
COLLECTIVE_CHOICES = [k.value for k in CollectiveKind] + [SEND_RECV]
# the digits MLP (gradswitch/workload/digits.py): its graph, gradswitch.workload.generators.digits_graph
DIGITS = "train-digits"
AddCommand = Callable[[object, str, str, str, list[str]], argparse.ArgumentParser]

EXPORT_DESCRIPTION = (
    "Write a workload gradswitch generates as an MLCommons Chakra execution trace: one file per rank, "
    "OUT.{rank}.et (GlobalMetadata, then Node messages, length-delimited), which ASTRA-sim and Chakra's "
    "tools read and `gradswitch experiment --workload-et OUT` runs. Either one collective (or send/recv "
    "to the next rank) of --size on --workers ranks, --repeat times with --compute-us between, or the "
    "data-parallel training job of a model profile (forward, backward and an all-reduce per DDP bucket "
    "or priority partition, per iteration; docs/workloads.md). Sizes are Chakra's: the rank's input "
    "buffer, the rank's own shard for all_gather.")
EXPORT_EXAMPLES = [
    "gradswitch export-et --collective all_gather --size 64MiB --workers 8 --out traces/ag",
    "gradswitch export-et --collective send_recv --size 1MiB --workers 4 --repeat 3 --out traces/p2p",
    "gradswitch export-et --workload resnet50 --workers 8 --iterations 2 --out traces/resnet50",
    "gradswitch export-et --workload bert-base --workers 16 --scheduling priority --device a100 --out traces/bert",
    "gradswitch export-et --workload train-digits --workers 4 --iterations 10 --out traces/digits",
]
CHECK_DESCRIPTION = (
    "Read a Chakra execution trace (DIR/PREFIX.{rank}.et for ranks 0..N-1, and DIR/PREFIX.groups.json "
    "mapping pg_names to ranks when there is one), check that it can run (dependencies, groups, sizes "
    "matching across each group, sends matching receives) and print a summary: ranks, nodes by kind, "
    "collectives by type and bytes, process groups. A trace that cannot run is refused in one line "
    "naming the file, node and problem (exit status 2).")
CHECK_EXAMPLES = [
    "gradswitch check-et traces/ag",
    "gradswitch check-et traces/megatron --groups comm_groups.json  # ASTRA-sim's --comm-group-configuration",
]


def add_commands(sub: object, add_command: AddCommand, size: Callable[[str], int]) -> None:
    """Register export-et and check-et (gradswitch/cli/main.py calls this with its add_command and parse_size)."""
    p = add_command(sub, "export-et", "write a generated workload as Chakra execution traces", EXPORT_DESCRIPTION,
                    EXPORT_EXAMPLES)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--collective", choices=COLLECTIVE_CHOICES, help="one collective (or send_recv) on every rank")
    trainable = [w for w in workload_names() if (c := compute_profile(w)) is not None and c.calibrations]
    what.add_argument("--workload", choices=[*trainable, DIGITS], help="the data-parallel training job of a model "
                      f"profile (those with a calibrated computation, docs/training.md), or {DIGITS}'s graph (its "
                      "sizes and order; a trace carries no gradients: synthetic data on a run)")
    p.add_argument("--workers", type=int, help="ranks of the trace (required)")
    p.add_argument("--out", type=Path, metavar="DIR/PREFIX", help="write DIR/PREFIX.{rank}.et (required)")
    g = p.add_argument_group("--collective")
    g.add_argument("--size", type=size, default=64 * MIB, help="bytes per rank (Chakra's comm_size; default 64MiB)")
    g.add_argument("--repeat", type=int, default=1, help="times in a row (default 1)")
    g.add_argument("--compute-us", type=float, default=0.0, metavar="US",
                   help="a computation of US microseconds before each repetition after the first (default 0)")
    g.add_argument("--root", type=int, default=0, help="broadcast: the rank whose buffer everyone receives")
    E = Emulation()
    g = p.add_argument_group("--workload (docs/training.md: the emulated cluster's computation)")
    g.add_argument("--iterations", type=int, default=1, help="training iterations (default 1)")
    g.add_argument("--device", choices=Device.names(), default=E.device.value, help=f"default {E.device}")
    g.add_argument("--precision", choices=Precision.names(), default=E.precision.value, help=f"default {E.precision}")
    g.add_argument("--batch", type=int, default=E.batch, help=f"samples per GPU (default {E.batch})")
    g.add_argument("--emulate-link", type=float, default=E.link_gbps, metavar="GBPS",
                   help=f"the link rate priority scheduling plans at (default {E.link_gbps:g})")
    g.add_argument("--sync", choices=Sync.names(), default=Sync.ITERATION.value, help="default iteration")
    g.add_argument("--scheduling", choices=Scheduling.names(), default=Scheduling.FIFO.value, help="default fifo")
    g.add_argument("--bucket-mb", type=float, default=25.0, help="fifo: MiB per bucket (default 25, DDP's)")
    g.add_argument("--partition-mb", type=float, default=4.0, help="priority: MiB per partition (default 4)")
    g.add_argument("--in-flight", type=int, default=Training.in_flight,
                   help=f"all-reduces started and not complete, at most, 1 to {MAX_IN_FLIGHT} (default "
                        f"{Training.in_flight}, a spec's in_flight)")
    p.set_defaults(func=cmd_export_et)

    p = add_command(sub, "check-et", "check a Chakra execution trace and summarise it", CHECK_DESCRIPTION,
                    CHECK_EXAMPLES)
    p.add_argument("prefix", type=Path, metavar="DIR/PREFIX", help="the trace: DIR/PREFIX.{rank}.et")
    p.add_argument("--groups", type=Path, metavar="FILE.json",
                   help='pg_name -> ranks, e.g. {"1": [0, 1]} (default: DIR/PREFIX.groups.json when there)')
    p.add_argument("--flops-per-s", type=float, help="times COMP_NODEs that give num_ops and no duration_micros")
    p.set_defaults(func=cmd_check_et)


def generated(args: argparse.Namespace) -> JobGraph:
    """The workload export-et's options describe (GraphError on a value that cannot make one)."""
    if args.collective is None and args.workload is None:
        raise GraphError("give --collective KIND (one collective) or --workload MODEL (a training job) to export")
    if args.workers is None or args.out is None:
        raise GraphError("give --workers N (ranks of the trace) and --out DIR/PREFIX (where to write it)")
    name = args.out.name
    if args.collective == SEND_RECV:
        return send_recv_graph(args.workers, args.size, args.repeat, args.compute_us * 1e-6, name)
    if args.collective is not None:
        return collective_graph(CollectiveKind(args.collective), args.workers, args.size, args.repeat,
                                args.compute_us * 1e-6, args.root, name)
    if args.workload == DIGITS:
        return digits_graph(args.workers, args.iterations, name=name)
    for option in ("bucket_mb", "partition_mb"):
        if not getattr(args, option) > 0:
            raise GraphError(f"--{option.replace('_', '-')} {getattr(args, option)}: give more than 0 MiB")
    if args.batch < 1:
        raise GraphError(f"--batch {args.batch}: give 1 sample or more")
    if not 1 <= args.in_flight <= MAX_IN_FLIGHT:
        raise GraphError(f"--in-flight {args.in_flight}: give 1 to {MAX_IN_FLIGHT} all-reduces at once")
    emulate = Emulation(args.emulate_link, Device(args.device), Precision(args.precision), args.batch)
    cfg = training_job(args.workload, args.workers, args.iterations, emulate, Sync(args.sync),
                       Scheduling(args.scheduling), max(4, round(args.bucket_mb * MIB)),
                       max(4, round(args.partition_mb * MIB)), in_flight=args.in_flight)
    return training_graph(cfg, name=name)


def _bytes(n: float) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n:.0f} B"


def summary(graph: JobGraph) -> list[str]:
    """A one-screen description of a checked graph."""
    kinds: Counter[str] = Counter()
    per_type: dict[str, list[int]] = defaultdict(list)
    per_group: Counter[str] = Counter()
    compute_s = [0.0] * graph.world_size
    zero = total_compute = 0
    for r in graph.ranks:
        for n in r.nodes:
            kinds[node_kind(n)] += 1
            if isinstance(n, ComputeNode):
                compute_s[r.rank] += n.duration_s
                total_compute += 1
                zero += n.duration_s == 0
            elif isinstance(n, CollectiveNode):
                per_type[n.collective.value].append(n.nbytes)
                per_group[n.group] += 1
    sizes = [len(r.nodes) for r in graph.ranks]
    lines = [f"{graph.name}: {graph.world_size} ranks, {min(sizes)}-{max(sizes)} nodes per rank",
             "nodes (all ranks): " + ", ".join(f"{k} {kinds[k]}" for k in ("compute", "collective", "send", "recv")),
             f"computation per rank: {min(compute_s):.6g}-{max(compute_s):.6g} s"]
    if total_compute and zero == total_compute:
        lines.append("  every computation lasts 0 s (a trace not linked with chakra_trace_link?): "
                     "a run times only its communication")
    if per_type:
        lines.append("collectives (all ranks): type, nodes, bytes (Chakra's comm_size: input buffer; all_gather: "
                     "own shard)")
        for t, sizes_b in sorted(per_type.items()):
            lines.append(f"  {t:<15} {len(sizes_b):>6}  {_bytes(sum(sizes_b)):>10}  "
                         f"(sizes {_bytes(min(sizes_b))} to {_bytes(max(sizes_b))})")
    classes = Counter(n.layer_class for r in graph.ranks for n in r.nodes if isinstance(n, CollectiveNode))
    if set(classes) - {0}:  # (every collective in class 0: the default, nothing to say)
        lines.append("DLCP layer classes (all ranks; 0: the top priority, docs/dlcp.md): " +
                     ", ".join(f"{c}: {classes[c]}" for c in sorted(classes)))
    p2p = [n.nbytes for r in graph.ranks for n in r.nodes if isinstance(n, SendNode)]
    if p2p:
        lines.append(f"send/recv: {len(p2p)} sends, {_bytes(sum(p2p))}")
    lines.append("process groups: " + ("; ".join(
        f"{g.name} (ranks {rank_ranges(list(g.ranks))}): {per_group[g.name]} collective nodes"
        for g in graph.groups) or "none"))
    return lines


def _refuse(e: Exception) -> int:
    print(f"error: {e}", file=sys.stderr)
    return 2


def cmd_export_et(args: argparse.Namespace) -> int:
    try:
        graph = generated(args)
        files = write_traces(graph, args.out)
    except GraphError as e:
        return _refuse(e)
    traces = [f for f in files if f.suffix == ".et"]
    extra = [str(f) for f in files if f.suffix != ".et"]
    also = f" and {', '.join(extra)}" if extra else ""
    print(f"wrote {len(traces)} trace files {traces[0]} .. {traces[-1]}{also}")
    for line in summary(graph):
        print(line)
    return 0


def cmd_check_et(args: argparse.Namespace) -> int:
    try:
        graph = read_traces(args.prefix, args.groups, args.flops_per_s)
    except GraphError as e:
        return _refuse(e)
    for line in summary(graph):
        print(line)
    return 0
