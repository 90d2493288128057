"""The `format` every JSON file gradswitch writes carries, and the one check its readers make.

The convention: `format` is an integer, the version of that kind of file; each kind defines its constant once,
beside its writer (results_file.FORMAT, sim.results.RESULTS_FORMAT,
goodput_study.GOODPUT_FORMAT, ...), and bumps it when a reader of the old one would misread the new. A reader
calls `check_format`, which refuses a file of another format, or without one, in one line naming the file, the
format found and the one expected. A kind that was written for a while without `format` says so with
`missing_is`: such a file is read as that format (the rule: files from before a kind had `format` are its
format 1, whose fields they have). A file that lives only within one run (the fallback signal, a rank's timings)
has no such past: its reader gives no `missing_is`.

Two files keep another's layout: a Chakra trace's process groups file is ASTRA-sim's and is written without
`format` (its reader checks one when there: workload/chakra/groups.py), and a timeline is a Chrome trace with
`format` among its top-level keys, which the viewers keep as metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class FormatError(ValueError):
    """A JSON file of another format than its reader's (one line naming the file and both formats)."""


def check_format(raw: object, path: Path | str, kind: str, expected: int, *, missing_is: int | None = None
                 ) -> dict[str, Any]:
    """`raw` (a JSON file's content) as a dict, when its `format` is `expected` (a file without `format`: when
    `missing_is` is); FormatError otherwise."""
    if not isinstance(raw, dict):
        raise FormatError(f"{path}: not a {kind} (a JSON object with `format` {expected} expected, "
                          f"found a {type(raw).__name__})")
    if "format" in raw:
        found: object = raw["format"]
    elif missing_is is not None:
        found = missing_is
    else:
        raise FormatError(f"{path}: a {kind} without `format`; this gradswitch reads format {expected} "
                          "(read it with the gradswitch that wrote it, or write it again)")
    if isinstance(found, bool) or found != expected:
        raise FormatError(f"{path}: a {kind} of format {found!r}; this gradswitch reads format {expected} "
                          "(read it with the gradswitch that wrote it, or write it again)")
    return raw
