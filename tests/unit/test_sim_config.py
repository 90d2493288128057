"""The simulator's configuration as gradswitch.sim writes it, without the simulator: the format gradswitch.sim writes
is the one gradswitch-sim reads, and the values come from the Python settings (the only defaults:
tests/ns3/test_sim_config.py shows that gradswitch-sim has none of its own)."""

from __future__ import annotations

import re
from typing import Any

from gradswitch.protocol.ecmp import DEFAULT_FLOWLET_GAP_US
from gradswitch.roce.wire import ROCE_OVERHEAD
from gradswitch.sim.build import SOURCES
from gradswitch.sim.sim_config import FORMAT, run_config, wire_json
from gradswitch.sim.sim_settings import Background, EventList, SimSettings
from gradswitch.topology.generators import rack
from gradswitch.workload.job import Algorithm, JobConfig, Node, Role


def _config(settings: SimSettings) -> dict[str, Any]:
    topo = rack(3, bw_mbps=20)
    nodes = tuple(Node(i, Role.WORKER, h.name, h.ip) for i, h in enumerate(topo.hosts[:2]))
    return run_config(topo, [JobConfig(Algorithm.RING, nodes, iterations=1, size_bytes=4096)], settings)


def test_the_format_written_is_the_one_the_simulator_reads():
    header = (SOURCES / "model" / "gs-keys.h").read_text()  # generated from gradswitch/sim/sim_schema.py
    found = re.findall(r"constexpr uint32_t CONFIG_FORMAT = (\d+);", header)
    assert found == [str(FORMAT)]
    assert _config(SimSettings())["format"] == FORMAT


def test_the_values_the_simulator_once_defaulted_come_from_the_settings():
    config = _config(SimSettings(scheduler=EventList.HEAP, background=Background("h3", "h1", rwnd_bytes=1 << 20,
                                                                                 min_rto_s=0.3)))
    assert config["scheduler"] == "heap"
    assert config["background"] == {"sender": "h3", "receiver": "h1", "flows": 1, "mss": 1024,
                                    "rwnd_bytes": 1 << 20, "min_rto_s": 0.3}
    plain = _config(SimSettings())
    assert plain["scheduler"] == str(SimSettings().scheduler) == "priority-queue"
    assert plain["switch"]["flowlet_gap_s"] == DEFAULT_FLOWLET_GAP_US * 1e-6
    assert plain["wire"] == wire_json(0) and wire_json(0)["roce_overhead"] == ROCE_OVERHEAD

