"""The collectives of an execution graph on the hosts (gradswitch/hosts/graph_engine.py runs them): one file per
algorithm, each a schedule of steps (schedule.py) that one executor (executor.py) runs over the RoCE
transport, and the inputs and expected outputs every rank checks its result against (data.py)."""
