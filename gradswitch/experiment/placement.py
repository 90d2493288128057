"""Where an experiment's processes go, and the job configuration each of them reads.

The topology a spec needs, its hosts dealt to jobs and roles (`place`), and every job's
`gradswitch.workload.job.JobConfig`, with the transport's window and timeout sized for the links: on the
simulator at high rates the windows and NetReduce's credits also cover the bandwidth-delay product
(`bdp_packets`), which the testbed's rates never need.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from gradswitch.experiment.spec import ExperimentSpec, NetworkSpec, RingOrder
from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU
from gradswitch.protocol.netreduce import PACKETS as NETREDUCE_PACKETS
from gradswitch.protocol.queues import buffer_bytes
from gradswitch.roce.headers import RETH_LEN
from gradswitch.roce.wire import ROCE_OVERHEAD
from gradswitch.topology.model import Topology
from gradswitch.workload.compute import iteration_s
from gradswitch.workload.gradients import compute_profile
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role, Training

MIB = 1 << 20

QUEUE_SHARE = 0.75  # of a shaped link's queue, for the windows of the QPs sending into it (incast_window)
PACKET_OVERHEAD = ROCE_OVERHEAD + RETH_LEN  # bytes on the wire around a payload, for a packet with a RETH


def topology_for(spec: ExperimentSpec) -> Topology:
    """The topology of the spec's kind with enough hosts for everything it runs."""
    return spec.topology()


@dataclass(frozen=True)
class Placement:
    jobs: list[list[Node]]  # per job, its nodes (workers first)
    server_host: str | None  # the shared host of colocated servers
    background: tuple[str, str] | None  # (sender, receiver) hosts of the bulk traffic


def place(spec: ExperimentSpec, topo: Topology) -> Placement:
    """Hosts dealt round-robin over the edge switches, so jobs spread over the fabric.

    A ring's ranks then follow the edge switches (topology-aware, as NCCL builds its rings):
    neighbours share a leaf where they can, so only one ring hop per leaf crosses the
    fabric. With `ring_order = alternate` they stay in dealing order: every hop crosses it,
    several flows share each leaf's uplinks, and ECMP may put two on one spine (the setting
    where DLCP's spraying has something to fix). With `ring_order = random` every job's workers
    are drawn at random from the hosts left, ranks in the order drawn (a scheduler that knows
    nothing of the topology), the draw seeded by the spec's seed: each seed another placement.
    """
    by_edge = [[h for h, _ in topo.hosts_of(s.name)] for s in topo.edge_switches()]
    order = [h.name for rnd in range(max(len(e) for e in by_edge)) for e in by_edge if rnd < len(e) for h in [e[rnd]]]
    edge_of = {h.name: i for i, e in enumerate(by_edge) for h in e}
    free = list(order)
    draw = random.Random(spec.measurement.seed)

    def take() -> str:
        return free.pop(0)

    def take_at_random() -> str:
        return free.pop(draw.randrange(len(free)))

    server_host = take() if spec.algorithm.servers_per_job and spec.network.colocate_servers else None
    jobs = []
    for _ in range(spec.workload.jobs):
        pick = take_at_random if spec.network.ring_order == RingOrder.RANDOM else take
        hosts = [pick() for _ in range(spec.network.workers)]
        if spec.algorithm.algo == Algorithm.RING and spec.network.ring_order == RingOrder.LEAVES:
            hosts.sort(key=lambda h: (edge_of[h], order.index(h)))
        nodes = [Node(i, Role.WORKER, h, topo.host(h).ip) for i, h in enumerate(hosts)]
        for j in range(spec.algorithm.servers_per_job):
            host = server_host or take()
            nodes.append(Node(spec.network.workers + j, Role.SERVER, host, topo.host(host).ip))
        jobs.append(nodes)
    background = None
    if spec.workload.background_flows:
        sender = take()
        edge = topo.attachment(sender)[0]
        receiver = next((h for h in free if topo.attachment(h)[0] != edge), free[0])
        background = (sender, receiver)
    return Placement(jobs, server_host, background)


def job_config(spec: ExperimentSpec, job_id: int, nodes: list[Node], topo: Topology) -> JobConfig:
    """What job `job_id`'s processes run, placed at `nodes` of `topo` (the network they run on: a
    bigger one than the spec's own when several specs share a network)."""
    mtu = NETREDUCE_MTU if spec.algorithm.algo == Algorithm.NETREDUCE else spec.transport.mtu
    window, credits = spec.transport.window, spec.algorithm.credits
    if spec.network.simulated:  # at the simulator's rates a window must cover the path's bandwidth-delay product
        needed = bdp_packets(spec.network, topo, mtu)
        window = max(window, needed)
        credits = max(credits, math.ceil(needed / NETREDUCE_PACKETS))
    window = incast_window(spec, mtu, window)
    levels = 0
    in_flight = window
    if spec.algorithm.algo == Algorithm.NETREDUCE:
        # Credits bound what a worker has in flight; a job whose workers sit on several edge switches
        # is aggregated in two levels (leaves, then a spine).
        in_flight = min(window, credits * NETREDUCE_PACKETS)
        levels = 1 if len({topo.attachment(n.host)[0] for n in nodes if n.role == Role.WORKER}) > 1 else 0
    training = training_config(spec)
    timeout = JobConfig.iteration_timeout
    if training is not None:  # the emulated computation, stretched, comes on top of the communication
        timeout += 3 * modelled_compute_s(spec) * training.dilation
    return JobConfig(algo=spec.algorithm.algo, nodes=tuple(nodes), iterations=spec.measurement.iterations,
                     workload=spec.workload.workload,
                     size_bytes=spec.workload.size_bytes, scale=spec.workload.scale, dtype=spec.workload.dtype,
                     float_mode=spec.workload.float_mode, transport=spec.transport.transport,
                     ps_key_bytes=spec.algorithm.ps_key_bytes,
                     mtu=mtu, window=window, rto=rto_of(spec, in_flight, mtu, levels),
                     reorder_window=reorder_window(spec.network.bw_mbps, queue_of(spec.network)), credits=credits,
                     netreduce_k=spec.algorithm.netreduce_k, netreduce_deadline_us=spec.algorithm.netreduce_deadline_us,
                     dlcp=spec.transport.dlcp.host_policy(), crash=spec.faults.crash, training=training,
                     iteration_timeout=timeout,
                     seed=spec.measurement.seed + job_id - 1, job_id=job_id)


def training_config(spec: ExperimentSpec) -> Training | None:
    """What the workers of a training spec run (None: the all-reduce loop)."""
    if spec.workload.emulate is None or spec.dilation is None:
        return None
    return Training(spec.workload.emulate, spec.dilation, spec.algorithm.sync, spec.algorithm.scheduling,
                    bucket_bytes=max(4, round(spec.algorithm.bucket_mb * MIB * spec.workload.scale)),
                    partition_bytes=max(4, round(spec.algorithm.partition_mb * MIB * spec.workload.scale)),
                    warmup=spec.measurement.warmup, in_flight=spec.algorithm.in_flight)


def modelled_compute_s(spec: ExperimentSpec) -> float:
    """One GPU's modelled iteration (forward and backward), real seconds; 0 without emulation."""
    compute = compute_profile(spec.workload.workload)
    if spec.workload.emulate is None or compute is None:
        return 0.0
    e = spec.workload.emulate
    return iteration_s(compute, e.device, e.precision, e.batch) * e.compute_scale


def fan_in(spec: ExperimentSpec) -> int:
    """QPs that send into one host at once: a parameter server's workers (every colocated job's),
    one neighbour for ring, the switch's one result stream for NetReduce."""
    if spec.algorithm.algo == Algorithm.PS:
        return spec.network.workers * (spec.workload.jobs if spec.network.colocate_servers else 1)
    return 1


def incast_window(spec: ExperimentSpec, mtu: int, window: int | None = None) -> int:
    """The spec's window per QP, capped so that the windows of an incast fit the shaped queue of
    the receiving link. RoCE relies on PFC for that and there is none here: without the cap,
    eight parameter-server pushes into a 5 Mb/s link overflow its queue every round, go-back-N
    resends whole windows into the same overflow, and a QP exhausts its retries.

    The windows get QUEUE_SHARE of the queue, not all of it: the rest is for what shares the link
    with them (acknowledgements, a go-back-N resend while the window is still queued, a NetReduce
    leaf's partials resent up). (Fresh leaf-spine networks running NetReduce with 8 credits once
    resent over a thousand packets more often with windows filling the whole queue, 4 of 5, than
    with 3/4 of it, 2 of 7: a bigger first window waited longer for ARP, and left more out of order.
    With peers resolved before the first packet, gradswitch/roce/resolve.py, 10 of 10 resent nothing with
    windows filling the whole queue; the share stays as a margin.) At least one packet: a floor
    above that overflowed the queue with 4 KiB packets (8 windows of 4 into 64 KiB)."""
    window = spec.transport.window if window is None else window
    if not spec.network.bw_mbps:
        return window
    room = int((queue_of(spec.network) or buffer_bytes(spec.network.bw_mbps)) * QUEUE_SHARE)
    return max(1, min(window, room // (fan_in(spec) * (mtu + PACKET_OVERHEAD))))


def widest_hops(topo: Topology) -> int:
    """Links on the longest shortest path between two hosts (2 on a rack, 4 on a leaf-spine, 6 on a fat tree)."""
    edges = [s.name for s in topo.edge_switches()]
    hops = [topo.distances_to(edge) for edge in edges]
    return max(d[e] for d in hops for e in edges if e in d) + 2


BDP_MARGIN = 2.0  # windows of twice the path's delays: an ACK comes every window / 4 packets, and queues vary


def bdp_packets(network: NetworkSpec, topo: Topology, mtu: int) -> int:
    """Packets a QP needs in flight to keep its link busy across the topology's widest path on the simulator:
    the packets each store-and-forward link holds while it serializes one (both ways: NetReduce's results come
    back as whole packets), plus BDP_MARGIN times the path's delays (propagation and a switch's per-packet
    delay, both ways) over one packet's time. At the testbed's tens of Mb/s this is a few packets (the spec's
    window rules); at 100 Gb/s across a fat tree about a hundred (docs/simulator.md: a window of 32 limits a
    hop to about 66 Gb/s there)."""
    rate = (network.bw_mbps or 10_000.0) * 1e6 / 8
    packet_s = (mtu + PACKET_OVERHEAD) / rate
    hops = widest_hops(topo)
    delays = 2 * hops * (network.sim.link_delay_us + network.sim.switch_delay_us) * 1e-6
    return 2 * hops + math.ceil(BDP_MARGIN * delays / packet_s)


def queue_of(network: NetworkSpec) -> int | None:
    """Bytes of a port's priority queue when the network gives them (the simulator's `sim.queue_bytes`); None: the
    testbed's shaped buffer for the rate (gradswitch/net/shaping.py buffer_bytes)."""
    return network.sim.queue_bytes if network.simulated else None


def reorder_window(bw_mbps: float | None, queue_bytes: int | None = None) -> float | None:
    """How late a packet may arrive behind a later packet of its own message when the switches
    reorder a job's packets: a full shaped queue's time. A packet of a lower strict-priority class
    may wait that long behind higher ones at a hop, and a sprayed packet may meet a full queue on
    its path while the next one meets an empty queue on another. None: unshaped links."""
    return (queue_bytes or buffer_bytes(bw_mbps)) / (bw_mbps * 1e6 / 8) if bw_mbps else None


def rto_of(spec: ExperimentSpec, window: int, mtu: int, levels: int, queues: int = 1) -> float:
    """A job's smallest retransmission timeout, s: the spec's `min_rto_ms`, else min_rto's from the path (`queues`
    full queues: 2 for a graph run's parameter servers, gradswitch/experiment/graph_run.py graph_job)."""
    if spec.transport.min_rto_ms is not None:
        return spec.transport.min_rto_ms / 1000
    return min_rto(window, mtu, spec.network.bw_mbps, levels, queue_of(spec.network), queues)


def min_rto(window: int, mtu: int, bw_mbps: float | None, levels: int = 0, queue_bytes: int | None = None,
            queues: int = 1) -> float:
    """The smallest retransmission timeout: at least 50 ms, `queues` full shaped queues' time plus a window's
    (under incast the packet may sit behind the whole buffer; at a parameter server both ways: a pull behind the
    server's windows to every worker on its own link, its acknowledgement behind every worker's pushes on the
    server's link in, and a push and its acknowledgement alike: 2), and (3 + 2 levels) windows' time on the
    link; the RTT estimate raises it further. (Graph runs of 8 workers through one server at 8 Mb/s timed out
    spuriously with one queue: 2 timeouts a run, smoothed RTTs of 49-67 ms against an RTO of 108 ms. The training
    loop's parameter servers keep one queue: the scaling study's PS runs were measured with it and its spurious
    timeouts are a figure of that study, bench/scaling.py `--only rto`.)

    3 windows: a packet waits behind its own window at the sender's link, and its ACK behind the
    receiver's own window (they share its link); for NetReduce the third is the wait for the slowest
    worker, which credits keep at most one window behind (it sends message k + C only after the result
    of k). `levels`: NetReduce's aggregation levels above the edge switches (1 for a job spread over a
    leaf-spine fabric): each puts two more shaped links on the result's way, the partial's up and the
    result's down, each of which may hold a window of the job's cells (docs/netreduce.md, "Loss").
    `window`: packets in flight per QP (for NetReduce, credits x packets per message at most).
    `queue_bytes`: a port's queue where the spec gives it (queue_of), else the shaped buffer for the rate."""
    if not bw_mbps:
        return 0.05
    rate = bw_mbps * 1e6 / 8
    window_s = window * (mtu + PACKET_OVERHEAD) / rate
    return max(0.05, (3 + 2 * levels) * window_s, queues * (queue_bytes or buffer_bytes(bw_mbps)) / rate + window_s)
