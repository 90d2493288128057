"""MLCommons Chakra execution traces in and out of gradswitch's execution graphs (docs/workloads.md).

`read_traces(DIR/PREFIX)` reads PREFIX.{rank}.et for ranks 0..N-1 (and PREFIX.groups.json
when there is one) into a checked JobGraph; `write_traces(graph, DIR/PREFIX)` writes one.
"""

from gradswitch.workload.chakra.reader import read_traces, trace_files
from gradswitch.workload.chakra.writer import write_traces

__all__ = ["read_traces", "trace_files", "write_traces"]
