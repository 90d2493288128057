"""Every table by name, each with the JSON under bench/results/ it is made from, and the README's headline tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gradswitch.experiment.tables.claims import claims_table
from gradswitch.experiment.tables.crossval import (
    crossval_collectives_table,
    crossval_engines_table,
    crossval_rankings_table,
    crossval_table,
)
from gradswitch.experiment.tables.faults import sim_faults_table, sim_netreduce_fallback_table, switch_faults_table
from gradswitch.experiment.tables.goodput import (
    goodput_fabric_table,
    goodput_interval_table,
    goodput_sensitivity_table,
    goodput_table,
)
from gradswitch.experiment.tables.simulator import (
    engines_sim_dlcp_table,
    engines_sim_table,
    mpi_projection_table,
    mpi_scaling_table,
    ns3_profile_table,
    ns3_schedulers_table,
    ns3_speed_table,
    scaling_bandwidth_table,
    scaling_dlcp_table,
    scaling_graph_table,
    scaling_table,
    sim_netreduce_rs_ag_table,
)
from gradswitch.experiment.tables.testbed import (
    allreduce_table,
    forwarding_table,
    instructions_table,
    netreduce_switch_table,
    netreduce_table,
    transport_table,
)
from gradswitch.experiment.tables.training import (
    dlcp_contention_table,
    dlcp_spray_table,
    learning_table,
    tensorlights_table,
    training_netreduce_table,
    training_priority_table,
)
from gradswitch.experiment.tables.training_graph import training_graph_table

README_TABLES = ("claims",)  # the headline figures the README keeps; every table is in docs/performance.md

TRAINING_GRAPH_10 = "training-graph-10mbps.json"  # the same jobs at 10 Mb/s (D = 8), where NetReduce keeps up
TRAINING_GRAPH_LEAFSPINE_5 = "training-graph-leafspine-5mbps.json"  # the 2x2 leaf-spine's, at 5 Mb/s (D = 16)
TRAINING_GRAPH_PRIORITY_10 = "training-graph-priority-10mbps.json"  # ByteScheduler's partitions, at 10 Mb/s (D = 8)
TRAINING_GRAPH_PS = "training-graph-ps.json"  # the table's parameter-server rows (--algos ring,ps), at 20 Mb/s
# its priority parameter-server rows on the rack (--algos ring,ps --scheduling priority), at 20 Mb/s
TRAINING_GRAPH_PS_PRIORITY = "training-graph-ps-priority.json"
TRAINING_GRAPH_LEAFSPINE_PRIORITY_5 = "training-graph-leafspine-priority-5mbps.json"  # theirs on the leaf-spine
CROSSVAL_COLLECTIVES_4 = "crossval-collectives-4mbps.json"  # N = 8 at 4 Mb/s, where 8 Python hosts keep up
CROSSVAL_COLLECTIVES_N2 = "crossval-collectives-n2.json"  # N = 2 at 8 Mb/s (--workers 2 --tag n2)
# the leaf-spine at N = 8 and 2 Mb/s (--workers 8 --bw 2 --topos leafspine), where its NetReduce runs keep up
CROSSVAL_COLLECTIVES_2 = "crossval-collectives-2mbps.json"
# the DLCP pair's loop and graph parts at 2.5 Mb/s (--only dlcp,dlcp-graph --dlcp-bw 2.5), where this machine keeps up
CROSSVAL_DLCP_25 = "crossval-dlcp-dlcp-graph-dlcp2.5mbps.json"
# the loop's DLCP pair again with the testbed's TCP streams on the simulator's ports (background_fixed_ports)
CROSSVAL_DLCP_25_FIXED = "crossval-dlcp-dlcp2.5mbps-fixedports.json"
CROSSVAL_20 = "crossval-20mbps.json"  # the same study at 20 Mb/s, where BMv2 is machine-bound for NetReduce at N >= 4

TABLES: dict[str, Callable[[Path], str]] = {
    "transport": transport_table,
    "instructions": instructions_table,
    "forwarding": forwarding_table,
    "allreduce": allreduce_table,
    "netreduce": netreduce_table,
    "netreduce-switch": netreduce_switch_table,
    "claims": claims_table,
    "training-netreduce": training_netreduce_table,
    "training-priority": training_priority_table,
    "dlcp-contention": dlcp_contention_table,
    "dlcp-spray": dlcp_spray_table,
    "tensorlights": tensorlights_table,
    "learning": learning_table,
}
# Tables of measurements that are optional: in the README only once their JSON is in bench/results/.
OPTIONAL_TABLES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "crossval": ("crossval.json", crossval_table),
    "crossval-rankings": ("crossval.json", crossval_rankings_table),
    "crossval-20mbps": (CROSSVAL_20, lambda results: crossval_table(results, CROSSVAL_20)),
    "crossval-collectives": ("crossval-collectives.json", crossval_collectives_table),
    "crossval-collectives-4mbps": (CROSSVAL_COLLECTIVES_4,
                                   lambda results: crossval_collectives_table(results, CROSSVAL_COLLECTIVES_4)),
    "crossval-collectives-n2": (CROSSVAL_COLLECTIVES_N2,
                                lambda results: crossval_collectives_table(results, CROSSVAL_COLLECTIVES_N2)),
    "crossval-dlcp-2.5mbps": (CROSSVAL_DLCP_25, lambda results: crossval_table(results, CROSSVAL_DLCP_25)),
    "crossval-dlcp-2.5mbps-fixedports": (CROSSVAL_DLCP_25_FIXED,
                                         lambda results: crossval_table(results, CROSSVAL_DLCP_25_FIXED)),
    "crossval-engines-dlcp-2.5mbps": (CROSSVAL_DLCP_25,
                                      lambda results: crossval_engines_table(results, CROSSVAL_DLCP_25)),
    "crossval-collectives-2mbps": (CROSSVAL_COLLECTIVES_2,
                                   lambda results: crossval_collectives_table(results, CROSSVAL_COLLECTIVES_2)),
    "ns3-speed": ("ns3-speed.json", ns3_speed_table),
    "ns3-profile": ("ns3-profile.json", ns3_profile_table),
    "ns3-schedulers": ("ns3-profile.json", ns3_schedulers_table),
    "mpi-scaling": ("mpi-scaling.json", mpi_scaling_table),
    "mpi-projection": ("mpi-scaling.json", mpi_projection_table),
    "scaling": ("scaling.json", scaling_table),
    "scaling-bandwidth": ("scaling.json", scaling_bandwidth_table),
    "scaling-dlcp": ("scaling.json", scaling_dlcp_table),
    "switch-faults": ("switch-faults.json", switch_faults_table),
    "sim-faults": ("sim-faults.json", sim_faults_table),
    "sim-netreduce-fallback": ("sim-netreduce-fallback.json", sim_netreduce_fallback_table),
    "sim-netreduce-rs-ag": ("sim-netreduce-rs-ag.json", sim_netreduce_rs_ag_table),
    "scaling-graph": ("scaling-graph.json", scaling_graph_table),
    "engines-sim": ("engines-sim.json", engines_sim_table),
    "engines-sim-dlcp": ("engines-sim.json", engines_sim_dlcp_table),
    "training-graph": ("training-graph.json", training_graph_table),
    "training-graph-10mbps": (TRAINING_GRAPH_10, lambda results: training_graph_table(results, TRAINING_GRAPH_10)),
    "training-graph-ps": (TRAINING_GRAPH_PS, lambda results: training_graph_table(results, TRAINING_GRAPH_PS)),
    "training-graph-ps-priority": (TRAINING_GRAPH_PS_PRIORITY,
                                   lambda results: training_graph_table(results, TRAINING_GRAPH_PS_PRIORITY)),
    "training-graph-leafspine-5mbps": (TRAINING_GRAPH_LEAFSPINE_5,
                                        lambda results: training_graph_table(results, TRAINING_GRAPH_LEAFSPINE_5)),
    "training-graph-priority-10mbps": (TRAINING_GRAPH_PRIORITY_10,
                                        lambda results: training_graph_table(results, TRAINING_GRAPH_PRIORITY_10)),
    "training-graph-leafspine-priority-5mbps": (
        TRAINING_GRAPH_LEAFSPINE_PRIORITY_5,
        lambda results: training_graph_table(results, TRAINING_GRAPH_LEAFSPINE_PRIORITY_5)),
    "goodput": ("goodput.json", goodput_table),
    "goodput-sensitivity": ("goodput.json", goodput_sensitivity_table),
    "goodput-fabric": ("goodput.json", goodput_fabric_table),
    "goodput-interval": ("goodput.json", goodput_interval_table),
}


def generate(results: Path) -> dict[str, str]:
    """Every table whose JSON is under `results`, by name (a table of TABLES whose JSON is missing: an error)."""
    tables = {name: make(results) for name, make in TABLES.items()}
    tables |= {name: make(results) for name, (needs, make) in OPTIONAL_TABLES.items() if (results / needs).exists()}
    return tables
