"""Fixtures the Mininet tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions, switch_processes
from gradswitch.topology.generators import leafspine
from tests.mininet.test_network import leftovers


@pytest.fixture
def fabric_net(tmp_path: Path) -> Iterator[Testbed]:
    """A 2x2 leaf-spine with two hosts a leaf, up; afterwards nothing of it is left (interfaces, switch processes)."""
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2)
    net = Testbed(topo, NetworkOptions(run_dir=tmp_path / "net"))
    with net:
        yield net
    names = [h.name for h in topo.hosts] + [s.name for s in topo.switches]
    assert leftovers(tmp_path / "net", names) == []
    assert not [a for a in switch_processes().values() if any(str(tmp_path) in x for x in a)]
