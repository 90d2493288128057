"""Register writes through BMv2's Thrift API as gradswitch/control/bmv2_thrift.py makes them: a range is written from
its first index to its last, both included (BMv2's own end index is exclusive: a NetReduce job's teardown used to leave
its last cell and context slots behind, and the next, smaller job of that number stalled; bench.crossval found it)."""

from __future__ import annotations

import pytest

from gradswitch.control.bmv2_thrift import Bmv2Thrift
from gradswitch.control.controls import all_base_entries
from gradswitch.control.controls import netreduce as nr
from gradswitch.control.netreduce_jobs import register_names
from gradswitch.control.trace_replay import TraceSwitch
from gradswitch.topology.generators import rack

pytestmark = pytest.mark.bmv2


def test_a_range_is_written_up_to_its_last_index(tmp_path):
    sw = TraceSwitch([1, 2], run_dir=tmp_path)
    sw.start(all_base_entries(rack(hosts=2), "s1"))
    try:
        cells, contexts = register_names()[nr.CELLS], register_names()[nr.QP_CONTEXT]
        with Bmv2Thrift(sw.address.thrift_port) as thrift:
            thrift.register_write_range(cells, 3, 5, 7)
            thrift.register_write_range(contexts, 8, 15, 9)
            got_cells, got_contexts = thrift.register_read_all(cells), thrift.register_read_all(contexts)
            thrift.register_write_range(cells, 0, 31, 0)  # a job's whole region back to zero, as a teardown does
            cleared = thrift.register_read_all(cells)
    finally:
        sw.stop()
    assert [i for i, v in enumerate(got_cells) if v] == [3, 4, 5] and got_cells[5] == 7
    assert [i for i, v in enumerate(got_contexts) if v] == list(range(8, 16))
    assert not any(cleared)
