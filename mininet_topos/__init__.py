"""Mininet networks of BMv2 switches: switch and host nodes, topologies as data, bring-up and teardown."""
