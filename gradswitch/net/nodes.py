"""Mininet nodes: a BMv2 switch (simple_switch_grpc in the root namespace) and a host.

Both quiet their interfaces the same way: checksum/segmentation offloads off (TCP through
BMv2 needs it, bmv2#1228) and IPv6 off (no router solicitations or MLD in the traces).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mininet.node import Host, Switch

from gradswitch.net.bmv2 import Bmv2Config, Bmv2Process, default_executable

OFFLOADS = "rx off tx off sg off tso off gso off gro off"


def quiet_interface(node: Any, intf: str) -> None:
    node.cmd(f"ethtool -K {intf} {OFFLOADS} >/dev/null 2>&1")
    node.cmd(f"sysctl -qw net.ipv6.conf.{intf}.disable_ipv6=1")


class GradHost(Host):  # type: ignore[misc]
    """A host whose one interface is eth0, with offloads and IPv6 off."""

    def config(self, **params: Any) -> Any:
        result = super().config(**params)
        for name in ("all", "default", "lo"):
            self.cmd(f"sysctl -qw net.ipv6.conf.{name}.disable_ipv6=1")
        intfs = [i for i in self.intfList() if i.name != "lo"]
        if len(intfs) == 1 and intfs[0].name != "eth0":
            intfs[0].rename("eth0")  # workers and tools address the host's NIC as eth0
        for intf in intfs:
            quiet_interface(self, intf.name)
            # A burst to a neighbour not resolved yet waits for the switch's ARP reply: keep it all
            # (the default queue of ~100 packets silently drops the rest of a window).
            self.cmd(f"sysctl -qw net.ipv4.neigh.{intf.name}.unres_qlen_bytes=16777216")
        return result


class Bmv2Switch(Switch):  # type: ignore[misc]
    """A Mininet switch whose data plane is one simple_switch_grpc process."""

    def __init__(self, name: str, device_id: int, grpc_port: int, thrift_port: int, run_dir: Path,
                 log_level: str = "info", pcap: bool = False, executable: str | None = None, **params: Any) -> None:
        params["inNamespace"] = False  # BMv2 runs in the root namespace, on loopback ports
        super().__init__(name, dpid=f"{device_id + 1:x}", **params)
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.thrift_port = thrift_port
        self.run_dir = run_dir
        self.log_level = log_level
        self.pcap = pcap
        self.executable = executable or default_executable()
        self.bmv2: Bmv2Process | None = None

    def start(self, controllers: list[Any]) -> None:
        ports = {self.ports[intf]: intf.name for intf in self.intfList() if intf.name != "lo"}
        for name in ports.values():
            quiet_interface(self, name)
        self.bmv2 = Bmv2Process(Bmv2Config(
            name=self.name, device_id=self.device_id, grpc_port=self.grpc_port, thrift_port=self.thrift_port,
            ports=ports, run_dir=self.run_dir, log_level=self.log_level, pcap=self.pcap, executable=self.executable))
        self.bmv2.start()

    def stop(self, deleteIntfs: bool = True) -> None:
        if self.bmv2 is not None:
            self.bmv2.stop()
        super().stop(deleteIntfs)

    @property
    def switch_pid(self) -> int | None:
        return self.bmv2.pid if self.bmv2 else None
