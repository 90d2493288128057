"""The goodput study (gradswitch/experiment/goodput_study.py, `gradswitch goodput`) written into bench/results:
a 1,024-worker training job over 30 days that meets failures drawn from the Llama 3 paper's rates, surviving them
by checkpoint restart or by recovery in place, its fabric's iteration measured on ns-3 with one element gone.

    python -m bench.goodput [--workers 1024] [--days 30] [--seeds 10] [--out runs/bench-goodput]
                            [--write-s 30] [--restart-s 600] [--rejoin-s 40] [--reroute-s 1] [--repair-h 4]
                            [--sweep-days 365] [--measured-only] [--name goodput]

The options are `gradswitch goodput`'s, and --name. Writes bench/results/NAME.json (the study's document, with
the toolchain, as every benchmark's) and NAME.png. The ns-3 runs are kept under --out (resumable): each is the job's
spec on the simulator's graph engine (a run kept there from before, by the simulator's loop, is read as it is and
named so: `engine` of each run, `engines` of the file).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import RESULTS, save
from gradswitch.cli.goodput import add_arguments, options_of
from gradswitch.experiment.goodput_study import GoodputError, plot, report_lines, run_study, study_engines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.goodput", description=__doc__.splitlines()[0])
    add_arguments(parser, out=Path("runs/bench-goodput"))
    parser.add_argument("--name", default="goodput", help="bench/results/NAME.json and NAME.png")
    args = parser.parse_args()
    try:
        document = run_study(options_of(args), args.out, simulate_missing=not args.measured_only)
    except GoodputError as e:
        raise SystemExit(f"error: {e}") from None
    for line in report_lines(document):
        print(line)
    path = save(args.name, document, engines=study_engines(document))  # its ns-3 runs' (kept runs name theirs)
    plot(document, RESULTS / f"{args.name}.png")
    print(f"wrote {path} and {RESULTS / (args.name + '.png')}")


if __name__ == "__main__":
    main()
