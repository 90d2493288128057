"""The bulk TCP background traffic's ports, one definition for the testbed (iperf3) and the simulator (gs-tcp.cc's
kServerPort and kClientPortBase; tests/unit/test_background_paths.py fails when they drift)."""

from __future__ import annotations

BACKGROUND_PORT = 5299  # the receiver's iperf3 server port
# Stream k's client port on the simulator always, on the testbed with `background_fixed_ports` (iperf3 --cport):
# ECMP hashes the ports, so fixed ones put the streams on the same paths every run.
CLIENT_PORT_BASE = 40000
