"""DLCP end to end: a model trained through the BMv2 fabric, exact through lossy links and with the
switches trimming droppable packets; spraying on a fabric where flow hashing collides, with
order-tolerant receivers.

The training runs (an MLP on scikit-learn's digits, 4 ring workers on a 2x2 leaf-spine fabric,
gradients exchanged as RoCE through the switches): `exact`, with 3 % of the RoCE packets on every
worker link dropped by the switches' fault-injection table, retransmits every lost packet and
checks every sum exactly; `trimmed` has every gradient packet droppable and the switches' drop
threshold at zero: every droppable packet is trimmed (its payload dropped, its headers forwarded),
the receivers zero-fill them within a 25 % budget and have the rest resent, and the job completes
within its error bound; the default thresholds come back after it.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gradswitch.control.repl import Repl
from gradswitch.control.routing import ecmp_member
from gradswitch.experiment.compare import load_spec
from gradswitch.experiment.network_settings import RunSettings
from gradswitch.experiment.placement import Placement, topology_for
from gradswitch.experiment.shipped_specs import EXPERIMENTS
from gradswitch.experiment.spec import ExperimentSpec, spec_from_dict
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.protocol.ecmp import Balancing
from gradswitch.topology.generators import leafspine
from tests.results import run_on

pytestmark = pytest.mark.mininet

TRAIN: dict[str, Any] = {"algo": "ring", "workers": 4, "topo": "leafspine", "workload": "train-digits",
                         "dtype": "float32", "iterations": 30, "transport": "sr", "bw_mbps": 20.0, "mtu": 1024}
LOSSY: dict[str, Any] = {"drop": True, "loss_budget": 0.25, "drop_min_layer_class": 0, "drop_max_magnitude_class": 3,
                         "max_relative_error": 1.0}


def accuracy(report: dict[str, Any]) -> list[float]:
    return [it["accuracy"] for it in report["iterations"]]


def digests(report: dict[str, Any]) -> set[str]:
    """The workers' model digests at the end (gradswitch/hosts/digits_job.py)."""
    return {node["model_digest"] for node in report["extra"].values() if "model_digest" in node}


def test_training_learns_through_lossy_links_with_every_sum_exact(tmp_path):
    spec = spec_from_dict({**TRAIN, "name": "exact", "loss_pct": 3.0})
    with Testbed(topology_for(spec), NetworkOptions(run_dir=tmp_path / "net")) as net:
        exact = run_on(net, spec, tmp_path / "exact")
    assert exact["ok"], exact["errors"]
    assert len(accuracy(exact)) == TRAIN["iterations"]
    assert accuracy(exact)[0] < 0.5 < 0.8 < accuracy(exact)[-1]  # from near chance to well above it
    assert all(it["wrong_elements"] == 0 for it in exact["iterations"])
    assert exact["headline_extra"]["zero_filled_packets"] == 0 and exact["retransmissions"] > 0
    assert len(digests(exact)) == 1  # every worker's model the same at the end


def test_switches_trim_droppable_packets_and_receivers_zero_fill_them(tmp_path):
    spec = spec_from_dict({**TRAIN, "iterations": 8, "name": "trimmed",
                           "dlcp": {**LOSSY, "priority": True, "threshold_bytes": 0}})
    # Then a run on the same network with priority only: its report counts its own events, not the first run's.
    after = spec.but(name="after", iterations=2, dlcp=replace(spec.transport.dlcp, drop=False, threshold_bytes=None))
    with Testbed(topology_for(spec), NetworkOptions(run_dir=tmp_path / "net")) as net:
        trimmed = run_on(net, spec, tmp_path / "trimmed")
        thresholds = net.fabric.session("leaf1").read_table("dlcp_drop_thresholds")
        later = run_on(net, after, tmp_path / "after")
    assert later["ok"], later["errors"]
    assert later["headline_extra"]["dlcp_dropped"] == 0, later["headline_extra"]
    assert trimmed["ok"], trimmed["errors"]
    assert thresholds and all(int(e.params["bytes"]) > 0 for e in thresholds)  # the defaults are back
    dropped, zero = trimmed["headline_extra"]["dlcp_dropped"], trimmed["headline_extra"]["zero_filled_packets"]
    assert dropped > 0 and zero > 0  # the switches trimmed, the receivers zero-filled
    refused = {k: v for k, v in trimmed["host_drops"].items() if k in ("malformed", "truncated", "bad-icrc")}
    assert not refused, refused  # every trimmed packet accepted: its lengths and its fresh ICRC are right
    assert zero <= dropped and trimmed["retransmissions"] >= dropped - zero  # over the budget: resent
    assert all(it["correct"] and it["relative_error"] <= LOSSY["max_relative_error"] for it in trimmed["iterations"])
    assert any(it["relative_error"] > 0 for it in trimmed["iterations"])


def test_spraying_evens_out_colliding_uplinks_and_order_tolerant_receivers_resend_nothing(tmp_path):
    """gradswitch/specs/dlcp-spray.toml's `alternate` placement, shortened: a ring of 8 workers whose every hop
    crosses a fabric of 2 leaves and 4 spines trains VGG-16. ECMP (seed 0) hashes leaf1's 4 flows onto 2 of
    its 4 uplinks (two carry two flows each, the others nothing); spraying loads all of them evenly and trains
    faster. Order-tolerant receivers resend (next to) nothing under spraying's reordering, never more than the
    previous receivers, which judge a hole a reorder delay after the first packet past it. Links at 1 Mb/s (the
    spec's 2 Mb/s left spraying machine-bound in CI: 5 % of the CPU idle, spraying no faster than ECMP)."""
    spec = load_spec(EXPERIMENTS / "dlcp-spray.toml")
    runs = {r.label: r.but(iterations=3, scale=0.00025, bw_mbps=1)
            for r in spec.runs if r.label.startswith("alternate-")}
    runs = {"ecmp": runs["alternate-ecmp"], "spray": runs["alternate-spray"]}
    sprayed = runs["spray"].transport.dlcp
    runs["spray-reorder-delay"] = runs["spray"].but(name="spray-reorder-delay", dlcp=replace(
        sprayed, hosts=replace(sprayed.hosts, order_tolerant=False)))
    reports = {}
    with Testbed(topology_for(runs["ecmp"]), NetworkOptions(run_dir=tmp_path / "net")) as net:
        for name, run in runs.items():
            reports[name] = run_on(net, run, tmp_path / name, progress=False)
    for report in reports.values():
        assert report["ok"], report["errors"]
        assert all(it["wrong_elements"] == 0 for it in report["iterations"])
    ecmp, spray, previous = (reports[n] for n in ("ecmp", "spray", "spray-reorder-delay"))
    assert ecmp["headline_extra"]["uplink_imbalance"] > 1.5, ecmp["link_loads"]  # a collision
    assert spray["headline_extra"]["uplink_imbalance"] < 1.15, spray["link_loads"]  # every spine alike
    assert spray["training"]["samples_per_s_real"] > 1.1 * ecmp["training"]["samples_per_s_real"]
    # At 1 Mb/s a 1 KiB packet takes 8 ms on a link, so spraying's reordering seldom outlasts the previous receivers'
    # reorder delay: they resent 2 packets in one run, none in another. The order-tolerant ones resend (next to)
    # nothing, and never more.
    assert spray["retransmissions"] <= min(2, previous["retransmissions"]), (spray["retransmissions"],
                                                                            previous["retransmissions"])


def burst_sender(dst: str, sport: int, bursts: int, size: int, pause_s: float) -> str:
    """A UDP flow from a fixed source port: bursts of datagrams with idle pauses between them."""
    return textwrap.dedent(f"""
        import socket, time
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", {sport}))
        for b in range({bursts}):
            for i in range({size}):
                s.sendto(bytes(100), ("{dst}", 9))
            time.sleep({pause_s})
    """)


def uplink_packets(net: Testbed, uplinks: list[int], send: Callable[[], None]) -> dict[int, int]:
    """Packets leaf1 sent out of each uplink while `send` ran (its port counters, before and after)."""
    before = {p.port: p.tx_packets for p in net.fabric.port_stats("leaf1")}
    send()
    after = {p.port: p.tx_packets for p in net.fabric.port_stats("leaf1")}
    return {u: after[u] - before[u] for u in uplinks}


def test_load_balancing_settings_move_a_real_flow_over_the_expected_uplinks(tmp_path):
    """On a running leaf-spine network, a UDP flow from h1 to h3 leaves leaf1 by the uplink the ECMP hash's
    model says; a run's ecmp_seed (RunSettings) and the REPL's `balance seed=` move it where the model says
    for that seed, and undoing puts it back; with flowlets (gap 20 ms) the same flow sent as bursts 150 ms
    apart uses both uplinks; the RoCE class is on for the run only."""
    topo = leafspine(leaves=2, spines=2, hosts_per_leaf=2, bw_mbps=20)
    h1, h3 = topo.host("h1"), topo.host("h3")
    uplinks = [3, 4]
    sport = 6000
    plain = uplinks[ecmp_member(h1.ip, h3.ip, 17, sport, 9, 2)]
    seed = next(s for s in range(1, 100) if uplinks[ecmp_member(h1.ip, h3.ip, 17, sport, 9, 2, s)] != plain)
    other = next(u for u in uplinks if u != plain)
    placement = Placement([], None, None)

    with Testbed(topo, NetworkOptions(run_dir=tmp_path / "net")) as net:
        control = net.control
        assert control is not None

        def flow(bursts: int = 10, size: int = 20, pause_s: float = 0.02) -> Callable[[], None]:
            script = burst_sender(h3.ip, sport, bursts, size, pause_s)
            return lambda: net.host("h1").cmd(f"{sys.executable} -c '{script}'")

        def settings(**fields: Any) -> RunSettings:
            return RunSettings(net, ExperimentSpec.of(**fields), [], placement, tmp_path)

        def on_one(counts: dict[int, int], uplink: int) -> bool:  # (a few of the 200 may be lost on the way in)
            return counts[uplink] >= 180 and sum(counts.values()) - counts[uplink] < 5

        first = uplink_packets(net, uplinks, flow())
        assert on_one(first, plain), (first, plain)
        with settings(ecmp_seed=seed, roce_class=True):
            seeded = uplink_packets(net, uplinks, flow())
            assert control.balancing.current() == Balancing(seed=seed)
            roce_class_on = [control.dlcp.roce_class()] + [
                bool(net.fabric.session(s).read_table("roce_class")) for s in net.fabric.switch_names()]
        assert on_one(seeded, other), (seeded, other, seed)
        assert all(roce_class_on) and not control.dlcp.roce_class()
        undone = uplink_packets(net, uplinks, flow())
        assert on_one(undone, plain), (undone, plain)  # the run's seed was undone

        said: list[str] = []
        repl = Repl(control, out=said.append)
        repl.onecmd(f"balance seed={seed}")
        by_repl = uplink_packets(net, uplinks, flow())
        repl.onecmd("balance seed=0")
        assert said == [f"load balancing: ecmp, seed {seed}", "load balancing: ecmp, seed 0"], said
        assert on_one(by_repl, other), (by_repl, other)

        with settings(load_balance="flowlet", flowlet_gap_us=20_000):
            repl.onecmd("balance")
            flowlets = uplink_packets(net, uplinks, flow(bursts=30, size=10, pause_s=0.15))
        assert said[-1] == "load balancing: flowlet, gap 20000 us, seed 0", said
        # 30 flowlets, each on a member drawn at random: both uplinks carry some (all alike: probability 2^-29).
        assert sum(flowlets.values()) >= 300 and min(flowlets.values()) >= 10, flowlets
        assert control.balancing.current() == Balancing()
