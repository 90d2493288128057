"""The simulator's configuration (the JSON gradswitch-sim reads) and results (sim-results.json, the JSON it writes):
every section and key, its type and meaning, and both documents' `format`, defined once.

Python writes the configuration (gradswitch/sim/sim_config.py, faults.py, ranks.py) and reads the results
(gradswitch/sim/results.py, faults.py, graph_run.py); C++ reads the configuration through ConfigObject
(gs-config-object.h, which refuses a key it was not asked for) and writes the results. Both take the names from
here, through files generated from this module (gradswitch/sim/schema_files.py) and checked in: C++ from
gradswitch/sim/ns3/model/gs-keys.h (the build needs no Python), one constant per key (`cfg::transport::kMtu` is
"mtu" of `jobs[].transport`, `res::node::kOk` is "ok" of a node's results) and the formats (CONFIG_FORMAT,
RESULTS_FORMAT); Python's writers build each section as its TypedDict in gradswitch/sim/sim_keys.py (mypy checks
every key they write and its type); docs/simulator-keys.md lists them. tests/unit/test_sim_schema.py fails when a
generated file is not what this module gives, when C++ reads or writes a key by a string literal, a key that is not
here or one as another type than the key's, and when a configuration Python writes for any kind of run has a key
that is not here, lacks one it requires or holds a value of another type; tests/ns3/test_sim_schema_results.py
checks what gradswitch-sim writes the same way. gradswitch-sim's --tables and --constants outputs (for tests) are
here too (TABLES, CONSTANTS).

    python -m gradswitch.sim.schema_files --write      # write gs-keys.h, sim_keys.py and docs/simulator-keys.md

A key's type is one of TYPES. `object` and `objects` name the section that is their value (`of`); a `map` is an
object whose keys are names of the writer's choosing (switches, hosts, ports, job ids), its values `of` a type or
a section. `optional`: the key may be absent (in the configuration also null: the feature is off); `kinds`: the
key is there exactly when the object's `kind` is one of these.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

CONFIG_FORMAT = 2  # the configuration's `format`: gradswitch-sim refuses any other
RESULTS_FORMAT = 1  # sim-results.json's `format`


# A key's type: what its value is in the JSON, and (in gs-keys.h's comments and the C++ reader's Get<T>) in C++.
TYPES = {
    "uint": "an integer of at least 0",
    "int": "an integer",
    "number": "a number",
    "bool": "true or false",
    "string": "a string",
    "choice": "one of the strings in `choices`",
    "ints": "a list of integers",
    "uints": "a list of integers of at least 0",
    "strings": "a list of strings",
    "object": "an object: the section `of`",
    "objects": "a list of objects, each the section `of`",
    "map": "an object whose keys are names (not keys of the format), each value of the type or section `of`",
    "counts": "an object whose keys are names (not keys of the format), each value an integer of at least 0",
    "list": "a list (its meaning says of what)",
}
SCALARS = ("uint", "int", "number", "bool", "string", "choice", "ints", "uints", "strings", "counts")


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # one of TYPES
    meaning: str
    of: str = ""  # object/objects: the section's id; map: a type of TYPES or a section's id
    optional: bool = False  # may be absent (the configuration: or null); the feature is off
    nullable: bool = False  # the value may be null
    choices: tuple[str, ...] = ()  # choice: the strings it takes
    kinds: tuple[str, ...] = ()  # present exactly when the object's `kind` is one of these

    @property
    def constant(self) -> str:
        """Its constant's name in gs-keys.h: kCamelCase ("a_port" -> kAPort, "switch" -> kSwitch)."""
        return "k" + "".join(part[:1].upper() + part[1:] for part in re.split(r"[_-]", self.name))


@dataclass(frozen=True)
class Section:
    id: str  # its namespace in gs-keys.h (cfg::<id>, res::<id>)
    path: str  # where it is in the document ("jobs[].transport"; "" the document itself)
    meaning: str
    keys: tuple[Key, ...]

    def key(self, name: str) -> Key:
        for k in self.keys:
            if k.name == name:
                return k
        raise KeyError(f"{self.path or 'the document'} has no key {name!r}")


@dataclass(frozen=True)
class Document:
    name: str  # cfg, res: the namespace of its sections in gs-keys.h
    title: str
    format: int | None  # its `format` (None: the document has none)
    sections: tuple[Section, ...]

    def section(self, id_: str) -> Section:
        for s in self.sections:
            if s.id == id_:
                return s
        raise KeyError(f"{self.name} has no section {id_!r}")

    @property
    def top(self) -> Section:
        return self.sections[0]


def _k(name: str, type_: str, meaning: str, of: str = "", *, optional: bool = False, nullable: bool = False,
       choices: tuple[str, ...] = (), kinds: tuple[str, ...] = ()) -> Key:
    return Key(name, type_, meaning, of, optional, nullable, choices, kinds)


SWITCH_FAULTS = ("switch-crash", "switch-hang")
LINK_FAULTS = ("link-down",)
WORKER_FAULTS = ("worker-crash", "slow-worker")

CONFIG = Document("cfg", "gradswitch-sim's configuration", CONFIG_FORMAT, (
    Section("run", "", "A run: gradswitch/sim/sim_config.py run_config writes it, gradswitch-sim --config reads it", (
        _k("format", "uint", f"the configuration's format ({CONFIG_FORMAT}); another is refused before anything else"),
        _k("seed", "uint", "the run's seed (SimSettings.seed)"),
        _k("time_limit_s", "number", "simulated seconds after which the run stops (default: iterations x iteration "
           "timeout of the longest job)"),
        _k("progress_s", "number", "wall seconds between progress lines on stderr (0: none)"),
        _k("scheduler", "choice", "ns-3's event list", choices=("map", "heap", "calendar", "priority-queue")),
        _k("wire", "object", "the header sizes counted on the wire", "wire"),
        _k("topology", "object", "hosts, switches and links", "topology"),
        _k("switch", "object", "every switch's settings", "switch_settings"),
        _k("host", "object", "every host's settings", "host"),
        _k("loss", "object", "random loss on the workers' links", "loss", optional=True),
        _k("jobs", "objects", "the jobs, each with its nodes and algorithm", "job"),
        _k("background", "object", "bulk TCP flows beside the jobs", "background", optional=True),
        _k("tensorlights", "object", "TensorLights' NIC classes for colocated servers", "tensorlights", optional=True),
        _k("ecmp_probes", "objects", "packets whose ECMP port `--tables` lists (tests)", "ecmp_probe", optional=True),
        _k("mpi", "object", "the run over MPI ranks (absent: one rank)", "mpi", optional=True),
        _k("fault_schedule", "object", "the run's faults (absent: none)", "fault_schedule", optional=True),
    )),
    Section("wire", "wire", "Header sizes in bytes (gradswitch/roce/headers.py, wire.py); also a transport "
            "scenario's `wire` (tests/ns3/qp_script.py)", (
        _k("roce_overhead", "uint", "Ethernet, IPv4, UDP, BTH and ICRC of every RoCE packet"),
        _k("reth", "uint", "an RDMA WRITE First's RETH"),
        _k("imm", "uint", "an immediate"),
        _k("aeth", "uint", "an ACK's AETH"),
        _k("sack", "uint", "a selective-repeat NAK's SACK"),
        _k("tcp_overhead", "uint", "Ethernet, IPv4 and TCP with timestamps of a background segment"),
        _k("framing", "uint", "bytes each frame adds on the link (preamble, gap)"),
    )),
    Section("topology", "topology", "The network (gradswitch/topology/model.py Topology)", (
        _k("name", "string", "the topology's name"),
        _k("hosts", "objects", "its hosts", "topology_host"),
        _k("switches", "objects", "its switches", "topology_switch"),
        _k("links", "objects", "its links", "link"),
    )),
    Section("topology_host", "topology.hosts[]", "A host", (
        _k("name", "string", "its name"),
        _k("ip", "string", "its IPv4 address"),
    )),
    Section("topology_switch", "topology.switches[]", "A switch", (
        _k("name", "string", "its name"),
        _k("device_id", "uint", "its device id"),
        _k("role", "string", "its tier (tor, leaf, spine, edge, aggregation, core)"),
    )),
    Section("link", "topology.links[]", "A link between two ports", (
        _k("a", "string", "one end's node"),
        _k("a_port", "uint", "its port"),
        _k("b", "string", "the other end's node"),
        _k("b_port", "uint", "its port"),
        _k("rate_bps", "number", "bits per second, above 0"),
        _k("delay_s", "number", "propagation delay, 0 or more"),
        _k("queue_bytes", "uint", "bytes each priority queue of its ports holds"),
        _k("shaped", "bool", "a token-bucket shaper as the testbed's HTB (false: a wire)"),
    )),
    Section("switch_settings", "switch", "Every switch's settings", (
        _k("processing_delay_s", "number", "per packet, ingress to egress"),
        _k("ecmp_multiplier", "uint", "gradswitch/protocol/ecmp.py hash_multiplier of the run's ECMP seed"),
        _k("load_balance", "choice", "how a packet's ECMP member is chosen", choices=("ecmp", "flowlet")),
        _k("flowlet_gap_s", "number", "the idle time that starts a new flowlet"),
        _k("roce_class", "bool", "RoCE packets to their own priority (DLCP's roce_class)"),
        _k("dlcp_thresholds", "map", "per switch, per priority: virtual-queue bytes from which droppable packets "
           "are trimmed (-1: never)", "ints"),
        _k("faults", "object", "fault injection for tests", "switch_faults", optional=True),
    )),
    Section("switch_faults", "switch.faults", "Fault injection for tests", (
        _k("netreduce_double_add", "uint", "adds one contribution twice (a wrong sum the check must find)"),
    )),
    Section("host", "host", "Every host's settings", (
        _k("message_delay_s", "number", "a host's delay per message it posts"),
    )),
    Section("loss", "loss", "Random loss", (
        _k("fraction", "number", "each packet into these hosts is lost with this probability (0 <= p < 1)"),
        _k("hosts", "strings", "the hosts whose links lose packets"),
    )),
    Section("job", "jobs[]", "A job (gradswitch/workload/job.py JobConfig)", (
        _k("job_id", "uint", "its id"),
        _k("algo", "choice", "what it runs", choices=("ring", "ps", "netreduce", "write", "graph")),
        _k("check", "choice", "what its packets carry to check the result", choices=("exact", "digest", "none")),
        _k("seed", "uint", "the seed of its generated values"),
        _k("nodes", "objects", "its nodes: 0, 1, ... with the workers first", "job_node"),
        _k("iterations", "uint", "iterations to run (a graph: 1)"),
        _k("transport", "object", "every node's queue pairs", "transport"),
        _k("reductions", "objects", "the all-reduce loop's tensors", "reduction", optional=True),
        _k("training", "object", "the training loop's plan", "training", optional=True),
        _k("ps_key_bytes", "uint", "a parameter server's key size"),
        _k("graph", "object", "execution graphs (algo graph)", "graph", optional=True),
        _k("credits", "uint", "NetReduce's messages in flight per worker"),
        _k("dlcp", "object", "DLCP for the job", "dlcp", optional=True),
        _k("iteration_timeout_s", "number", "simulated seconds an iteration may take"),
        _k("crash", "object", "a node that crashes (fault injection)", "crash", optional=True),
    )),
    Section("job_node", "jobs[].nodes[]", "A node of a job", (
        _k("node_id", "uint", "its id: its place in the list"),
        _k("role", "choice", "worker or server", choices=("worker", "server")),
        _k("host", "string", "the host it runs on"),
    )),
    Section("transport", "jobs[].transport", "The QP settings every node of the job uses (gradswitch/hosts/comm.py "
            "Comm.qp); also a transport scenario's `transport`", (
        _k("mode", "choice", "go-back-N or selective repeat", choices=("gbn", "sr")),
        _k("mtu", "uint", "payload bytes per packet"),
        _k("window", "uint", "packets in flight"),
        _k("ack_every", "uint", "a responder's ACK per this many packets"),
        _k("rto_s", "number", "the retransmission timeout, above 0"),
        _k("rto_max_s", "number", "its largest value after backing off"),
        _k("retry_limit", "uint", "timeouts in a row before the QP fails"),
        _k("loss_budget", "number", "the fraction of droppable packets it may give up (DLCP drop)"),
        _k("reorder_delay_s", "number", "how long a gap waits before it is NAKed (0: at once)"),
        _k("order_tolerant", "bool", "keeps out-of-order packets (needs mode sr)"),
    )),
    Section("reduction", "jobs[].reductions[]", "One tensor of the all-reduce loop", (
        _k("elements", "uint", "its int32 elements"),
        _k("layer_class", "uint", "its DLCP layer class"),
        _k("droppable", "bool", "DLCP may trim its packets"),
    )),
    Section("training", "jobs[].training", "The training loop's plan (gradswitch/workload/plan.py)", (
        _k("dilation", "number", "compute times are multiplied by it"),
        _k("sync", "choice", "when gradients are exchanged", choices=("iteration", "layer")),
        _k("in_flight", "uint", "ops in flight, at least 1"),
        _k("layers", "objects", "the model's layers", "layer"),
        _k("ops", "objects", "the all-reduce ops, in order", "op"),
    )),
    Section("layer", "jobs[].training.layers[]", "A layer", (
        _k("name", "string", "its name"),
        _k("forward_s", "number", "its forward pass"),
        _k("backward_s", "number", "its backward pass"),
    )),
    Section("op", "jobs[].training.ops[]", "An all-reduce op of the plan", (
        _k("elements", "uint", "its elements"),
        _k("layers", "uints", "the layers whose gradients it carries"),
        _k("deps", "uints", "the earlier ops it waits for (exponent codes before values)"),
        _k("layer_class", "uint", "its DLCP layer class"),
        _k("droppable", "bool", "DLCP may trim its packets"),
    )),
    Section("dlcp", "jobs[].dlcp", "DLCP: the switches' features and the job's host policy", (
        _k("priority", "bool", "priority queues by layer class"),
        _k("drop", "bool", "trim droppable packets beyond the thresholds"),
        _k("spray", "bool", "spray packets over the ECMP members"),
        _k("loss_budget", "number", "the fraction of droppable packets a QP may give up"),
        _k("drop_min_layer_class", "uint", "the lowest layer class that is droppable"),
        _k("drop_max_magnitude_class", "uint", "the highest magnitude class that is droppable"),
        _k("max_relative_error", "number", "the error bound of the job's results"),
    )),
    Section("crash", "jobs[].crash", "A node that crashes", (
        _k("node", "uint", "its node id"),
        _k("after", "uint", "the iteration after which it crashes"),
        _k("graph_node", "uint", "a graph job: the id of the crashing rank's node whose computation's start ends "
           "iteration `after` (its next iteration's first forward), where it dies as that computation would start; "
           "in a graph without computation iteration `after`'s last collective, where it dies as that one ends "
           "(absent: it never does)", optional=True),
    )),
    Section("graph", "jobs[].graph", "A job's execution graphs (gradswitch/sim/sim_config.py graph_json)", (
        _k("broadcast_chunk_bytes", "uint", "a broadcast chain's chunk (gradswitch/workload/broadcast_chain.py)"),
        _k("broadcast_max_chunks", "uint", "its most chunks, below 2^24"),
        _k("faults", "object", "fault injection for tests", "graph_faults", optional=True),
        _k("netreduce", "object", "world collectives through the switches, each type as its NetReduce job",
           "graph_netreduce", optional=True),
        _k("groups", "objects", "the process groups, by index", "group"),
        _k("ranks", "objects", "each rank's graph", "rank_graph"),
    )),
    Section("graph_faults", "jobs[].graph.faults", "Fault injection for tests", (
        _k("double_add_rank", "uint", "this rank's contributions are added twice"),
    )),
    Section("graph_netreduce", "jobs[].graph.netreduce", "The switch job of each in-network collective type "
            "(one at least)", (
        _k("job_id", "uint", "all-reduce's NetReduce job", optional=True),
        _k("reduce_scatter_job_id", "uint", "reduce-scatter's", optional=True),
        _k("all_gather_job_id", "uint", "all-gather's", optional=True),
        _k("placeholders", "bool", "SimSettings.gather_placeholders", optional=True),
        _k("grow_placeholders", "bool", "SimSettings.grow_placeholders", optional=True),
    )),
    Section("group", "jobs[].graph.groups[]", "A process group", (
        _k("ranks", "uints", "its ranks, distinct"),
    )),
    Section("rank_graph", "jobs[].graph.ranks[]", "A rank's graph: its nodes, or the earlier rank whose nodes it runs "
            "(one of the two)", (
        _k("nodes", "objects", "its nodes", "graph_node", optional=True),
        _k("same_as", "uint", "an earlier rank whose nodes are the same as its own (a data-parallel job's ranks: "
           "read once, checked for this rank)", optional=True),
    )),
    Section("graph_node", "jobs[].graph.ranks[].nodes[]", "A node of a rank's graph (gradswitch/workload/graph.py)", (
        _k("id", "uint", "its id in the trace"),
        _k("kind", "choice", "what it does", choices=("compute", "collective", "send", "recv")),
        _k("deps", "uints", "the ids of the nodes it waits for"),
        _k("duration_s", "number", "the computation's time", kinds=("compute",)),
        _k("collective", "choice", "the collective", choices=("all_reduce", "reduce_scatter", "all_gather",
                                                               "all_to_all", "broadcast"), kinds=("collective",)),
        _k("group", "uint", "its process group's index", kinds=("collective",)),
        _k("nbytes", "uint", "bytes it moves", kinds=("collective", "send", "recv")),
        _k("root", "uint", "a broadcast's root rank", kinds=("collective",)),
        _k("layer_class", "uint", "its DLCP layer class", kinds=("collective",)),
        _k("droppable", "bool", "DLCP may trim its packets", kinds=("collective",)),
        _k("peer", "uint", "the other rank", kinds=("send", "recv")),
        _k("tag", "uint", "its tag", kinds=("send", "recv")),
    )),
    Section("background", "background", "Bulk TCP flows (gs-tcp.h)", (
        _k("sender", "string", "the sending host"),
        _k("receiver", "string", "the receiving host"),
        _k("flows", "uint", "flows"),
        _k("mss", "uint", "segment payload bytes"),
        _k("rwnd_bytes", "uint", "the receive window"),
        _k("min_rto_s", "number", "the smallest retransmission timeout"),
    )),
    Section("tensorlights", "tensorlights", "TensorLights", (
        _k("host", "string", "the host of the colocated servers"),
        _k("rotate_s", "number", "the classes rotate this often (0: never)"),
        _k("servers", "objects", "the servers, the favoured first", "tensorlights_server"),
    )),
    Section("tensorlights_server", "tensorlights.servers[]", "A server", (
        _k("job", "uint", "its job"),
        _k("node", "uint", "its node id"),
    )),
    Section("ecmp_probe", "ecmp_probes[]", "A packet whose egress port `--tables` lists", (
        _k("switch", "string", "the switch"),
        _k("src", "string", "the source host"),
        _k("dst", "string", "the destination host"),
        _k("protocol", "uint", "IP protocol (6: TCP, else RoCE)"),
        _k("sport", "uint", "source port"),
        _k("dport", "uint", "destination port"),
    )),
    Section("mpi", "mpi", "The run over MPI ranks (gradswitch/sim/ranks.py)", (
        _k("ranks", "uint", "ranks, at least 1"),
        _k("sync", "choice", "how the ranks keep in step", choices=("barrier", "null-message")),
        _k("rank_of", "map", "every host's and switch's rank", "uint"),
    )),
    Section("fault_schedule", "fault_schedule", "The run's faults, in simulated seconds after the jobs' start "
            "(gradswitch/sim/faults.py)", (
        _k("switch_detect_s", "number", "from a switch's crash until routes go around it"),
        _k("link_detect_s", "number", "from a link's change of state until routes follow it"),
        _k("switch_hang_detect_s", "number", "from a switch's hang until routes go around it"),
        _k("faults", "objects", "the faults", "fault"),
    )),
    Section("fault", "fault_schedule.faults[]", "One fault", (
        _k("kind", "choice", "what fails", choices=SWITCH_FAULTS + LINK_FAULTS + WORKER_FAULTS),
        _k("label", "string", "its name in results"),
        _k("at_s", "number", "when, 0 or more"),
        _k("switch", "string", "the switch", kinds=SWITCH_FAULTS),
        _k("a", "string", "the link's one end", kinds=LINK_FAULTS),
        _k("b", "string", "its other end", kinds=LINK_FAULTS),
        _k("windows", "objects", "when it is out", "window", kinds=SWITCH_FAULTS + LINK_FAULTS),
        _k("job", "uint", "the worker's job", kinds=WORKER_FAULTS),
        _k("node", "uint", "its node id", kinds=WORKER_FAULTS),
        _k("host", "string", "its host", kinds=WORKER_FAULTS),
        _k("factor", "number", "its compute is this many times slower, at least 1", kinds=("slow-worker",)),
        _k("rate_bps", "number", "its link's rate (null: unchanged)", nullable=True, kinds=("slow-worker",)),
    )),
    Section("window", "fault_schedule.faults[].windows[]", "A time its target is out", (
        _k("from_s", "number", "from, 0 or more"),
        _k("to_s", "number", "until (null: the end of the run)", nullable=True),
    )),
))

RESULTS = Document("res", "gradswitch-sim's results (sim-results.json)", RESULTS_FORMAT, (
    Section("results", "", "A run's results: gs-simulation.cc writes them, gradswitch/sim/results.py parse reads "
            "them", (
        _k("format", "uint", f"sim-results.json's format ({RESULTS_FORMAT})"),
        _k("wall_s", "number", "wall seconds the run took (several ranks: the largest)"),
        _k("sim_s", "number", "simulated seconds: when the last node finished, else where the run stopped"),
        _k("events", "uint", "ns-3 events (several ranks: their sum)"),
        _k("events_per_s", "number", "events per wall second"),
        _k("packet_hops", "uint", "packets delivered over a link"),
        _k("packet_hops_per_s", "number", "packet hops per wall second"),
        _k("peak_rss_mb", "number", "the process's peak resident memory (VmHWM)"),
        _k("setup_rss_mb", "number", "the same once the network and jobs were built"),
        _k("time_limit_hit", "bool", "the run stopped at its time limit"),
        _k("jobs", "objects", "per job its nodes' results", "job"),
        _k("switches", "map", "per switch its counters", "switch_counters"),
        _k("background", "object", "the bulk TCP flows' totals (null: none)", "background", nullable=True),
        _k("faults", "objects", "per fault of the schedule what it did", "fault", optional=True),
        _k("mpi", "object", "a run over MPI ranks: how it was cut and what each rank cost", "mpi", optional=True),
        _k("rank", "object", "one rank's figures, as it sends them to rank 0 (never in the file)", "rank",
           optional=True),
    )),
    Section("job", "jobs[]", "A job", (
        _k("job_id", "uint", "its id"),
        _k("check", "choice", "the check its packets carried", choices=("exact", "digest", "none")),
        _k("nodes", "objects", "its nodes' results, by node id", "node"),
    )),
    Section("node", "jobs[].nodes[]", "A node's results (gradswitch/sim/results.py node_result makes the worker "
            "result of them)", (
        _k("node_id", "uint", "its id"),
        _k("role", "choice", "worker or server", choices=("worker", "server")),
        _k("host", "string", "its host"),
        _k("ok", "bool", "it finished every iteration and its checks held"),
        _k("error", "string", "why not", optional=True),
        _k("iterations", "objects", "its iterations", "iteration"),
        _k("timeline", "objects", "a training worker's compute and communication events", "event", optional=True),
        _k("bounds", "list", "a training worker's iterations as [start, end] pairs", optional=True),
        _k("stats", "object", "its transport's counters", "stats"),
        _k("netreduce", "object", "a NetReduce worker's (a graph rank's all-reduce job's)", "netreduce",
           optional=True),
        _k("netreduce_jobs", "map", "a graph rank's NetReduce workers, by switch job id", "netreduce",
           optional=True),
        _k("keys_served", "uint", "a parameter server's keys served", optional=True),
        _k("deliveries", "objects", "messages delivered to it (algo write)", "delivery", optional=True),
        _k("graph", "list", "a graph rank's nodes as [id, start, end, checked, zero_filled, error2, norm2] (-1: "
           "not started or not ended; checked null: not checked; DLCP: packets zero-filled on receipt, the squared "
           "error they left and the squared norm checked)", optional=True),
    )),
    Section("iteration", "jobs[].nodes[].iterations[]", "An iteration", (
        _k("index", "uint", "its index"),
        _k("start", "number", "simulated seconds"),
        _k("end", "number", "simulated seconds"),
        _k("correct", "bool", "its checks held"),
        _k("wrong_elements", "uint", "elements found wrong"),
        _k("max_abs_error", "number", "0 (the simulator adds integers)"),
        _k("saturated", "uint", "0"),
        _k("zero_filled_packets", "uint", "trimmed packets taken as zeros"),
        _k("relative_error", "number", "the error zero-filled packets left"),
        _k("checked", "uint", "values checked"),
        _k("blocks", "uint", "blocks checked"),
        _k("lossy_blocks", "uint", "blocks with zero-filled packets"),
    )),
    Section("event", "jobs[].nodes[].timeline[]", "A training worker's event (gs-training.cc)", (
        _k("iteration", "uint", "its iteration"),
        _k("kind", "choice", "what it was", choices=("forward", "backward", "op")),
        _k("name", "string", "the layer, or `op <i>`"),
        _k("start", "number", "simulated seconds"),
        _k("end", "number", "simulated seconds"),
        _k("lane", "uint", "an op's lane"),
    )),
    Section("stats", "jobs[].nodes[].stats", "A node's transport (IP bytes)", (
        _k("tx_packets", "uint", "packets sent"),
        _k("tx_bytes", "uint", "IP bytes sent"),
        _k("rx_packets", "uint", "packets received"),
        _k("rx_bytes", "uint", "IP bytes received"),
        _k("drops", "map", "drops by reason (none at a host)", "uint"),
        _k("requester", "map", "its requesters' counters, by name (gs-qp.h kCounterNames)", "uint"),
        _k("responder", "map", "its responders' counters, by name", "uint"),
        _k("rtt", "map", "per peer host its queue pair's round trip", "rtt"),
    )),
    Section("rtt", "jobs[].nodes[].stats.rtt.<host>", "A queue pair's round trip", (
        _k("srtt_ms", "number", "the smoothed round trip"),
        _k("rto_ms", "number", "its retransmission timeout"),
    )),
    Section("netreduce", "jobs[].nodes[].netreduce", "A NetReduce worker", (
        _k("messages", "uint", "messages sent"),
        _k("credit_waits", "uint", "times it waited for credit"),
        _k("fallback", "object", "its fall back to ring and return", "fallback", optional=True),
    )),
    Section("fallback", "jobs[].nodes[].netreduce.fallback", "A NetReduce worker's fall back to ring", (
        _k("from_message", "uint", "the first message redone on ring"),
        _k("redone", "uint", "messages redone"),
        _k("ring_reductions", "uint", "reductions done on ring"),
        _k("back_from_message", "uint", "the first message back on the switch (null: never)", nullable=True),
    )),
    Section("delivery", "jobs[].nodes[].deliveries[]", "A message delivered", (
        _k("iteration", "uint", "its iteration"),
        _k("op", "uint", "its op"),
        _k("posted", "number", "when it was posted"),
        _k("delivered", "number", "when it was delivered"),
    )),
    Section("switch_counters", "switches.<name>", "A switch's counters", (
        _k("ports", "map", "per port number", "port"),
        _k("drops", "map", "drops by reason (queue-full, fault-injected, netreduce-refused, ...)", "uint"),
        _k("netreduce", "map", "per NetReduce job its events by name (contribution, completion, ...)", "counts",
           optional=True),
        _k("dlcp", "map", "per job its DLCP events", "dlcp_events", optional=True),
    )),
    Section("port", "switches.<name>.ports.<port>", "A switch port (frame bytes)", (
        _k("rx_packets", "uint", "packets received"),
        _k("rx_bytes", "uint", "frame bytes received"),
        _k("tx_packets", "uint", "packets sent"),
        _k("tx_bytes", "uint", "frame bytes sent"),
        _k("drops", "uint", "packets its queue dropped"),
        _k("busy_s", "number", "seconds it was sending"),
        _k("max_queue_bytes", "uint", "its largest queue"),
    )),
    Section("dlcp_events", "switches.<name>.dlcp.<job>", "A job's DLCP at a switch", (
        _k("kept", "uint", "droppable packets kept"),
        _k("dropped", "uint", "trimmed"),
        _k("classified", "uint", "packets classified"),
    )),
    Section("background", "background", "The bulk TCP flows (gs-tcp.cc)", (
        _k("flows", "uint", "flows"),
        _k("mss", "uint", "segment payload bytes"),
        _k("bytes", "uint", "bytes delivered in order"),
        _k("seconds", "number", "over this long"),
        _k("goodput_mbps", "number", "their goodput"),
        _k("retransmissions", "uint", "segments resent"),
        _k("model", "string", "what TCP it was"),
    )),
    Section("fault", "faults[]", "What a fault did (gradswitch/sim/faults.py SimFault), simulated seconds "
            "(null: never)", (
        _k("label", "string", "the fault's label"),
        _k("injected_s", "number", "when it happened", nullable=True),
        _k("detected_s", "number", "when the control plane had routed around it", nullable=True),
        _k("recovered_s", "number", "when the last queue pair it stalled made progress again", nullable=True),
        _k("first_stall_s", "number", "when the first learnt of a loss", nullable=True),
        _k("stalled_qps", "uint", "queue pairs that learnt of a loss"),
        _k("resumed_qps", "uint", "of which made progress again"),
        _k("lost_packets", "uint", "packets it dropped"),
        _k("out_at_end", "bool", "its target was still out at the end"),
        _k("fallback", "string", "\"ring\": NetReduce jobs fell back", nullable=True),
        _k("fallback_s", "number", "when they agreed to", nullable=True),
        _k("fallback_jobs", "uint", "how many jobs fell back"),
        _k("ring_recovered_s", "number", "when every worker completed a reduction on ring", nullable=True),
        _k("returned_s", "number", "when they agreed to return to the switch", nullable=True),
        _k("switch_recovered_s", "number", "when every worker completed one there again", nullable=True),
    )),
    Section("mpi", "mpi", "How the run was distributed", (
        _k("ranks", "uint", "ranks"),
        _k("sync", "choice", "how they kept in step", choices=("barrier", "null-message")),
        _k("lookahead_s", "number", "the smallest delay of a cut link"),
        _k("cut_links", "uint", "links cut between ranks"),
        _k("per_rank", "objects", "each rank's figures", "rank"),
    )),
    Section("rank", "mpi.per_rank[]", "One rank", (
        _k("rank", "uint", "its number"),
        _k("hosts", "uint", "hosts it simulated"),
        _k("switches", "uint", "switches"),
        _k("job_nodes", "uint", "job nodes"),
        _k("wall_s", "number", "its wall time"),
        _k("events", "uint", "its events"),
        _k("packet_hops", "uint", "its packet hops"),
        _k("cut_links", "uint", "its ends of cut links"),
        _k("cut_tx_packets", "uint", "packets it sent to other ranks"),
        _k("cut_rx_packets", "uint", "and received"),
        _k("allgather_us", "number", "one MPI_Allgather, timed before the run"),
        _k("setup_rss_mb", "number", "its memory once built"),
        _k("peak_rss_mb", "number", "its peak memory"),
    )),
))

TABLES = Document("tab", "gradswitch-sim --tables's output (for tests: run.py tables)", None, (
    Section("tables", "", "What the switches of a run's configuration forward by, and its NetReduce trees", (
        _k("switches", "map", "per switch its forwarding", "switch_tables"),
        _k("netreduce_trees", "map", "per NetReduce job (its id) its aggregation tree", "tree"),
        _k("ecmp_probes", "uints", "per probe of the configuration's `ecmp_probes`, the port it leaves its switch by"),
    )),
    Section("switch_tables", "switches.<name>", "A switch's forwarding", (
        _k("hosts", "map", "per host it reaches the port to it", "uint"),
        _k("edges", "map", "per edge switch its ECMP group: the ports towards it", "uints"),
    )),
    Section("tree", "netreduce_trees.<job>", "A NetReduce job's aggregation tree", (
        _k("root", "string", "the switch that completes the sums"),
        _k("roles", "objects", "each switch's part", "tree_role"),
    )),
    Section("tree_role", "netreduce_trees.<job>.roles[]", "A switch of the tree", (
        _k("switch", "string", "the switch"),
        _k("parent", "string", "the switch it sends its partial sums to (null: the root)", nullable=True),
        _k("children", "strings", "the switches whose partial sums it adds"),
        _k("ranks", "uints", "the job's ranks on its own ports"),
    )),
))

CONSTANTS = Document("consts", "gradswitch-sim --constants's output (run.py constants)", None, (
    Section("constants", "", "The config.p4 constants the simulator was built with", (
        _k("constants", "map", "per name (config.p4's #define) its value", "uint"),
    )),
))

DOCUMENTS = (CONFIG, RESULTS, TABLES, CONSTANTS)


# --- checking a document against its schema (the tests; Python's writers are checked by them, not at run time) ---


def _type_ok(value: object, type_: str) -> bool:
    if type_ in ("uint", "int"):
        return isinstance(value, int) and not isinstance(value, bool) and (type_ == "int" or value >= 0)
    if type_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "bool":
        return isinstance(value, bool)
    if type_ in ("string", "choice"):
        return isinstance(value, str)
    if type_ == "ints":
        return isinstance(value, list) and all(_type_ok(v, "int") for v in value)
    if type_ == "uints":
        return isinstance(value, list) and all(_type_ok(v, "uint") for v in value)
    if type_ == "strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if type_ == "list":
        return isinstance(value, list)
    if type_ == "map":
        return isinstance(value, dict)
    if type_ == "counts":
        return isinstance(value, dict) and all(_type_ok(v, "uint") for v in value.values())
    raise ValueError(f"unknown type {type_!r}")


def problems(doc: object, schema: Document) -> list[str]:
    """What in `doc` the schema does not allow: unknown keys, missing keys, values of another type, a choice's
    other value, and a `format` other than the schema's; one line each (empty: none)."""
    out: list[str] = []
    _check(doc, schema, schema.top, "", out)
    if schema.format is not None and isinstance(doc, dict) and doc.get("format") != schema.format:
        out.append(f"format = {doc.get('format')!r}: the schema's is {schema.format}")
    return out


def _check(obj: object, schema: Document, section: Section, path: str, out: list[str]) -> None:
    where = path or "the document"
    if not isinstance(obj, dict):
        out.append(f"{where} = {obj!r}: an object ({section.id})")
        return
    kind = obj.get("kind")
    for key in section.keys:
        expected = not key.optional and (not key.kinds or kind in key.kinds)
        if expected and key.name not in obj:
            out.append(f"{path + '.' if path else ''}{key.name} is missing")
        elif key.kinds and key.name in obj and kind not in key.kinds:
            out.append(f"{path + '.' if path else ''}{key.name}: only with kind {' or '.join(key.kinds)}")
    for name, value in obj.items():
        at = f"{path}.{name}" if path else name
        try:
            key = section.key(name)
        except KeyError:
            out.append(f"{where}: unknown key {name!r} (section {section.id})")
            continue
        if value is None and (key.nullable or key.optional):
            continue
        _check_value(value, schema, key, at, out)


def _check_value(value: object, schema: Document, key: Key, at: str, out: list[str]) -> None:
    if key.type == "object":
        _check(value, schema, schema.section(key.of), at, out)
    elif key.type == "objects":
        if not isinstance(value, list):
            out.append(f"{at} = {value!r}: a list of objects ({key.of})")
            return
        for i, item in enumerate(value):
            _check(item, schema, schema.section(key.of), f"{at}[{i}]", out)
    elif key.type == "map" and isinstance(value, dict):
        of = Key(key.name, key.of, key.meaning) if key.of in TYPES else Key(key.name, "object", key.meaning, key.of)
        for name, item in value.items():
            if item is None and key.of in SCALARS:
                out.append(f"{at}.{name} = null: {TYPES.get(key.of, key.of)}")
            else:
                _check_value(item, schema, of, f"{at}.{name}", out)
    elif not _type_ok(value, key.type):
        out.append(f"{at} = {value!r}: {TYPES.get(key.type, key.type)}")
    elif key.type == "choice" and value not in key.choices:
        out.append(f"{at} = {value!r}: not one of {', '.join(key.choices)}")


def walk(schema: Document) -> Iterator[tuple[Section, Key]]:
    for section in schema.sections:
        for key in section.keys:
            yield section, key
