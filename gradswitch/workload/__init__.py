"""What a job computes and communicates, independent of the network that carries it: the job's description
(job.py), model profiles and the compute model of emulated devices (compute.py, gradients.py, models/), the plan of a
training iteration (plan.py), how gradients are encoded for an integer sum (encoding.py, floats.py), DLCP's packet
classes (dlcp.py) and what a worker reports (records.py)."""
