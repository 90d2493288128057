"""Workers that run in Mininet hosts: ring all-reduce, parameter server, in-network aggregation."""
