"""gradswitch's workloads as execution graphs (gradswitch.workload.graph): one collective repeated, send/recv
between neighbours, a job's all-reduces in a row without training, the data-parallel training job of a model
profile, and train-digits (docs/workloads.md)."""

from gradswitch.workload.generators.collective import SEND_RECV, collective_graph, send_recv_graph
from gradswitch.workload.generators.digits import digits_graph
from gradswitch.workload.generators.plain import plain_graph
from gradswitch.workload.generators.training import iteration_starts, iteration_times, training_graph, training_job

__all__ = ["SEND_RECV", "collective_graph", "digits_graph", "iteration_starts", "iteration_times", "plain_graph",
           "send_recv_graph", "training_graph", "training_job"]
