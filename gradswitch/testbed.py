"""A Mininet network of BMv2 switches with its controller: what `gradswitch net`, the
experiment runner, the benchmarks and the end-to-end tests bring up.

`Testbed` is a `mininet_topos.network.GradNetwork` whose switches, once running, are
programmed by a fabric controller (pipeline and every control's base entries); on leaving,
the controller's sessions close before the switches stop.
"""

from __future__ import annotations

from controller.control_plane import ControlPlane
from controller.fabric import Fabric, switch_addresses
from mininet_topos.network import GradNetwork


class Testbed(GradNetwork):
    __test__ = False  # not a pytest test class, whatever its name

    control: ControlPlane | None = None

    def programmed(self) -> None:
        fabric = Fabric(self.topo, switch_addresses(self.topo, self.options.grpc_base, self.options.thrift_base))
        self.control = ControlPlane.over(fabric)
        fabric.start(timeout=self.options.start_timeout)

    def unprogrammed(self) -> None:
        if self.control is not None:
            self.control.fabric.close()
            self.control = None

    @property
    def fabric(self) -> Fabric:
        """The fabric controller (while the network runs)."""
        if self.control is None:
            raise RuntimeError("the network is not running")
        return self.control.fabric

    def __enter__(self) -> Testbed:
        self.start()
        return self
