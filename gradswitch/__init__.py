"""gradswitch: a testbed that puts distributed deep-learning traffic through programmable switches.

One package, its folders the floors of the design; imports only go down (tests/unit/test_layers.py):

  0  protocol    facts the P4 program, its control plane, the hosts and the simulator share (version: the code's)
  1  topology    the backend-neutral topology model;  roce  the host RoCE v2 transport
  2  workload    jobs, model profiles, compute, execution graphs, Chakra;  net  the emulated network (Mininet, BMv2)
  3  hosts       the host processes;  control  the switch control plane (P4Runtime, the REPL);  sim  the ns-3 driver
  4  experiment  specs, placement, runs on BMv2 or ns-3, compare, reports
  5  cli         the command line and its tools (doctor, build, export-et, trace-model, shell)

Package data beside the code: p4src/ (the P4 program and its build), specs/ (the shipped compare specs),
sim/ns3/ (the simulator's C++ models), workload/models/ (model profiles).
"""
