"""The performance tables from bench/results/: `gradswitch tables` (gradswitch/experiment/tables/,
gradswitch/cli/tables.py), kept as a script; it takes the command's options.

    python -m bench.tables            # every table, each after its marker line
    python -m bench.tables --write    # the same, written into the documents in place of the old tables
    python -m bench.tables --check    # exit 1, naming the document, when a table there is outdated
"""

from __future__ import annotations

import sys

from gradswitch.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["tables", *sys.argv[1:]]))
