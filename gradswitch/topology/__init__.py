"""Topologies as data, the same for every backend: hosts, switches and links with their ports and rates
(model.py), and the generators of the testbed's topologies (generators.py). The switch control plane, the Mininet
network and the simulator all read this one model."""
