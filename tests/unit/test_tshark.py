"""tshark's InfiniBand dissector, an independent decoder, reads every packet type we send."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from gradswitch.control.pcap import write_pcap
from gradswitch.roce.wire import build_frame
from tests.unit.test_roce_packets import SENT_OPCODES, _sample

pytestmark = pytest.mark.tshark

FIELDS = ["infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.reserved7",
          "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.aeth.msn",
          "infiniband.immdt", "infiniband.invariant.crc", "_ws.malformed", "_ws.expert.severity"]


def test_tshark_decodes_every_packet_type(tmp_path):
    frames = []
    for op in SENT_OPCODES:
        t = _sample(op)
        frames.append((op, t, build_frame(t, "10.0.1.1", "10.0.1.2", "00:00:0a:00:01:01", "00:00:0a:00:01:02")))
    pcap = tmp_path / "ours.pcap"
    write_pcap(pcap, [f for _, _, f in frames])
    args = [shutil.which("tshark") or "tshark", "-r", str(pcap), "-T", "json"]
    for f in FIELDS:
        args += ["-e", f]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    decoded = [p["_source"]["layers"] for p in json.loads(out.stdout)]
    assert len(decoded) == len(frames)
    for (op, t, frame), d in zip(frames, decoded, strict=True):
        assert "_ws.malformed" not in d, (op, d)
        assert "error" not in " ".join(d.get("_ws.expert.severity", [])), (op, d)
        assert int(d["infiniband.bth.opcode"][0]) == int(op)
        assert int(d["infiniband.bth.destqp"][0], 0) == t.bth.dest_qp
        assert int(d["infiniband.bth.psn"][0]) == t.bth.psn
        assert int(d["infiniband.invariant.crc"][0], 0) == int.from_bytes(frame[-4:], "big")  # as on the wire
        if t.reth is not None:
            assert int(d["infiniband.reth.va"][0], 0) == t.reth.virtual_addr
            assert int(d["infiniband.reth.r_key"][0], 0) == t.reth.rkey
            assert int(d["infiniband.reth.dmalen"][0]) == t.reth.dma_length
        if t.aeth is not None:
            assert int(d["infiniband.aeth.msn"][0]) == t.aeth.msn
        if t.imm is not None:
            assert int(d["infiniband.immdt"][0].replace(":", ""), 16) == t.imm  # shown as bytes
