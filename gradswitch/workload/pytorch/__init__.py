"""A user's PyTorch model as a workload: measure it (measure.py: its layers' forward and backward
times and DistributedDataParallel's gradient buckets, on the device the user has), keep what was
measured (profile.py: plain dataclasses, no torch), and build the job's execution graph at any
number of ranks (job_graph.py). Only measure.py imports torch, inside its functions: the rest of
gradswitch runs without it (`pip install 'gradswitch[pytorch]'` brings it)."""
