"""Small pieces: pcap files, sizes on the command line, the REPL's entry syntax and completion."""

from __future__ import annotations

import pytest

from gradswitch.cli.main import build_parser, parse_size
from gradswitch.control.control_plane import ControlPlane
from gradswitch.control.p4rt import P4Info, TableEntry
from gradswitch.control.p4rt.entities import normalize
from gradswitch.control.pcap import GLOBAL_HEADER, PcapTail, read_pcap, read_timed, record, write_pcap
from gradswitch.control.repl import Repl, ReplError, parse_entry


def test_pcap_round_trip(tmp_path):
    packets = [b"\x00" * 60, bytes(range(200)), b"x"]
    path = tmp_path / "t.pcap"
    write_pcap(path, packets, start_us=5_000_000, step_us=10)
    assert read_pcap(path) == packets
    assert [ts for ts, _ in read_timed(path)] == [5_000_000, 5_000_010, 5_000_020]


def test_pcap_cut_inside_a_record_keeps_whole_records(tmp_path):
    path = tmp_path / "t.pcap"
    write_pcap(path, [b"a" * 10, b"b" * 10])
    path.write_bytes(path.read_bytes()[:-3])
    assert read_pcap(path) == [b"a" * 10]


def test_a_pcap_being_written_is_followed_record_by_record(tmp_path):
    """PcapTail (the closed loops of trace replay) counts whole records as a writer adds them, a
    record cut by the writer's buffer counted only once complete, reading each byte once."""
    path = tmp_path / "out.pcap"
    tail = PcapTail(path)
    assert tail.poll() == 0  # no file yet
    with path.open("wb", buffering=0) as f:
        f.write(GLOBAL_HEADER[:10])
        assert tail.poll() == 0
        f.write(GLOBAL_HEADER[10:] + record(b"a" * 60, 5))
        assert tail.poll() == 1
        second = record(b"b" * 100, 7)
        f.write(second[:30])
        assert tail.poll() == 1
        f.write(second[30:] + record(b"c" * 64, 9) + record(b"d" * 64, 11))
        assert tail.poll() == 4
    assert tail.poll() == 4
    tail.close()
    assert len(read_pcap(path)) == 4


@pytest.mark.parametrize(("text", "value"), [("8MiB", 8 << 20), ("512KiB", 512 << 10), ("1000", 1000),
                                             ("1.5MiB", 3 << 19), ("2MB", 2_000_000)])
def test_sizes(text, value):
    assert parse_size(text) == value


def test_cli_parses_the_documented_commands():
    p = build_parser()
    a = p.parse_args(["net", "--topo", "leafspine", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2",
                      "--pingall"])
    assert (a.topo, a.leaves, a.spines, a.hosts_per_leaf, a.pingall) == ("leafspine", 2, 2, 2, True)
    a = p.parse_args(["experiment", "--algo", "ring", "--workers", "4", "--size", "8MiB", "--iterations", "10",
                      "--topo", "rack", "--bw", "100", "--loss", "2", "--transport", "sr", "--out", "x"])
    assert (a.algo, a.workers, a.bw, a.loss, a.transport) == ("ring", 4, 100.0, 2.0, "sr")


def test_repl_entry_syntax():
    p4info = P4Info.from_file()
    e = parse_entry(p4info, "ipv4_routes", ["dst_addr=10.0.9.0/24", "->", "set_next_hop", "port=3",
                                            "dst_mac=02:00:00:02:00:01"], with_action=True)
    expected = TableEntry("ipv4_routes", {"hdr.ipv4.dst_addr": "10.0.9.0/24"}, "set_next_hop",
                          {"port": 3, "dst_mac": "02:00:00:02:00:01"})
    assert normalize(p4info, e) == normalize(p4info, expected)
    acl = parse_entry(p4info, "acl_rules", ["protocol=17", "priority=7", "->", "drop"], with_action=True)
    assert acl.priority == 7 and acl.action == "drop"
    with pytest.raises(ReplError, match="give the action after '->'"):
        parse_entry(p4info, "ipv4_routes", ["dst_addr=10.0.0.0/8"], with_action=True)
    with pytest.raises(ReplError, match="expected KEY=VALUE"):
        parse_entry(p4info, "ipv4_routes", ["10.0.0.0/8"], with_action=False)


class _NoFabric:
    def switch_names(self):
        return ["leaf1", "leaf2", "spine1"]


def _offline() -> ControlPlane:
    """A control plane whose fabric only knows its switch names (completion and parsing need no switch)."""
    return ControlPlane(_NoFabric(), None, None, None)  # type: ignore[arg-type]


def test_repl_completes_switches_tables_fields_and_actions():
    r = Repl(_offline())
    assert r.completenames("pac") == ["packet-in", "packet-out"]
    assert r.completenames("roce") == ["roce-class"] and r.completenames("bal") == ["balance"]
    assert r.complete_roce_class("o", "roce-class o", 0, 0) == ["on", "off"]
    assert r.complete_roce_class("", "roce-class on ", 0, 0) == []
    assert r.complete_balance("", "balance ", 0, 0) == ["ecmp", "flowlet", "gap=", "seed="]
    assert r.complete_balance("s", "balance flowlet s", 0, 0) == ["seed="]
    assert r.complete_insert("le", "insert le", 0, 0) == ["leaf1", "leaf2"]
    assert "ipv4_routes" in r.complete_insert("ipv4", "insert leaf1 ipv4", 0, 0)
    assert r.complete_insert("", "insert leaf1 ipv4_routes ", 0, 0) == ["dst_addr=", "->"]
    assert r.complete_insert("set", "insert leaf1 ipv4_routes dst_addr=10.0.0.0/8 -> set", 0, 0) == [
        "set_next_hop", "set_ecmp_group", "set_flowlet_group"]
    assert r.complete_insert("", "insert leaf1 ipv4_routes dst_addr=1 -> set_next_hop ", 0, 0) == ["port=", "dst_mac="]
    assert "priority=" in r.complete_insert("", "insert leaf1 acl_rules ", 0, 0)


def test_repl_reports_errors_without_dying():
    out: list[str] = []
    r = Repl(_offline(), out=out.append)
    r.onecmd("entries nowhere ipv4_routes")
    r.onecmd("frobnicate")
    r.onecmd("insert leaf1 no_such_table x=1 -> y")
    assert out[0].startswith("error: no switch 'nowhere'")
    assert "unknown command 'frobnicate'" in out[1]
    assert out[2].startswith("error: no table 'no_such_table'")
