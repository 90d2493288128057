"""Trace replay on real BMv2: committed pcaps through simple_switch_grpc programmed with the
entries the controller installs for that switch, output compared packet by packet."""

from __future__ import annotations

import pytest

from controller.controls import all_base_entries
from controller.controls.packet_io import punt_reason
from controller.trace_replay import run_trace
from mininet_topos.topologies import build_topology
from tests.packet_diff import diff
from tests.traces.generate import SCENARIOS, load

pytestmark = pytest.mark.bmv2


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_trace(name, tmp_path):
    trace = load(name)
    meta = trace.meta
    topo_args = dict(meta["topology"])
    topo = build_topology(topo_args.pop("name"), **topo_args)
    entries = all_base_entries(topo, meta["switch"])
    expected_drops = sum(meta["drops"].values())
    result = run_trace(meta["ports"], entries, trace.inputs, {p: len(v) for p, v in trace.expected.items()},
                       run_dir=tmp_path, drops=expected_drops, packet_ins=len(meta["packet_ins"]))
    problems = [d for p in meta["ports"] if (d := diff(result.out(p), trace.expected[p], f"port {p}"))]
    assert not problems, "\n".join(problems)
    assert result.drops == meta["drops"]
    got_ins = [{"ingress_port": md["ingress_port"], "reason": punt_reason(md["reason"]), "payload": payload.hex()}
               for md, payload in result.packet_ins]
    assert got_ins == meta["packet_ins"]
