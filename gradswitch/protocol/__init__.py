"""What the switch program, the controller and the hosts agree on; the lowest layer of gradswitch.

- `config`: every constant of gradswitch/p4src/include/config.p4 (sizes, protocol numbers, event codes), read
  from that file, which stays their single definition;
- `qpn`: QP numbers and the UDP source ports of their packets;
- `netreduce`: the layout of a NetReduce job (window, keys, PSNs, multicast groups);
- `dlcp`: the class a DLCP packet carries in BTH.resv7;
- `paths`: where the P4 program, its build and run directories are;
- `polling`: `wait_until`, the one way any process here waits for a condition (with a deadline).

This package imports nothing else of the project (tests/unit/test_layers.py checks it).
"""
