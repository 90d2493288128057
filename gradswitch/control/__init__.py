"""The switch control plane: P4Runtime sessions with every BMv2 switch of a topology, the controls' entries,
routing, NetReduce jobs, DLCP and load balancing at run time, and the REPL."""
