"""Parameter servers in the simulator's graph engine (algo = ps: gradswitch/sim/ns3/model/gs-graph-rank.cc RunPs,
gs-graph-ps-server.cc; docs/collectives.md "Through parameter servers"), as a user types it: a 4-rank world
all-reduce trace of 4 MiB at 10 Gb/s on the rack through one server and through two, every output checked exact,
reported as `ps` with its bound N S/(P B), within the key pipeline's time of it, twice as fast with twice the
servers, and within 5 % of the old engine's parameter-server all-reduce of the same size; a graph with the
servers' all-reduces in flight beside the hosts' collectives, exact under 2 % loss."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.workload.chakra import write_traces
from tests.graphs import in_network_and_hosts, trace_figures

pytestmark = pytest.mark.ns3

GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]
SIZE = 4 << 20
KEY = 64 << 10  # the spec's ps_key_bytes: 64 keys
MBPS = 10_000
RATE = MBPS * 1e6 / 8


def gradswitch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADSWITCH, *args], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)


def experiment(out: Path, *args: str) -> str:
    done = gradswitch("experiment", "--backend", "ns3", "--bw", str(MBPS), "--topo", "rack", "--out", str(out), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("ps")
    prefix = tmp / "et" / "ar"
    made = gradswitch("export-et", "--collective", "all_reduce", "--workers", "4", "--size", "4MiB", "--out",
                      str(prefix))
    assert made.returncode == 0, made.stderr
    out: dict[str, Any] = {}
    for servers in (1, 2):
        said = experiment(tmp / f"ps{servers}", "--workload-et", str(prefix), "--algo", "ps", "--servers",
                          str(servers))
        assert "checks: every output exact" in said, said
        out[f"ps{servers}"] = trace_figures(tmp / f"ps{servers}" / "results.json")
        out[f"sim{servers}"] = json.loads((tmp / f"ps{servers}" / "sim" / "sim-results.json").read_text())
    experiment(tmp / "old", "--algo", "ps", "--servers", "1", "--workers", "4", "--size", "4MiB", "--iterations", "1")
    out["old"] = json.loads((tmp / "old" / "results.json").read_text())
    return out


@pytest.mark.parametrize("servers", [1, 2])
def test_a_world_all_reduce_trace_through_servers_is_exact_near_its_bound(runs, servers):
    report = runs[f"ps{servers}"]
    assert report["checked"] and not report["errors"]
    assert [n["checked"] for n in report["run"]["nodes"]] == [True] * 4
    (c,) = report["collectives"]
    assert c["algorithm"] == "ps"
    assert c["bound_s"] == pytest.approx(4 * SIZE / (servers * RATE))  # N S/(P B)
    # a server's link out waits for its first key's pushes: (1 + P k/S) x the bound, then headers
    assert 1.0 + servers * KEY / SIZE <= c["time_s"] / c["bound_s"] <= 1.1 + servers * KEY / SIZE, c
    assert report["hosts"][4:] == ["h5", "h6"][:servers]  # each server on a host of its own
    served = [n["keys_served"] for n in runs[f"sim{servers}"]["jobs"][0]["nodes"] if n["role"] == "server"]
    assert served == [SIZE // KEY // servers] * servers


def test_two_servers_halve_its_time(runs):
    (one,), (two,) = runs["ps1"]["collectives"], runs["ps2"]["collectives"]
    assert one["time_s"] / two["time_s"] == pytest.approx(2.0, rel=0.05)


def test_it_takes_the_old_engines_parameter_server_time_within_5_percent(runs):
    """The same all-reduce as `gradswitch experiment --backend ns3 --algo ps --size 4MiB` runs it (one iteration
    of the all-reduce loop, the same placement, transport and keys)."""
    (it,) = runs["old"]["iterations"]
    assert it["correct"]
    (ps,) = runs["ps1"]["collectives"]
    assert ps["time_s"] == pytest.approx(it["time_s"], rel=0.05), (ps["time_s"], it["time_s"])


def test_servers_beside_the_hosts_collectives_under_loss_exact(tmp_path: Path):
    """Two world all-reduces through two servers, in flight with the pairs' rings, a reduce-scatter, an
    all-gather and an all-to-all on the hosts; 2 % of packets lost on every rank's link: every output exact."""
    graph = in_network_and_hosts(4, 200_004)
    write_traces(graph, tmp_path / "et" / "mixed")
    experiment(tmp_path / "run", "--workload-et", str(tmp_path / "et" / "mixed"), "--algo", "ps", "--servers", "2",
               "--ps-key", "16KiB", "--loss", "2")
    report = trace_figures(tmp_path / "run" / "results.json")
    assert report["checked"] and not report["errors"], report["errors"]
    algos = {(c["group"], c["collective"], c["index"]): c["algorithm"] for c in report["collectives"]}
    assert algos[("world", "all_reduce", 0)] == algos[("world", "all_reduce", 4)] == "ps"
    assert algos[("pair0", "all_reduce", 0)] == "ring" and algos[("world", "all_to_all", 3)] == "pairwise"
    assert report["resent_packets"] > 0
