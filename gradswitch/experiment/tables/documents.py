"""The documents that hold the tables, each after a line `<!-- table: NAME -->`: docs/performance.md (every table),
docs/simulator.md, docs/faults.md and docs/netreduce.md (theirs), and the README (its headline tables, README_TABLES);
what in them differs from the JSON, and writing the tables into them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gradswitch.experiment.tables.catalogue import README_TABLES


class TablesError(ValueError):
    """No checkout to read the results from or write the tables into (one line saying what to give)."""


@dataclass(frozen=True)
class Checkout:
    """A gradswitch checkout: the benchmarks' JSON under bench/results/ and the documents their tables are in."""

    root: Path

    @property
    def results(self) -> Path:
        return self.root / "bench" / "results"

    @property
    def readme(self) -> Path:
        return self.root / "README.md"

    @property
    def performance(self) -> Path:
        return self.root / "docs" / "performance.md"

    @property
    def simulator(self) -> Path:
        return self.root / "docs" / "simulator.md"  # its cross-validation section

    @property
    def faults(self) -> Path:
        return self.root / "docs" / "faults.md"  # its recovery measurements

    @property
    def netreduce(self) -> Path:
        return self.root / "docs" / "netreduce.md"  # the simulator's reduce-scatter and all-gather figures

    def is_checkout(self) -> bool:
        return self.results.is_dir() and self.performance.is_file()

    def documents(self, tables: Mapping[str, str]) -> list[tuple[Path, Mapping[str, str]]]:
        """Each document with the tables it holds (the README: its headline tables only)."""
        headline = {name: tables[name] for name in README_TABLES}
        found = [(self.performance, tables), (self.simulator, tables)]
        found += [(doc, tables) for doc in (self.faults, self.netreduce) if doc.exists()]
        return [*found, (self.readme, headline)]


PACKAGE_CHECKOUT = Checkout(Path(__file__).resolve().parents[3])  # the checkout this gradswitch runs from, if any


def find_checkout(start: Path, *, walk: bool = False) -> Checkout:
    """`start` as a checkout; with `walk`, the checkout holding `start` (it or a folder above it), else the one this
    gradswitch runs from. TablesError when there is none."""
    folders = [start.resolve(), *start.resolve().parents] if walk else [start]
    found = [Checkout(f) for f in folders if Checkout(f).is_checkout()]
    if walk and not found and PACKAGE_CHECKOUT.is_checkout():
        found = [PACKAGE_CHECKOUT]
    if not found:
        raise TablesError(f"{start} is not {'in ' if walk else ''}a gradswitch checkout (one with bench/results/ and "
                          "docs/performance.md): run it in one or give --root CHECKOUT")
    return found[0]


def marker(name: str) -> str:
    return f"<!-- table: {name} -->"


def with_tables(text: str, tables: Mapping[str, str]) -> str:
    """`text` with the table after each `<!-- table: NAME -->` line (its lines that start with `|`) replaced by
    tables[NAME]; a marker with no such table gets one."""
    for name, body in tables.items():
        pattern = re.compile(rf"^{re.escape(marker(name))}\n(?:\|[^\n]*\n?)*", re.MULTILINE)
        text = pattern.sub(_literal(f"{marker(name)}\n{body}\n"), text)
    return text


def _literal(new: str) -> Callable[[re.Match[str]], str]:
    """re.sub's replacement for `new` as it is (a string would have its backslashes read as escapes)."""
    return lambda _match: new


def stale(checkout: Checkout, tables: Mapping[str, str]) -> list[Path]:
    """The documents whose tables differ from `tables` (what `write` would change)."""
    return [doc for doc, wanted in checkout.documents(tables)
            if with_tables(doc.read_text(), wanted) != doc.read_text()]


def write(checkout: Checkout, tables: Mapping[str, str]) -> list[tuple[Path, int]]:
    """Every document with its tables replaced by `tables`; each document and how many of its tables were given."""
    written = []
    for doc, wanted in checkout.documents(tables):
        doc.write_text(with_tables(doc.read_text(), wanted))
        written.append((doc, len(wanted)))
    return written
