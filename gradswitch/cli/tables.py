"""`gradswitch tables`: the performance tables from the benchmarks' JSON (gradswitch/experiment/tables/), printed,
checked against the documents or written into them.

bench/tables.py (`python -m bench.tables`) is the same command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradswitch.experiment.tables.catalogue import generate
from gradswitch.experiment.tables.documents import TablesError, find_checkout, marker, stale, write

SUMMARY = "the performance tables from bench/results/: print them, check the documents, or write them in"
DESCRIPTION = (
    "Generate every table of docs/performance.md (and those of docs/simulator.md, docs/faults.md, docs/netreduce.md "
    "and the README's headline claims) from the benchmarks' JSON under bench/results/ of a checkout, each after its "
    "`<!-- table: NAME -->` line. Without options it prints them; --check exits 1, naming each document whose "
    "tables are not what the JSON gives (a benchmark was run again and the document was not); --write replaces the "
    "tables in the documents. A JSON of another format than this gradswitch reads is refused in one line naming it.")
EXAMPLES = [
    "gradswitch tables --check  # in a checkout: are the documents' tables what bench/results/ gives?",
    "gradswitch tables --write  # after a benchmark: write its tables into the documents",
    "gradswitch tables --results /tmp/results  # print the tables another directory of JSON gives",
]


def add_arguments(p: argparse.ArgumentParser, complete_paths: Callable[..., Any] = lambda action, what="": action
                  ) -> None:
    complete_paths(p.add_argument("--root", type=Path, metavar="CHECKOUT",
                                  help="the checkout whose documents hold the tables (default: the one holding the "
                                       "current directory, else the one this gradswitch runs from)"), "directory")
    complete_paths(p.add_argument("--results", type=Path, metavar="DIR",
                                  help="the benchmarks' JSON (default: the checkout's bench/results)"), "directory")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="replace the tables in the documents after their markers")
    what.add_argument("--check", action="store_true",
                      help="exit 1, naming the documents, when a table there is not what the JSON gives")
    p.set_defaults(func=cmd_tables)


def cmd_tables(args: argparse.Namespace) -> int:
    if args.results is not None and not (args.check or args.write):  # another directory's tables, printed
        print_tables(generate(args.results))
        return 0
    try:
        checkout = find_checkout(args.root) if args.root else find_checkout(Path.cwd(), walk=True)
    except TablesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    results = args.results or checkout.results
    tables = generate(results)
    if args.check:
        outdated = stale(checkout, tables)
        for doc in outdated:
            print(f"{doc}: its tables are not what {results} gives: run `gradswitch tables --write`")
        return 1 if outdated else 0
    if args.write:
        for doc, count in write(checkout, tables):
            print(f"written {count} tables into {doc}")
        return 0
    print_tables(tables)
    return 0


def print_tables(tables: dict[str, str]) -> None:
    for name, body in tables.items():
        print(f"{marker(name)}\n{body}\n")
