"""gradswitch on ns-3: the simulator's configuration and results (docs/simulator.md).

The per-packet models are C++ (gradswitch/sim/ns3, built by `make sim`); this package writes one run's
configuration from the topology, the jobs' JobConfig and the run's SimSettings, runs the binary and
returns per-node results in the schema of the BMv2 workers' result files:

    from gradswitch.sim import SimSettings, run
    result = run(topology, [job_config], SimSettings(), out_dir)
    result.nodes[job_id][node_id]   # as gradswitch/hosts/main.py's result-<id>.json
    run(topology, jobs, settings, out_dir, ranks=4)   # the same run over 4 MPI ranks (the MPI build, mpirun)
"""

from gradswitch.sim.ranks import MpiSync
from gradswitch.sim.results import MpiStats, SimResult, SimSpeed
from gradswitch.sim.run import SimError, read, run
from gradswitch.sim.sim_settings import Background, CheckMode, DlcpSwitch, LoadBalance, SimSettings, TensorLightsSetting

__all__ = ["Background", "CheckMode", "DlcpSwitch", "LoadBalance", "MpiStats", "MpiSync", "SimError", "SimResult",
           "SimSettings", "SimSpeed", "TensorLightsSetting", "read", "run"]
