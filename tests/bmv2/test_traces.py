"""Trace replay on real BMv2: committed pcaps through simple_switch_grpc programmed with the
entries the controller installs for that switch, output compared packet by packet."""

from __future__ import annotations

import pytest

from gradswitch.control.controls import all_base_entries
from gradswitch.control.controls import netreduce as nr
from gradswitch.control.controls.packet_io import punt_reason
from gradswitch.control.netreduce_jobs import ActiveJob, place_job
from gradswitch.control.trace_replay import run_trace
from gradswitch.topology.generators import build_topology
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
    jobs: list[ActiveJob] = []
    for spec in meta.get("netreduce", []):  # NetReduce jobs, placed as the controller places them
        jobs.append(place_job(topo, spec["job"], spec["workers"], spec["credits"], jobs))
        entries += jobs[-1].switches[meta["switch"]].entries
    expected_drops = sum(meta["drops"].values())
    result = run_trace(meta["ports"], entries, trace.inputs, {p: len(v) for p, v in trace.expected.items()},
                       run_dir=tmp_path, drops=expected_drops, packet_ins=len(meta["packet_ins"]),
                       counters=[nr.JOB_EVENTS] if jobs else [])
    problems = [d for p in meta["ports"] if (d := diff(result.out(p), trace.expected[p], f"port {p}"))]
    assert not problems, "\n".join(problems)
    assert result.drops == meta["drops"]
    got_ins = [{"ingress_port": md["ingress_port"], "reason": punt_reason(md["reason"]), "payload": payload.hex()}
               for md, payload in result.packet_ins]
    assert got_ins == meta["packet_ins"]
    if jobs:
        events = {str(job): e for job, e in nr.events_by_owner(result.counters[nr.JOB_EVENTS]).items()}
        assert events == meta["events"]


@pytest.mark.tshark
def test_switch_made_results_verify_in_scapy_and_tshark(tmp_path):
    """The ICRC the switch recomputed is what scapy computes from the packet's own fields, and
    tshark (independent of both) decodes every result packet as RoCE without error."""
    import json
    import shutil
    import subprocess

    from scapy.compat import raw
    from scapy.layers.l2 import Ether

    from gradswitch.control.pcap import write_pcap
    from gradswitch.roce.scapy_layers import BTH

    trace = load("netreduce_interleavings")
    meta = trace.meta
    topo_args = dict(meta["topology"])
    topo = build_topology(topo_args.pop("name"), **topo_args)
    job = place_job(topo, 1, meta["netreduce"][0]["workers"], meta["netreduce"][0]["credits"], [])
    result = run_trace(meta["ports"], all_base_entries(topo, "s1") + job.switches["s1"].entries, trace.inputs,
                       {p: len(v) for p, v in trace.expected.items()}, run_dir=tmp_path / "sw", drops=1)
    made = [p for port in meta["ports"] for p in result.out(port)]
    assert len(made) == 24
    for frame in made:
        pkt = Ether(frame)
        pkt[BTH].icrc = None  # let scapy compute it from the fields
        assert raw(pkt)[-4:] == frame[-4:]
    pcap = tmp_path / "results.pcap"
    write_pcap(pcap, made)
    out = subprocess.run([shutil.which("tshark") or "tshark", "-r", str(pcap), "-T", "json", "-e",
                          "infiniband.bth.opcode", "-e", "_ws.malformed"], capture_output=True, text=True, timeout=60)
    decoded = [p["_source"]["layers"] for p in json.loads(out.stdout)]
    assert len(decoded) == 24 and all("_ws.malformed" not in d and "infiniband.bth.opcode" in d for d in decoded)
