"""Experiments: the top layer of gradswitch. A spec (spec.py) is placed on a topology
(placement.py), the network gets the run's settings (network_settings.py), the worker processes run
in their hosts (supervisor.py), the switches' counters are read (counters.py), and the results
become results.json, a table and plots (report.py, plots.py); runner.py puts these together
for one experiment, compare.py for a matrix of them.
"""
