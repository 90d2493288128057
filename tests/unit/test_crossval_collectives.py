"""bench.crossval's collectives part: the graphs it runs and how it judges BMv2 against ns-3 (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.crossval import table
from bench.crossval_collectives import PATTERNS, REFERENCE, Repetition, Store, judge, pattern_graph
from bench.crossval_figure import MIN_REPETITIONS, TOLERANCE, Figure
from workload.generators import SEND_RECV
from workload.graph import CollectiveKind, CollectiveNode, SendNode


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


def test_store_resumes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.add("rack-n4-all_reduce", "bmv2", Repetition(1, 1.5, True, False, None))
    store.add("rack-n4-all_reduce", "ns3", Repetition(1, 1.4, True, None, None))
    again = Store(tmp_path)
    assert again.has("rack-n4-all_reduce", "bmv2", 1) and not again.has("rack-n4-all_reduce", "bmv2", 2)
    assert again.runs == store.runs
