"""The control plane's heartbeat, the same on both backends (docs/faults.md, "A switch that hangs").

A switch whose process stops (SIGSTOP: the switch-hang fault) keeps its P4Runtime stream open, so nothing tells
the controller it is gone but its silence. Every HEARTBEAT_INTERVAL_S the BMv2 controller (gradswitch/control/
fabric.py) asks every live switch for its pipeline's cookie, a unary read with a deadline of HEARTBEAT_DEADLINE_S;
after a miss it asks again at once, and a switch that missed HEARTBEAT_MISSES deadlines in a row is named hung
and routed around as a dead one is. A switch that stopped answering just after it answered is named hung at
most HUNG_DETECT_BOUND_S later (the next round within H, then M deadlines of D each); the simulator names a hung
switch after that bound (gradswitch/sim/faults.py SWITCH_HANG_DETECT_S).
"""

from __future__ import annotations

HEARTBEAT_INTERVAL_S = 1.0  # H: between two rounds
HEARTBEAT_DEADLINE_S = 2.0  # D: each read's deadline (a cookie-only read answers in ms; 2 s is the loaded machine's)
HEARTBEAT_MISSES = 2  # M: deadlines missed in a row that name a switch hung (one late answer is not enough)
HUNG_DETECT_BOUND_S = HEARTBEAT_INTERVAL_S + HEARTBEAT_MISSES * HEARTBEAT_DEADLINE_S  # H + M x D = 5 s
