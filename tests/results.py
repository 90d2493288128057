"""The orchestration's entry points as the tests read what they return: the JSON values of results.json and
summary.json, whose fields a test asserts on whatever their type. The code itself reads them typed
(gradswitch/experiment/results_file.Results, summary_file.Summary); here a test needs no narrowing of a figure
that is None only when a run did not happen before comparing it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradswitch.experiment import compare, results_file, runner, summary_file
from gradswitch.experiment.spec import ExperimentSpec
from gradswitch.experiment.testbed import Testbed
from gradswitch.net.network import NetworkOptions
from gradswitch.protocol.netreduce import MTU as NETREDUCE_MTU  # ExperimentSpec's default

Report = dict[str, Any]  # a results.json as JSON


def run_experiment(spec: ExperimentSpec, out_dir: Path, progress: bool | None = None,
                   network_options: NetworkOptions | None = None) -> Report:
    return dict(runner.run_experiment(spec, out_dir, progress, network_options))


def run_on(net: Testbed, spec: ExperimentSpec, out_dir: Path, progress: bool | None = None) -> Report:
    return dict(runner.run_on(net, spec, out_dir, progress))


def run_compare(spec: compare.CompareSpec, out_dir: Path, runner: compare.Runner | None = None,
                log: Any = print) -> dict[str, Report]:
    return {name: dict(run) for name, run in compare.run_compare(spec, out_dir, runner, log).items()}


def read(path: Path) -> Report:
    """A results.json as results_file reads it (its format checked)."""
    return dict(results_file.read(path))


def read_summary(path: Path) -> dict[str, Report]:
    """A compare's summary.json as summary_file reads it (its format checked)."""
    return {name: dict(run) for name, run in summary_file.read(path).items()}


HEADERS = 256  # more than any packet's headers (Ethernet, IP, UDP, RoCE's, NetReduce's)


def resent(report: Report) -> int:
    """Packets a run sent more than once, or acknowledged again (a duplicate received)."""
    return int(report["retransmissions"]) + int(report["duplicates"])


def assert_same_wire(loop: Report, graph: Report, name: str, mtu: int = NETREDUCE_MTU) -> None:
    """The same bytes and packets on the wire; a run that resent packets differs by at most those packets (none
    larger than an MTU's payload with its headers), each resent packet counted."""
    print(f"{name}: bytes on the wire loop {loop['bytes_on_wire']} graph {graph['bytes_on_wire']}, packets "
          f"{loop['packets_on_wire']} / {graph['packets_on_wire']}, resent {resent(loop)} / {resent(graph)}")
    if resent(loop) == resent(graph) == 0:
        assert (graph["bytes_on_wire"], graph["packets_on_wire"]) == \
            (loop["bytes_on_wire"], loop["packets_on_wire"]), name
    else:
        extra = resent(loop) + resent(graph)
        assert abs(graph["packets_on_wire"] - loop["packets_on_wire"]) <= extra, name
        assert abs(graph["bytes_on_wire"] - loop["bytes_on_wire"]) <= extra * (mtu + HEADERS), name
