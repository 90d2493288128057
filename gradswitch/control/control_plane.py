"""The controller of a running network as the REPL and the experiment runner use it.

`ControlPlane` puts together the fabric (one primary P4Runtime session per switch, and the
generic switch API) and the features with state of their own that build on it: NetReduce
jobs, DLCP settings (and the RoCE class), load balancing. Inside `gradswitch net` it is the
controller itself; `gradswitch repl` in another terminal gets one whose parts are proxies of
the controller's (gradswitch/control/control_socket.py), so every write is still made by the one
primary session.

`subscribe` hands the fabric's health events (a switch or link down or up, routes recomputed:
gradswitch/control/health.py) to a callback, in this process only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gradswitch.control.dlcp_settings import DlcpSettings
from gradswitch.control.fabric import Fabric
from gradswitch.control.health import HealthEvent
from gradswitch.control.load_balancing import LoadBalancing
from gradswitch.control.netreduce_jobs import NetReduceJobs


@dataclass(frozen=True)
class ControlPlane:
    fabric: Fabric
    netreduce: NetReduceJobs
    dlcp: DlcpSettings
    balancing: LoadBalancing

    @classmethod
    def over(cls, fabric: Fabric) -> ControlPlane:
        """The control plane of a fabric (connected or not)."""
        return cls(fabric, NetReduceJobs(fabric), DlcpSettings(fabric), LoadBalancing(fabric))

    def subscribe(self, callback: Callable[[HealthEvent], None]) -> Callable[[], None]:
        """Call `callback` with every HealthEvent of the fabric from now on (on the thread that noticed it: return
        quickly, do not write to the switches from it); returns the function that unsubscribes it."""
        return self.fabric.health.subscribe(callback)
