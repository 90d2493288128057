"""The goodput study's tables (bench/results/goodput.json, gradswitch/experiment/goodput_study.py): the two ways of
surviving failures, their sensitivity to the rates and the restart cost, the checkpoint interval, and the fabric's
iteration with one element gone."""

from __future__ import annotations

from pathlib import Path

from gradswitch.experiment.goodput_study import read_study
from gradswitch.experiment.tables.cells import num, pct, table


def goodput_table(results: Path) -> str:
    """bench/goodput.py: goodput of a 1,024-worker job over 30 days with checkpoint restart or recovery in place."""
    data = read_study(results / "goodput.json")
    s = data["study"]
    rows = []
    for key, name in (("checkpoint_restart", "checkpoint restart"), ("in_place", "recovery in place")):
        r = s["strategies"][key]
        g = r["goodput"]
        how = (f"every {r['interval_s'] / 60:.0f} min (Young/Daly), write {r['write_s']:g} s, "
               f"restart {r['restart_s']:g} s" if key == "checkpoint_restart" else
               f"spare joins in {r['rejoin_s']:g} s, reroute {r['reroute_s']:g} s")
        rows.append([name, how, f"{g['mean']:.4f} [{g['low']:.4f}-{g['high']:.4f}]",
                     f"{r['failures']['mean']:.1f} [{r['failures']['low']:.0f}-{r['failures']['high']:.0f}]",
                     num(r["lost_h"]), num(r["down_h"]), num(r["checkpoint_h"]), num(r["degraded_h"], 3),
                     f"{r['effective_samples_per_s']:,.0f}"])
    return table([f"{data['workers']} workers, {s['hours'] / 24:g} days ({s['seeds']} seeds: mean [min-max])",
                  "surviving a failure", "goodput", "failures", "work lost h", "down h", "checkpoints h",
                  "degraded iterations h", "samples/s"], rows)


def goodput_sensitivity_table(results: Path) -> str:
    """bench/goodput.py: goodput against the failure rates and the restart cost (means over the seeds)."""
    s = read_study(results / "goodput.json")["study"]
    restart = s["strategies"]["checkpoint_restart"]["restart_s"]
    rows = [[f"x {r['rate_scale']:g}", num(r["job_mtbf_h"], 1), f"{r['young_interval_s'] / 60:.0f}", f"{restart:g}",
             f"{r['checkpoint_restart']:.4f}", f"{r['in_place']:.4f}", num(r["in_place"] / r["checkpoint_restart"], 3)]
            for r in s["rate_sweep"]]
    rows += [["x 1", num(s["job_mtbf_h"], 1), f"{s['young_daly_interval_s'] / 60:.0f}", f"{r['restart_s']:g}",
              f"{r['checkpoint_restart']:.4f}", f"{r['in_place']:.4f}", num(r["in_place"] / r["checkpoint_restart"], 3)]
             for r in s["restart_sweep"] if r["restart_s"] != restart]
    return table(["failure rates (x Llama 3's)", "job MTBF h", "checkpoint interval min", "restart s",
                  "checkpoint restart", "recovery in place", "in place / restart"], rows)


def goodput_interval_table(results: Path) -> str:
    """bench/goodput.py: checkpoint restart's goodput against its interval, around Young/Daly's."""
    s = read_study(results / "goodput.json")["study"]
    best = max(p["goodput"] for p in s["interval_sweep"])
    rows = [[num(p["of_young"], 3), f"{p['interval_s'] / 60:.1f}", f"{p['goodput']:.4f}",
             ", ".join(([] if p["of_young"] != 1 else ["Young/Daly's"]) + (["the sweep's best"] if p["goodput"] == best
                                                                           else []))]
            for p in s["interval_sweep"]]
    return table([f"checkpoint interval (x Young/Daly's {s['young_daly_interval_s'] / 60:.1f} min)", "minutes",
                  f"goodput (mean of {s['seeds']} runs of {s['sweep_hours'] / 24:g} days)", ""], rows)


def goodput_fabric_table(results: Path) -> str:
    """bench/goodput.py: the job's iteration on ns-3 with the fabric intact and with one element gone."""
    data = read_study(results / "goodput.json")
    f = data["fabric"]
    rows = [[r["label"], r["removed"] or "-", num(r["iteration_s"] * 1000, 3),
             num(r["iteration_s"] / f["iteration_s"], 4), pct(r["busiest_link_load"]), "yes" if r["ok"] else "**no**"]
            for r in f["runs"]]
    rows += [[cls, "not measured: the largest measured slowdown", num(f["degraded_s"][cls] * 1000, 3),
              num(f["degraded_s"][cls] / f["iteration_s"], 4), "-", "-"]
             for cls, how in f["how"].items() if how.startswith("not measured")]
    return table([f"fabric ({data['model']}, {data['algo']}, {data['workers']} workers, "
                  f"{data['topology']['name']} k = {data['topology']['k']})", "element gone", "iteration ms",
                  "over intact", "busiest link", "exact"], rows)
