"""docs/performance.md's tables and the README's headline figures are the JSON under bench/results/, as
gradswitch/experiment/tables/ renders them (`gradswitch tables`).

Re-running a benchmark without regenerating the documents fails here, naming the table; and the
tables come out right from a small hand-made JSON (medians with [min, max], ratios to the
baseline, machine-bound and low-CPU marks)."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gradswitch.experiment.tables.catalogue import README_TABLES, generate
from gradswitch.experiment.tables.documents import PACKAGE_CHECKOUT, marker, with_tables
from gradswitch.experiment.tables.reading import machine_bound
from gradswitch.experiment.tables.testbed import allreduce_table
from gradswitch.experiment.tables.training import dlcp_spray_table, tensorlights_table

PERFORMANCE, README, RESULTS = PACKAGE_CHECKOUT.performance, PACKAGE_CHECKOUT.readme, PACKAGE_CHECKOUT.results
README_MAX_LINES = 250  # a newcomer reads it through; the measurements are in docs/performance.md


def performance() -> str:
    return PERFORMANCE.read_text()


def _table_after_marker(document: Path, text: str, name: str) -> None:
    table = generate(RESULTS)[name]
    where = document.relative_to(README.parent)
    assert marker(name) in text, f"{where} has no `{marker(name)}` line before its {name} table: add it and run " \
                                 f"`gradswitch tables --write`"
    got = text.split(marker(name) + "\n", 1)[1]
    got = "\n".join(re.match(r"(?:\|[^\n]*(?:\n|$))*", got).group(0).splitlines())  # type: ignore[union-attr]
    diff = "\n".join(difflib.unified_diff(got.splitlines(), table.splitlines(), str(where), "bench/results",
                                          lineterm="", n=0))
    assert got == table, (f"{where}'s table {name!r} is not what bench/results/ gives (a benchmark was run again?): "
                          f"run `gradswitch tables --write` (or paste `gradswitch tables`'s table)\n{diff}")


@pytest.mark.parametrize("name", list(generate(RESULTS)))
def test_the_performance_document_has_every_table_as_its_json_gives_it(name):
    _table_after_marker(PERFORMANCE, performance(), name)


@pytest.mark.parametrize("name", README_TABLES)
def test_the_readme_has_its_headline_tables_as_their_json_gives_them(name):
    _table_after_marker(README, README.read_text(), name)


def test_every_table_marker_in_the_performance_document_names_a_table():
    names = re.findall(r"^<!-- table: (\S+) -->$", performance(), re.MULTILINE)
    assert sorted(names) == sorted(generate(RESULTS)), ("a marker without a generated table, or a table without its "
                                                        "marker")


def test_the_readme_marks_only_its_headline_tables():
    names = re.findall(r"^<!-- table: (\S+) -->$", README.read_text(), re.MULTILINE)
    assert sorted(names) == sorted(README_TABLES), (f"README.md has table markers {names}, "
                                                    f"gradswitch.experiment.tables.catalogue.README_TABLES says "
                                                    f"{list(README_TABLES)}: the other tables belong in "
                                                    f"docs/performance.md")


def test_the_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (f"README.md has {lines} lines, more than {README_MAX_LINES}: move details to "
                                       f"docs/ and link them")


@pytest.mark.parametrize("document", [README, PERFORMANCE], ids=["README.md", "docs/performance.md"])
def test_every_image_a_document_shows_is_a_stored_result(document: Path):
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", document.read_text())
    assert images, f"{document.name} shows no plot"
    for image in images:
        path = (document.parent / image).resolve()
        assert path.is_file(), f"{document.name} shows {image}, which does not exist"
        assert path.parent == RESULTS.resolve(), f"{document.name} shows {image}: a plot is a result under " \
                                                 f"bench/results/, beside its JSON"


def test_the_performance_document_holds_no_raw_json():
    assert '{"' not in performance(), "raw JSON pasted into docs/performance.md: generate a table instead"


# ---- the tables from a hand-made JSON ----


def _spread(lo: float, median: float, hi: float, n: int = 3) -> dict[str, Any]:
    return {"min": lo, "median": median, "max": hi, "n": n}


def _run(samples: tuple[float, float, float], idle: tuple[float, float, float], **extra: Any) -> dict[str, Any]:
    spread = {"samples_per_s_real": _spread(*samples), "cpu_idle": _spread(*idle),
              "uplink_imbalance": _spread(2.0, 2.0, 2.0), "retransmissions": _spread(0, 5, 9),
              "busiest_link_load": _spread(0.9, 0.9, 0.9)}
    return {"samples_per_s_real": samples[1], "cpu_idle": idle[1], "spread": spread, "repetitions_done": 3,
            "headline_repetitions": 3, "machine_bound": False, "machine_bound_repetitions": [],
            "failed_repetitions": [], "is_baseline": False, **extra}


def _write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    (tmp_path / name).write_text(json.dumps(data))
    return tmp_path


def test_the_spraying_table_gives_medians_ratios_and_marks(tmp_path):
    runs = {
        "x-ecmp": _run((100, 120, 150), (0.15, 0.3, 0.5), is_baseline=True),
        "x-spray": _run((170, 180, 190), (0.4, 0.5, 0.6), machine_bound_repetitions=[2], headline_repetitions=2,
                        over_baseline={"ratio": 1.5, "min": 1.1333, "max": 1.9, "headline": True}),
        "x-flowlet": _run((110, 130, 140), (0.05, 0.08, 0.09), machine_bound=True, headline_repetitions=0,
                          machine_bound_repetitions=[1, 2, 3],
                          over_baseline={"ratio": 1.0833, "min": 0.7333, "max": 1.4, "headline": False}),
    }
    results = _write(tmp_path, "training-dlcp.json", {"dlcp": {"dlcp-spray": {"runs": runs}}})
    lines = dlcp_spray_table(results).splitlines()
    assert lines[2:] == [
        "| x | ECMP | 120 [100, 150] | 1 (baseline) | 2.00 | 5 [0, 9] | 90 % | 30 % [15.0, 50] (low in some) "
        "| 3 of 3 |",
        "| x | flowlets, 50 ms gap | 130 [110, 140] | 1.08 [0.73, 1.40] (machine-bound) | 2.00 | 5 [0, 9] | 90 % "
        "| 8.0 % [5.0, 9.0] (low) | 0 of 3: all machine-bound (the medians are over all of them; not a headline) |",
        "| x | spraying (DLCP) | 180 [170, 190] | 1.50 [1.13, 1.90] | 2.00 | 5 [0, 9] | 90 % | 50 % [40, 60] "
        "| 2 of 3; machine-bound: 2 |",
    ]


def test_a_tensorlights_ratio_from_machine_bound_runs_is_marked(tmp_path):
    run = {"baseline": "b", "baseline_avg_jct_s": 10.0, "tensorlights_avg_jct_s": 8.0, "ratio": 0.8,
           "ratio_min": 0.7, "ratio_max": 0.9, "headline": False, "repetitions": 2, "machine_bound_repetitions": [3],
           "busiest_link_load": 0.5, "cpu_idle": 0.7}
    results = _write(tmp_path, "dlcp-tensorlights.json", {"tensorlights": {"tensorlights": run}})
    assert tensorlights_table(results).splitlines()[2] == (
        "| tensorlights | 4 jobs | 10.00 | 8.00 | 0.80 [0.70, 0.90] (machine-bound) | 2; machine-bound: 3 | 50 % "
        "| 70 % |")


def test_a_json_older_than_the_machine_bound_field_is_judged_by_the_rule(tmp_path):
    def row(algo: str, load: float, idle: float) -> dict[str, Any]:
        return {"algo": algo, "workers": 2, "median_s": 1.0, "lower_bound_s": 0.8, "ratio_to_bound": 1.25,
                "retransmissions": 3, "busiest_link_load": load, "cpu_idle": idle}

    toolchain = {"bmv2": {"logging_macros": False}}
    for name in ("allreduce-5mbps.json", "allreduce-20mbps.json"):
        _write(tmp_path, name, {"toolchain": toolchain, "bw_mbps": 5.0, "size_bytes": 262144,
                                "rows": [row("ring", 0.95, 0.15), row("ps", 0.7, 0.8)]})
    ring, ps = allreduce_table(tmp_path).splitlines()[2:4]
    assert ring == ("| 5 Mb/s, 256 KiB, no logging macros | ring | 2 | 1.000 | 0.800 | 1.25 | 3 | 95 % | 15.0 % (low) "
                    "| allreduce-5mbps.json |")
    assert ps == ("| 5 Mb/s, 256 KiB, no logging macros | ps | 2 | 1.000 | 0.800 | 1.25 (machine-bound) | 3 | 70 % "
                  "| 80 % | allreduce-5mbps.json |")


def test_the_jsons_own_mark_wins_over_the_rule():
    assert machine_bound({"machine_bound": False, "cpu_idle": 0.01}) is False
    assert machine_bound({"cpu_idle": 0.05}) is True
    assert machine_bound({"cpu_idle": 0.5, "busiest_link_load": 0.7, "ideal_link_load": 0.8}) is False
    assert machine_bound({"cpu_idle": 0.5, "busiest_link_load": 0.7}) is True  # an all-reduce: 0.8 of 1


def test_writing_the_readme_replaces_only_the_table_after_its_marker():
    text = "before\n<!-- table: t -->\n| old |\n|---|\n| 1 |\n\nafter | not a table\n<!-- table: u -->\n| u |\n"
    got = with_tables(text, {"t": "| new \\1 |\n|---|"})
    assert got == "before\n<!-- table: t -->\n| new \\1 |\n|---|\n\nafter | not a table\n<!-- table: u -->\n| u |\n"


# ---- a run's output shown in a document is a stored run ----

RESULT_MARK = re.compile(r"^<!-- result: bench/results/([\w.-]+\.json) -->\n```\n(.*?)\n```", re.MULTILINE | re.DOTALL)
TUTORIAL = README.parent / "docs" / "tutorial.md"


@pytest.mark.parametrize("document", [README, TUTORIAL], ids=["README.md", "docs/tutorial.md"])
def test_every_run_a_document_shows_is_the_table_its_stored_json_gives(document: Path):
    """A document pastes what `gradswitch experiment` printed after a `<!-- result: bench/results/NAME.json -->`
    line; NAME.json is that run's results.json: the table must be what the JSON gives."""
    from gradswitch.experiment.report import format_table

    shown = RESULT_MARK.findall(document.read_text())
    assert shown, f"{document.name} shows no stored run (`<!-- result: bench/results/NAME.json -->` before its output)"
    for name, block in shown:
        lines = [line for line in block.splitlines() if not line.startswith("$ ")]
        report = json.loads((RESULTS / name).read_text())
        table = format_table(report).splitlines()
        assert lines[:-1] == table, (f"{document.name}: the output shown for {name} is not what the JSON gives: paste "
                                     "the run's table.txt\n" + "\n".join(difflib.unified_diff(
                                         lines[:-1], table, document.name, name, lineterm="", n=0)))
        label = report["name"]
        assert lines[-1] == f"results: runs/{label}/results.json, plots: runs/{label}/iterations.png"
        assert "format" in report and "code_version" in report, f"{name}: a results.json without its format and code"


def test_the_readmes_first_experiment_has_its_plot():
    assert "<!-- result: bench/results/first-experiment.json -->" in README.read_text()
    assert "(bench/results/first-experiment.png)" in README.read_text()


# ---- the README's command table and links ----


def test_the_readme_lists_every_subcommand():
    import argparse

    from gradswitch.cli.main import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    table = README.read_text().split("## Command line", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in sub.choices if f"`gradswitch {name}" not in table]
    assert not missing, f"README.md's command table has no row for gradswitch {', '.join(missing)}"
    assert "`gradswitch --version`" in table


def test_every_document_the_readme_names_exists():
    named = set(re.findall(r"\bdocs/[\w-]+\.md\b", README.read_text()))
    assert named, "the README links no document"
    missing = sorted(d for d in named if not (README.parent / d).is_file())
    assert not missing, f"README.md names {missing}, which do not exist"


# ---- `gradswitch tables` ----


def _checkout(tmp_path: Path) -> Path:
    """A copy of this checkout's results and documents: the command's stand-in checkout."""
    import shutil

    for doc in ("README.md", "docs/performance.md", "docs/simulator.md", "docs/faults.md", "docs/netreduce.md"):
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PACKAGE_CHECKOUT.root / doc, tmp_path / doc)
    shutil.copytree(RESULTS, tmp_path / "bench" / "results", ignore=shutil.ignore_patterns("*.png"))
    return tmp_path


def test_gradswitch_tables_checks_and_writes_a_checkouts_documents(tmp_path, capsys):
    from gradswitch.cli.main import main

    root = _checkout(tmp_path)
    assert main(["tables", "--check", "--root", str(root)]) == 0
    performance = root / "docs" / "performance.md"
    performance.write_text(performance.read_text().replace("| go-back-N |", "| go-back-M |", 1))
    assert main(["tables", "--check", "--root", str(root)]) == 1
    assert capsys.readouterr().out == (f"{performance}: its tables are not what {root / 'bench' / 'results'} "
                                       "gives: run `gradswitch tables --write`\n")
    assert main(["tables", "--write", "--root", str(root)]) == 0
    assert f"written {len(generate(RESULTS))} tables into {performance}" in capsys.readouterr().out
    assert performance.read_text() == PERFORMANCE.read_text()
    assert main(["tables", "--check", "--root", str(root)]) == 0


def test_gradswitch_tables_refuses_a_folder_that_is_not_a_checkout_and_a_json_of_another_format(tmp_path, capsys):
    from gradswitch.cli.main import main

    assert main(["tables", "--check", "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path} is not a gradswitch checkout (one with bench/results/ and "
                                       "docs/performance.md): run it in one or give --root CHECKOUT\n")
    root = _checkout(tmp_path / "checkout")
    transport = root / "bench" / "results" / "transport.json"
    transport.write_text(json.dumps({**json.loads(transport.read_text()), "format": 2}))
    assert main(["tables", "--root", str(root)]) == 2
    assert capsys.readouterr().err == (f"error: {transport}: a benchmark's results of format 2; this gradswitch reads "
                                       "format 1 (read it with the gradswitch that wrote it, or write it again)\n")


def test_gradswitch_tables_prints_another_directorys_tables(tmp_path, capsys):
    from gradswitch.cli.main import main

    assert main(["tables", "--results", str(RESULTS)]) == 0
    assert capsys.readouterr().out == "".join(f"{marker(n)}\n{t}\n\n" for n, t in generate(RESULTS).items())
