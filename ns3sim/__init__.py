"""gradswitch on ns-3: the simulator's configuration and results (docs/simulator.md).

The per-packet models are C++ (sim/ns3, built by `make sim`); this package writes one run's
configuration from the topology, the jobs' JobConfig and the run's SimSettings, runs the binary and
returns per-node results in the schema of the BMv2 workers' result files:

    from ns3sim import SimSettings, run
    result = run(topology, [job_config], SimSettings(), out_dir)
    result.nodes[job_id][node_id]   # as workers/main.py's result-<id>.json
"""

from ns3sim.results import SimResult, SimSpeed
from ns3sim.run import SimError, run
from ns3sim.settings import Background, CheckMode, DlcpSwitch, LoadBalance, SimSettings, TensorLightsSetting

__all__ = ["Background", "CheckMode", "DlcpSwitch", "LoadBalance", "SimError", "SimResult", "SimSettings",
           "SimSpeed", "TensorLightsSetting", "run"]
