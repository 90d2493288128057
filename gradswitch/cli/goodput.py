"""`gradswitch goodput`: the goodput study (gradswitch/experiment/goodput_study.py) from the command line.

bench/goodput.py takes the same options (add_arguments) and writes bench/results/goodput.json instead.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradswitch.experiment.goodput_study import StudyOptions, report_lines, run_study, save_study

SUMMARY = "the goodput of a long training job that meets failures: checkpoint restart against recovery in place"
DESCRIPTION = (
    "The goodput study (docs/faults.md): a training job of --workers workers (ResNet-50, emulated V100s, a ring on "
    "a fat tree at 100 Gb/s) runs for --days and meets failures drawn from the Llama 3 paper's rates (GPUs, "
    "switches, links), one schedule per seed. It survives them by checkpoint restart (every Young/Daly interval) "
    "or by recovery in place (a spare rejoins, the routes go around a failed switch or link); goodput is the share "
    "of the wall time that went into training kept at the end. The ns-3 simulator measures the iteration with the "
    "fabric intact and with one element of each class gone (five runs, kept under --out: a second study reuses "
    "them); the study then sweeps the checkpoint interval, the restart cost and the rates. It prints what it found "
    "and writes OUT/goodput.json and OUT/goodput.png. Needs the ns-3 simulator (gradswitch doctor) unless "
    "--measured-only finds the runs under --out.")
EXAMPLES = [
    "gradswitch goodput --workers 16 --seeds 4  # small: a k = 4 fat tree, minutes of ns-3",
    "gradswitch goodput  # the study docs/faults.md reports: 1,024 workers (hours of ns-3)",
    "gradswitch goodput --measured-only --restart-s 1800  # again from the kept ns-3 runs, another restart cost",
]
DEFAULT_OUT = Path("runs/goodput")


def positive(text: str) -> float:
    """A number above 0 (seconds, hours, days)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: give one above 0, e.g. 30") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text}: give a number above 0, e.g. 30")
    return value


def add_arguments(p: argparse.ArgumentParser, complete_paths: Callable[..., Any] = lambda action, what="": action,
                  out: Path = DEFAULT_OUT) -> None:
    """The study's options (StudyOptions', --out and --measured-only) and the command that runs it."""
    d = StudyOptions()
    p.add_argument("--workers", type=int, default=d.workers, help=f"workers of the job (default {d.workers})")
    p.add_argument("--days", type=positive, default=d.days, help=f"the run's length (default {d.days:g})")
    p.add_argument("--seeds", type=int, default=d.seeds,
                   help=f"failure schedules drawn, seeds 0..N-1; at least 2 (default {d.seeds})")
    p.add_argument("--sweep-days", type=positive, default=d.sweep_days,
                   help=f"the length of the runs the checkpoint interval sweep averages (default {d.sweep_days:g})")
    p.add_argument("--write-s", type=positive, default=d.write_s,
                   help=f"a checkpoint's write cost, seconds (default {d.write_s:g})")
    p.add_argument("--restart-s", type=positive, default=d.restart_s,
                   help=f"a restart's cost, seconds (default {d.restart_s:g})")
    p.add_argument("--rejoin-s", type=positive, default=d.rejoin_s,
                   help=f"a spare's joining cost, seconds (default {d.rejoin_s:g})")
    p.add_argument("--reroute-s", type=positive, default=d.reroute_s,
                   help=f"a reroute's cost, seconds (default {d.reroute_s:g})")
    p.add_argument("--repair-h", type=positive, default=d.repair_h,
                   help=f"hours until a failed switch or link is back (default {d.repair_h:g})")
    complete_paths(p.add_argument("--out", type=Path, default=out,
                                  help=f"where the ns-3 runs are kept and goodput.json/.png written (default {out})"),
                   "directory")
    p.add_argument("--measured-only", action="store_true",
                   help="simulate nothing: use the ns-3 runs kept under --out (a class not measured takes the "
                        "largest measured slowdown, and goodput.json says so)")
    p.set_defaults(func=cmd_goodput)


def options_of(args: argparse.Namespace) -> StudyOptions:
    return StudyOptions(workers=args.workers, days=args.days, seeds=args.seeds, sweep_days=args.sweep_days,
                        write_s=args.write_s, restart_s=args.restart_s, rejoin_s=args.rejoin_s,
                        reroute_s=args.reroute_s, repair_h=args.repair_h)


def cmd_goodput(args: argparse.Namespace) -> int:
    document = run_study(options_of(args), args.out, simulate_missing=not args.measured_only)
    for line in report_lines(document):
        print(line)
    path, png = save_study(document, args.out)
    print(f"wrote {path} and {png}")
    return 0
