"""Ring all-reduce and the parameter server as processes in Mininet hosts, through BMv2.

Exact int32 sums on rack and leaf-spine; still exact with 2% loss injected by the switches on
every worker link, in both recovery modes; a crashed worker makes the others fail within a
bounded time with an error naming it; every node knows its peers' addresses before the go.
"""

from __future__ import annotations

import time
from typing import NoReturn

import pytest

from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.placement import job_config, place, topology_for
from gradswitch.experiment.spec import spec_from_dict
from gradswitch.experiment.supervisor import Progress, run_nodes
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.bmv2 import resolve_bmv2
from gradswitch.net.network import NetworkOptions
from tests.results import read, run_compare, run_experiment

pytestmark = pytest.mark.mininet

SMALL = {"size_bytes": 128 << 10, "iterations": 2, "bw_mbps": 20.0, "workers": 4}


def run(tmp_path, **kw) -> dict:
    spec = spec_from_dict({**SMALL, **kw})
    return run_experiment(spec, tmp_path / spec.label, progress=False)


def assert_exact(report: dict) -> None:
    assert report["ok"], report["errors"]
    assert report["summary"]["correct"] and report["summary"]["iterations_done"] == report["spec"]["iterations"]
    assert all(it["wrong_elements"] == 0 for it in report["iterations"])


@pytest.mark.parametrize("topo", ["rack", "leafspine"])
@pytest.mark.parametrize("algo", ["ring", "ps"])
def test_exact_sums(tmp_path, algo, topo):
    report = run(tmp_path, algo=algo, topo=topo)
    assert_exact(report)
    assert report["summary"]["ratio_to_bound"] >= 1.0  # nothing beats the link-rate bound
    assert (tmp_path / report["name"] / "iterations.png").exists()
    # What limited it, and which BMv2 ran (the build GradNetwork resolved, as results.json keeps it).
    extra = report["headline_extra"]
    assert 0.0 < extra["busiest_link_load"] <= 1.02 and 0.0 <= extra["cpu_idle"] <= 1.0  # what a link carried
    assert extra["machine_bound"] == (extra["cpu_idle"] < 0.1 or extra["busiest_link_load"] < 0.8)
    assert report["check"] == "exact"
    build = resolve_bmv2()
    assert report["bmv2"]["path"] == str(build.executable) and report["bmv2"]["logging_macros"] == build.logging
    assert report["bmv2"]["version"] == build.version


@pytest.mark.parametrize("transport", ["gbn", "sr"])
@pytest.mark.parametrize("algo", ["ring", "ps"])
def test_exact_sums_with_two_percent_loss(tmp_path, algo, transport):
    report = run(tmp_path, algo=algo, transport=transport, loss_pct=2.0, topo="rack")
    assert_exact(report)
    switch_drops = sum(s["drops"].get("fault-injected", 0) for s in report["switches"].values())
    assert switch_drops > 0 and report["retransmissions"] > 0  # the loss happened and was repaired


def test_a_crashed_worker_fails_the_run_quickly_and_is_named(tmp_path):
    started = time.monotonic()
    report = run(tmp_path, algo="ring", iterations=4, crash={"node": 2, "after": 0})
    elapsed = time.monotonic() - started
    assert not report["ok"]
    errors = report["errors"]
    assert any("h3" in who and "exit status 3" in err for who, err in errors.items()), errors
    # Every other worker stops (the runner tells them, or their QP to it fails) and names it.
    survivors = {who: err for who, err in errors.items() if "h3" not in who}
    assert len(survivors) == 3 and all("h3" in err for err in survivors.values()), errors
    assert elapsed < 60


def neighbours(net: Testbed, host: str) -> dict[str, str]:
    """IPv4 address -> neighbour state in a host's table (only entries with a link-layer address)."""
    out = net.host(host).cmd("ip -4 neigh show dev eth0")
    return {f[0]: f[-1] for f in (line.split() for line in out.splitlines()) if "lladdr" in f}


def test_every_node_knows_its_peers_addresses_before_the_go(tmp_path):
    """A fresh host knows no neighbour, and the kernel holds a window sent to an unresolved peer, then
    sends it out of order with what follows (gradswitch/roce/resolve.py; the go-back-N episodes it caused). So each
    node resolves the peers of its QPs before it says ready: at the runner's go, every ring neighbour
    is in each host's table, and before the nodes start, none is."""
    spec = spec_from_dict({**SMALL, "algo": "ring", "topo": "leafspine", "iterations": 1})
    with Testbed(topology_for(spec), NetworkOptions(run_dir=tmp_path / "net")) as net:
        cfg = job_config(spec, 1, place(spec, net.topo).jobs[0], net.topo)
        cfg.save(tmp_path / "job1.json")
        hosts = [w.host for w in cfg.workers]
        before = {h: neighbours(net, h) for h in hosts}
        at_go: dict[str, dict[str, str]] = {}
        (tmp_path / "run").mkdir()
        results = run_nodes(net, [cfg], tmp_path, tmp_path / "run", Progress(1, "ring", False),
                            on_go=lambda: at_go.update({h: neighbours(net, h) for h in hosts}))
    assert all(r["ok"] for r in results[1].values()), results
    assert before == {h: {} for h in hosts}
    ring = cfg.workers
    for i, w in enumerate(ring):  # a ring node has QPs to the next worker and from the previous one
        peers = {ring[i - 1].ip, ring[(i + 1) % len(ring)].ip}
        assert {ip: at_go[w.host].get(ip) for ip in peers} == dict.fromkeys(peers, "REACHABLE"), (w.host, at_go)


def test_a_repeated_compare_resumes_where_it_stopped(tmp_path):
    """Two runs, two repetitions each, on real networks: a directory and a seed per repetition, the
    summary's spread from both. Started again on the same directory, nothing runs again."""
    path = tmp_path / "spec.toml"
    path.write_text('name = "twice"\nrepeat = 2\nbaselines = ["ps"]\n[defaults]\nworkers = 2\niterations = 2\n'
                    'size_bytes = 65536\nbw_mbps = 20.0\n[[runs]]\nname = "ring"\n[[runs]]\nname = "ps"\n'
                    'algo = "ps"\n')
    spec = load_spec(path)
    lines: list[str] = []
    summary = run_compare(spec, tmp_path / "out", log=lines.append)
    assert [line.split(" ...")[0] for line in lines if line.startswith("[")] == [
        "[1/4] ring (repetition 1/2)", "[2/4] ps (repetition 1/2)", "[3/4] ring (repetition 2/2)",
        "[4/4] ps (repetition 2/2)"]
    for name in ("ring", "ps"):
        reports = [read(tmp_path / "out" / name / f"rep{k}" / "results.json") for k in (1, 2)]
        assert [r["spec"]["seed"] for r in reports] == [1, 2] and all(r["ok"] for r in reports)
        assert summary[name]["spread"]["median_s"]["n"] == summary[name]["headline_repetitions"] or \
            summary[name]["machine_bound"]
        assert sorted(summary[name]["spread"]["median_s"][k] for k in ("min", "max")) == sorted(
            r["summary"]["median_s"] for r in reports) or summary[name]["machine_bound_repetitions"]
    # measured against the PS unless every repetition of it was machine-bound (a headline never uses one)
    assert summary["ring"]["over_baseline"]["baseline"] == (None if summary["ps"]["machine_bound"] else "ps")

    def must_not_run(*args: object) -> NoReturn:
        raise AssertionError(f"ran again: {args}")

    lines = []
    again = run_compare(spec, tmp_path / "out", runner=must_not_run, log=lines.append)
    assert sum("skipped" in line for line in lines) == 4
    assert again == summary
