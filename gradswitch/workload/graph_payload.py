"""What a graph run's communication carries (GraphJob.payload).

`synthetic` (the default): every operation's input is drawn from the job's seed and its output checked against
what the operation defines (gradswitch/hosts/collectives/data.py); any graph, either backend (the simulator checks it by
digest). `train-digits`: the graph is gradswitch.workload.generators.digits_graph and each all-reduce carries a rank's
real gradient of the digits MLP (gradswitch/hosts/graph_digits.py), checked exactly against the sum the rank computes of
every worker's gradient; the hosts only (BMv2): the simulator's ranks compute no model. Such a run reports as the
loop's (gradswitch/experiment/runner.py: results.json with its accuracy per iteration and each worker's digest).
`gradients`: a float32 job's all-reduces in a row (gradswitch.workload.generators.plain_graph), each carrying a rank's
float32 gradient of its tensor as the loop's (the job's seed), encoded by the job's float mode
(gradswitch/hosts/graph_gradients.py): checked exactly on the wire, and each sum decoded against the float64 sum of
the ranks' gradients (results.json's max_abs_error, as the loop's); the hosts only (the simulator adds integers).
"""

from __future__ import annotations

from gradswitch.protocol.choice import Choice


class PayloadKind(Choice):
    SYNTHETIC = "synthetic"
    DIGITS = "train-digits"
    GRADIENTS = "gradients"
