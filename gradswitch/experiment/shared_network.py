"""Experiment specs that fit one topology, run in turn on one network: the same switches, links and hosts for all
of them, so that ratios between the runs compare the algorithms, not two bring-ups (bench/allreduce.py and
bench/netreduce.py's figures)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from gradswitch.experiment.placement import topology_for
from gradswitch.experiment.results_file import Results
from gradswitch.experiment.runner import run_on
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions


def run_specs(specs: Sequence[ExperimentSpec], out_dir: Path,
              log: Callable[[str], None] = lambda line: print(line, flush=True)) -> dict[str, Results]:
    """Run the specs in turn on one network, the topology of the one needing the most hosts (out_dir/net; each run
    under out_dir/LABEL); their results by label. RuntimeError, naming the run and its errors, when one failed."""
    biggest = max(specs, key=lambda s: s.hosts_needed())
    reports: dict[str, Results] = {}
    with Testbed(topology_for(biggest), NetworkOptions(run_dir=out_dir / "net")) as net:
        for i, spec in enumerate(specs, start=1):
            log(f"  [{i}/{len(specs)}] {spec.label} ...")
            report = run_on(net, spec, out_dir / spec.label, progress=False)
            if not report["ok"]:
                raise RuntimeError(f"{spec.label} failed: {report['errors']}")
            reports[spec.label] = report
    return reports
