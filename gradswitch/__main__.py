"""`python -m gradswitch`: the command line, as the `gradswitch` script runs it."""

from __future__ import annotations

import sys

from gradswitch.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
