"""bench.crossval's collectives part: the graphs it runs and how it judges BMv2 against ns-3 (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.crossval import table
from bench.crossval_collectives import (
    PATTERNS,
    REFERENCE,
    Store,
    every_pattern,
    in_network_patterns,
    judge,
    pattern_algo,
    pattern_graph,
    server_patterns,
)
from gradswitch.experiment.crossval import MIN_REPETITIONS, TOLERANCE, Figure, Repetition, host_pattern
from gradswitch.workload.generators import SEND_RECV
from gradswitch.workload.graph import CollectiveKind, CollectiveNode, SendNode


def reps(*times: float, bound: tuple[int, ...] = (), wrong: tuple[int, ...] = ()) -> list[Repetition]:
    return [Repetition(i + 1, t, i not in wrong, i in bound, "cpu" if i in bound else None)
            for i, t in enumerate(times)]


def all_runs(bmv2: dict[str, list[Repetition]], ns3: dict[str, list[Repetition]]
             ) -> dict[str, dict[str, list[Repetition]]]:
    return {f"rack-n4-{p}": {"bmv2": bmv2[p], "ns3": ns3[p]} for p in PATTERNS}


def by_what(figures: list[Figure]) -> dict[str, Figure]:
    return {f.what: f for f in figures}


def test_every_collective_of_the_graph_engines_and_the_reference_first() -> None:
    assert PATTERNS[0] == REFERENCE == "all_reduce"
    assert set(PATTERNS) == {k.value for k in CollectiveKind} | {SEND_RECV}


def test_graphs_one_collective_of_the_buffer_all_gather_a_shard() -> None:
    for pattern in PATTERNS:
        graph = pattern_graph(pattern, 4, 1 << 20)
        assert graph.world_size == 4
        nodes = graph.ranks[0].nodes
        if pattern == SEND_RECV:
            send = next(n for n in nodes if isinstance(n, SendNode))
            assert send.nbytes == 1 << 20 and send.peer == 1
            continue
        (node,) = nodes
        assert isinstance(node, CollectiveNode) and node.collective.value == pattern
        assert node.nbytes == (1 << 18 if pattern == "all_gather" else 1 << 20)


def test_medians_of_usable_runs_and_ratios_to_all_reduce() -> None:
    bmv2 = {p: reps(1.0, 1.1, 1.2) for p in PATTERNS}
    bmv2[REFERENCE] = reps(2.0, 2.2, 9.0, 2.1, bound=(2,))  # the machine-bound 9.0 counts for nothing
    ns3 = {p: reps(1.05, 1.05, 1.05) for p in PATTERNS}
    ns3[REFERENCE] = reps(2.1, 2.1, 2.1)
    ns3["broadcast"] = reps(1.5, 1.5, 1.5)  # 36 % off
    f = by_what(judge(all_runs(bmv2, ns3), ["rack"], [4], MIN_REPETITIONS))
    ref = f["rack N=4 all_reduce (s)"]
    assert ref.bmv2 == pytest.approx(2.1) and ref.ns3 == pytest.approx(2.1) and ref.within is True
    ratio = f["rack N=4 reduce_scatter / all_reduce"]
    assert ratio.bmv2 == pytest.approx(1.1 / 2.1) and ratio.ns3 == pytest.approx(1.05 / 2.1)
    assert ratio.within is True
    assert f["rack N=4 broadcast (s)"].within is False
    assert f["rack N=4 broadcast / all_reduce"].within is False
    assert len(f) == 2 * len(PATTERNS) - 1


def test_a_pair_with_too_few_usable_bmv2_runs_is_not_judged() -> None:
    bmv2 = {p: reps(1.0, 1.0, 1.0) for p in PATTERNS}
    bmv2["all_to_all"] = reps(1.0, 1.0, 1.0, bound=(0,))  # two left
    bmv2["send_recv"] = reps(1.0, 1.0, 1.0, wrong=(1,))  # a wrong output is no time
    ns3 = {p: reps(5.0, 5.0, 5.0) for p in PATTERNS}  # everything far off: only the judged ones fail
    f = by_what(judge(all_runs(bmv2, ns3), ["rack"], [4], MIN_REPETITIONS))
    for pattern in ("all_to_all", "send_recv"):
        assert f[f"rack N=4 {pattern} (s)"].within is None
        assert f[f"rack N=4 {pattern} / all_reduce"].within is None
        assert f[f"rack N=4 {pattern} (s)"].bmv2 == 1.0  # still reported
    assert f["rack N=4 reduce_scatter (s)"].within is False
    assert "not judged" in table(list(f.values()), [])


def test_missing_runs_are_reported_not_judged() -> None:
    f = judge({}, ["leafspine"], [8], MIN_REPETITIONS)
    assert len(f) == 2 * len(PATTERNS) - 1
    assert all(x.bmv2 is None and x.ns3 is None and x.within is None for x in f)


def test_tolerance_edge() -> None:
    bmv2 = {p: reps(1.0, 1.0, 1.0) for p in PATTERNS}
    ns3 = {p: reps(1.0 + TOLERANCE * 0.99, 1.0, 1.0 + TOLERANCE * 0.99) for p in PATTERNS}
    ns3["all_gather"] = reps(*(3 * [1.0 + TOLERANCE * 1.01]))
    f = by_what(judge(all_runs(bmv2, ns3), ["rack"], [4], MIN_REPETITIONS))
    assert f["rack N=4 all_reduce (s)"].within is True
    assert f["rack N=4 all_gather (s)"].within is False


def test_collectives_in_the_switches_over_the_rings_of_the_same_collective() -> None:
    """`all_reduce-netreduce` (and every collective both backends' switches run): its own time on both backends,
    and its time over the ring's of the same collective; the same graph as the ring's, run with algo netreduce."""
    from gradswitch.workload.graph import IN_NETWORK
    from gradswitch.workload.job import Algorithm

    nr = in_network_patterns()
    assert "all_reduce-netreduce" in nr
    assert {host_pattern(p) for p in nr} == {k.value for k in IN_NETWORK}
    assert pattern_algo("all_reduce-netreduce") == Algorithm.NETREDUCE and pattern_algo("all_reduce") == Algorithm.RING
    assert pattern_graph("all_reduce-netreduce", 4, 1 << 20) == pattern_graph("all_reduce", 4, 1 << 20)
    bmv2 = {p: reps(2.0, 2.0, 2.0) for p in PATTERNS} | {p: reps(1.2, 1.3, 1.4) for p in nr}
    ns3 = {p: reps(2.0, 2.0, 2.0) for p in PATTERNS} | {p: reps(1.3, 1.3, 1.3) for p in nr}
    runs = {f"rack-n4-{p}": {"bmv2": bmv2[p], "ns3": ns3[p]} for p in (*PATTERNS, *nr)}
    f = by_what(judge(runs, ["rack"], [4], MIN_REPETITIONS))
    assert f["rack N=4 all_reduce-netreduce (s)"].bmv2 == pytest.approx(1.3)
    ratio = f["rack N=4 all_reduce-netreduce / all_reduce"]
    assert ratio.bmv2 == pytest.approx(0.65) and ratio.ns3 == pytest.approx(0.65) and ratio.within is True
    assert len(f) == 2 * len(PATTERNS) - 1 + 2 * len(nr)
    # a store from before the switches ran them: the host patterns alone, as before
    assert len(judge(all_runs(bmv2, ns3), ["rack"], [4], MIN_REPETITIONS)) == 2 * len(PATTERNS) - 1


def test_the_all_reduce_through_a_parameter_server_over_the_rings() -> None:
    """`all_reduce-ps`: the ring's graph run with algo ps, its time on both backends and over ring all-reduce's."""
    from gradswitch.workload.job import Algorithm

    (ps,) = server_patterns()
    assert ps == "all_reduce-ps" and ps in every_pattern() and host_pattern(ps) == REFERENCE
    assert pattern_algo(ps) == Algorithm.PS
    assert pattern_graph(ps, 4, 1 << 20) == pattern_graph(REFERENCE, 4, 1 << 20)
    bmv2 = {p: reps(2.0, 2.0, 2.0) for p in PATTERNS} | {ps: reps(5.0, 5.2, 5.4)}
    ns3 = {p: reps(2.0, 2.0, 2.0) for p in PATTERNS} | {ps: reps(5.6, 5.6, 5.6)}
    runs = {f"rack-n4-{p}": {"bmv2": bmv2[p], "ns3": ns3[p]} for p in (*PATTERNS, ps)}
    f = by_what(judge(runs, ["rack"], [4], MIN_REPETITIONS))
    assert f["rack N=4 all_reduce-ps (s)"].bmv2 == pytest.approx(5.2)
    ratio = f["rack N=4 all_reduce-ps / all_reduce"]
    assert ratio.bmv2 == pytest.approx(2.6) and ratio.ns3 == pytest.approx(2.8) and ratio.within is True
    assert len(f) == 2 * len(PATTERNS) - 1 + 2


def test_store_resumes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.add("rack-n4-all_reduce", "bmv2", Repetition(1, 1.5, True, False, None))
    store.add("rack-n4-all_reduce", "ns3", Repetition(1, 1.4, True, None, None))
    again = Store(tmp_path)
    assert again.has("rack-n4-all_reduce", "bmv2", 1) and not again.has("rack-n4-all_reduce", "bmv2", 2)
    assert again.runs == store.runs


def test_a_kept_repetition_gets_its_busiest_link_and_idle_cpu_from_its_runs_report(tmp_path: Path) -> None:
    import json

    from gradswitch.experiment.graph_run import RESULTS
    from gradswitch.experiment.tables.crossval import crossval_collectives_table

    name = "leafspine-n8-all_to_all"
    kept = {name: {"bmv2": [Repetition(s, 3.5, True, True, "busiest link 73% loaded").to_dict() for s in (1, 2)],
                   "ns3": [Repetition(1, 3.586, True, None, None).to_dict()]}}
    for r in kept[name]["bmv2"] + kept[name]["ns3"]:  # as a store written before the fields existed
        del r["busiest_link"], r["busiest_link_load"], r["cpu_idle"]
    (tmp_path / "repetitions.json").write_text(json.dumps(kept))
    for side, seed, load, idle in (("bmv2", 1, 0.73, 0.41), ("bmv2", 2, 0.71, 0.45), ("ns3", 1, 0.996, None)):
        (tmp_path / name / f"{side}-{seed}").mkdir(parents=True)
        (tmp_path / name / f"{side}-{seed}" / RESULTS).write_text(json.dumps(  # a trace run's, what the store reads
            {"format": 2, "name": name, "summary": {}, "headline_extra": {"cpu_idle": idle},
             "graph": {"busiest_link": "leaf1->spine2", "busiest_link_load": load, "link_drops": 0}}))
    store = Store(tmp_path)
    bmv2 = store.runs[name]["bmv2"]
    assert [(r.busiest_link, r.busiest_link_load, r.cpu_idle) for r in bmv2] == [
        ("leaf1->spine2", 0.73, 0.41), ("leaf1->spine2", 0.71, 0.45)]
    assert store.runs[name]["ns3"][0].busiest_link_load == 0.996 and store.runs[name]["ns3"][0].cpu_idle is None
    # The table says why a pair was not judged: what its machine-bound BMv2 runs had.
    results = tmp_path / "results"
    results.mkdir()
    runs = [{"run": name, "topo": "leafspine", "workers": 8, "pattern": "all_to_all",
             "bmv2": {"median_s": None, "spread_s": None, "usable": 0, "repetitions": [r.to_dict() for r in bmv2]},
             "ns3": {"median_s": 3.586, "spread_s": [3.586, 3.586], "usable": 1,
                     "repetitions": [r.to_dict() for r in store.runs[name]["ns3"]]}}]
    figures = [{"what": "leafspine N=8 all_to_all (s)", "within": None, "usable": False, "error": None}]
    (results / "crossval-collectives.json").write_text(json.dumps(
        {"tolerance": TOLERANCE, "min_repetitions": MIN_REPETITIONS, "figures": figures,
         "runs": {"collectives": {"runs": runs}}}))
    assert "not judged: under 3 BMv2 runs (busiest link 71-73 % loaded, CPU 41-45 % idle)" in \
        crossval_collectives_table(results)


def test_command_line_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --tag or --only is one line naming it and what is allowed, before the machine's lock is waited for
    (parse_args runs outside it); a good tag ends the results' name."""
    from bench.crossval import parse_args

    for argv, says in ((["--tag", "a b"], "--tag 'a b': letters, digits and '-' only"),
                       (["--only", "colectives"], "unknown part 'colectives'")):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert says in capsys.readouterr().err
    assert parse_args(["--only", "collectives", "--workers", "2", "--tag", "n2"]).tag == "n2"
