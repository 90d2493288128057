"""The cross-validation's judging (gradswitch/experiment/crossval.py): the ranking of ring, NetReduce and PS
agrees up to ties within the tolerance."""

from __future__ import annotations

from gradswitch.experiment.crossval import judge_allreduce, judge_pair, same_ranking, ties


def test_a_tie_on_both_backends_may_come_in_either_order():
    bmv2 = {"ring": 0.212, "netreduce": 0.214, "ps": 0.496}  # ring 1 % faster: a tie
    ns3 = {"ring": 0.217, "netreduce": 0.216, "ps": 0.497}
    assert same_ranking(bmv2, ns3)
    assert ties(bmv2, ns3) == [["netreduce", "ring"]]


def test_a_clear_order_on_one_backend_must_hold_on_the_other():
    bmv2 = {"ring": 0.30, "netreduce": 0.22, "ps": 1.0}  # NetReduce clearly faster on BMv2...
    ns3 = {"ring": 0.21, "netreduce": 0.22, "ps": 1.0}  # ...ring (a tie here) on ns-3
    assert not same_ranking(bmv2, ns3)
    assert ties(bmv2, ns3) == []
    assert not same_ranking({"ring": 1.0, "netreduce": 2.0, "ps": 3.0}, {"ring": 3.0, "netreduce": 2.0, "ps": 1.0})
    assert same_ranking({"ring": 1.0, "netreduce": 2.0, "ps": 3.0}, {"ring": 1.5, "netreduce": 2.5, "ps": 9.0})


def test_a_missing_time_ranks_nowhere():
    assert not same_ranking({"ring": 1.0, "netreduce": 2.0, "ps": 3.0}, {"ring": 1.0, "netreduce": None, "ps": 3.0})


def test_judge_allreduce_reports_ties_and_judges_only_usable_sides():
    def s(t: float, reps: int = 3) -> dict[str, float]:
        return {"median_s": t, "headline_repetitions": reps}

    summary = {"rack-n2-ring": s(0.212), "rack-n2-netreduce": s(0.214), "rack-n2-ps": s(0.496),
               "rack-n2-ring-ns3": s(0.217), "rack-n2-netreduce-ns3": s(0.216), "rack-n2-ps-ns3": s(0.497),
               "rack-n4-ring": s(0.33), "rack-n4-netreduce": s(0.29, reps=2), "rack-n4-ps": s(1.0),
               "rack-n4-ring-ns3": s(0.33), "rack-n4-netreduce-ns3": s(0.22), "rack-n4-ps-ns3": s(1.0)}
    figures, rankings = judge_allreduce(summary, ["rack"], [2, 4])
    assert [r["same"] for r in rankings] == [True, None]  # N=4: NetReduce's BMv2 side machine-bound
    assert rankings[0]["ties"] == [["netreduce", "ring"]] and rankings[0]["bmv2"][0] == "ring"
    assert len(figures) == 10 and all(f.within for f in figures[:5])


def test_a_pair_whose_simulator_run_failed_is_not_judged():
    summary = {"rack-n2-ring": {"median_s": 0.21, "headline_repetitions": 3},
               "rack-n2-netreduce": {"median_s": 0.21, "headline_repetitions": 3},
               "rack-n2-ps": {"median_s": 0.5, "headline_repetitions": 3}}
    figures, rankings = judge_allreduce(summary, ["rack"], [2])
    assert rankings[0]["same"] is None and all(f.within is None for f in figures)


def test_a_training_pair_with_bulk_tcp_judges_its_goodput_too():
    from bench.crossval import dlcp_specs

    # the same paths on both
    assert all(s.workload.background_flows and s.workload.background_fixed_ports for s in dlcp_specs())
    run = {"iteration_s": 5.8, "samples_per_s_real": 100.0, "headline_repetitions": 3}
    summary = {"base": {**run, "background_goodput_mbps": 2.25}, "base-ns3": {**run, "background_goodput_mbps": 2.30},
               "prio": {**run, "background_goodput_mbps": 1.2}, "prio-ns3": {**run, "background_goodput_mbps": 2.30},
               "plain": run, "plain-ns3": run}
    f = {x.what: x for x in judge_pair(summary, "prio / base", "prio", "base")}
    assert f["base: bulk TCP goodput (Mb/s)"].within is True
    assert f["prio: bulk TCP goodput (Mb/s)"].within is False  # 1.2 against 2.30
    assert f["prio / base"].within is True
    assert not any("goodput" in x.what for x in judge_pair(summary, "r", "plain", "plain"))  # no bulk TCP: none
