"""The `gradswitch` command line.

A user's mistake (a bad value, a missing tool, no running network) ends in one `error:` line
per problem, naming the value, what is allowed and what to do, before anything starts (exit
status 2); `-v` adds the traceback. Anything else is a bug and shows its traceback.

Every subcommand is made by `add_command`: a description, examples, and the global options
(`-v`, `--bmv2`), which are accepted before the subcommand or after it.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import sys
import textwrap
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gradswitch.protocol.paths import runtime_dir

if TYPE_CHECKING:
    from gradswitch.control.control_plane import ControlPlane
    from gradswitch.experiment.spec import ExperimentSpec
    from gradswitch.experiment.testbed import Testbed
    from gradswitch.topology.model import Topology

DESCRIPTION = """\
gradswitch puts the traffic of distributed deep learning (ring all-reduce, parameter servers,
NetReduce aggregation in the switches, training iterations of model profiles) through
programmable switches: P4 programs on BMv2 in a Mininet network, or the same jobs on the ns-3
simulator at cluster scale, and reports iteration times, bandwidth, retransmissions and checks
of every sum."""
EPILOG = """\
a first experiment:
  gradswitch doctor                  # which tools are there, what runs without the others
  gradswitch experiment --algo ring --workers 4 --topo rack --size 1MiB --bw 20 --iterations 2
  gradswitch experiment --backend ns3 --algo ring --workers 4 --topo rack --size 1MiB --bw 20 --iterations 2

`gradswitch COMMAND --help` describes a command, with examples."""
COMPLETION_SHELLS = ("bash", "zsh", "tcsh")
SIZE_UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "b": 1}


class UsageError(Exception):
    """A user's mistake the command reports in one line per problem (no traceback)."""


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that report a user's mistake or a missing piece, not a bug."""
    from gradswitch.control.control_socket import ControlSocketError
    from gradswitch.control.netreduce_jobs import JobError
    from gradswitch.control.p4rt import SwitchError
    from gradswitch.experiment.goodput_study import GoodputError
    from gradswitch.experiment.spec import ExperimentError, SpecError
    from gradswitch.formats import FormatError
    from gradswitch.net.bmv2 import SwitchStartError
    from gradswitch.net.bmv2_executable import Bmv2BuildError
    from gradswitch.net.network import NetworkError
    from gradswitch.sim import SimError
    from gradswitch.topology.model import TopologyError
    from gradswitch.workload.failure_schedule import ScheduleError
    from gradswitch.workload.graph import GraphError

    return (UsageError, SpecError, ExperimentError, NetworkError, TopologyError, ControlSocketError, SwitchError,
            JobError, Bmv2BuildError, SwitchStartError, GraphError, SimError, GoodputError, ScheduleError,
            FormatError)


class Parser(argparse.ArgumentParser):
    """argparse, but a bad option is one line naming it and pointing at --help (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions and epilogs wrapped paragraph by paragraph; a paragraph with indented lines
    (examples, commands to type) is kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for block in text.strip("\n").split("\n\n"):
            if "\n  " in block or block.startswith("  "):
                paragraphs.append(textwrap.indent(block, indent))
            else:
                paragraphs.append(textwrap.fill(" ".join(block.split()), width, initial_indent=indent,
                                                subsequent_indent=indent))
        return "\n\n".join(paragraphs)


class VersionAction(argparse.Action):
    """`--version`: the package version and, in a checkout, `git describe` (gradswitch.version), then exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from gradswitch.version import code_version

        print(f"gradswitch {code_version()}")
        parser.exit(0)


def global_options(parser: argparse.ArgumentParser, *, in_subcommand: bool) -> None:
    """The options every command takes. A subcommand's copies leave the value unset unless given
    (argparse.SUPPRESS), so `gradswitch -v doctor` and `gradswitch doctor -v` both hold."""
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if in_subcommand else {}
    g = parser.add_argument_group("global options (before or after the command)") if in_subcommand else parser
    g.add_argument("-v", "--verbose", action="store_true", help="debug logging, and tracebacks of errors",
                   **({"default": False} | unset))
    g.add_argument("--bmv2", metavar="PATH", help="the simple_switch_grpc every switch runs (or a directory "
                   "holding it), e.g. a BMv2 built without logging macros; default: $GRADSWITCH_BMV2, else PATH's",
                   **unset)


def add_command(sub: Any, name: str, summary: str, description: str, examples: Sequence[str]) -> Parser:
    """A subcommand with its one-line summary (the command table of `gradswitch --help`), a description,
    examples (each a command line, with `  # why` after it if it needs one) and the global options."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    p: Parser = sub.add_parser(name, help=summary, description=description, epilog=epilog,
                               formatter_class=HelpFormatter)
    global_options(p, in_subcommand=True)
    return p


def complete_paths(action: argparse.Action, what: str = "file") -> argparse.Action:
    """Shell completion offers files (or directories) for this option (shtab)."""
    import shtab

    action.complete = shtab.FILE if what == "file" else shtab.DIRECTORY  # type: ignore[attr-defined]
    return action


def size_text(n: int) -> str:
    """A byte count as parse_size reads it (8MiB, 64KiB, 1000)."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def parse_size(text: str) -> int:
    """8MiB, 512KiB, 1GiB, 64kB, 1000 (bytes)."""
    lowered = text.strip().lower()
    try:
        for unit, factor in SIZE_UNITS.items():
            if lowered.endswith(unit):
                return int(float(lowered[: -len(unit)]) * factor)
        return int(lowered)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size: give bytes with an optional unit ({', '.join(SIZE_UNITS)}), e.g. 8MiB") from None


BMV2_TOPOLOGIES = ("rack", "leafspine", "dumbbell")  # the others (fattree, leafspine3) are the simulator's
# the options of `net` and `repl --direct` each of them takes (besides --bw)
TOPOLOGY_OPTIONS = {"rack": ("hosts",), "leafspine": ("leaves", "spines", "hosts_per_leaf"),
                    "dumbbell": ("hosts_per_side",)}


def _topology_args(p: argparse.ArgumentParser, default: str) -> None:
    g = p.add_argument_group("topology")
    g.add_argument("--topo", choices=BMV2_TOPOLOGIES, default=default,
                   help="BMv2 networks (fat trees and three tiers run on the simulator: experiment --backend ns3)")
    g.add_argument("--hosts", type=int, help="rack: number of hosts")
    g.add_argument("--leaves", type=int, help="leafspine: number of leaves")
    g.add_argument("--spines", type=int, help="leafspine: number of spines")
    g.add_argument("--hosts-per-leaf", type=int, help="leafspine: hosts on each leaf")
    g.add_argument("--hosts-per-side", type=int, help="dumbbell: hosts on each side")
    g.add_argument("--bw", type=float, metavar="MBPS", help="shape every link to this rate (HTB)")


def topology_from_args(args: argparse.Namespace) -> Topology:
    """The topology the options describe (TopologyError names a bad value; UsageError an option of
    another --topo, which would otherwise be ignored)."""
    from gradswitch.topology.generators import build_topology

    stray = [f"--{name.replace('_', '-')}" for topo, names in TOPOLOGY_OPTIONS.items() if topo != args.topo
             for name in names if getattr(args, name) is not None]
    if stray:
        own = ", ".join(f"--{n.replace('_', '-')}" for n in TOPOLOGY_OPTIONS[args.topo])
        raise UsageError(f"{', '.join(stray)}: not an option of --topo {args.topo} (it takes {own}, and --bw); "
                         "leave it out or give the --topo it belongs to")
    params: dict[str, Any] = {"bw_mbps": args.bw}
    if args.topo == "rack":
        params["hosts"] = args.hosts
    elif args.topo == "leafspine":
        params.update(leaves=args.leaves, spines=args.spines, hosts_per_leaf=args.hosts_per_leaf)
    else:
        params["hosts_per_side"] = args.hosts_per_side
    return build_topology(args.topo, **params)


# ---- commands ----


def cmd_doctor(args: argparse.Namespace) -> int:
    from gradswitch.cli.doctor import doctor

    report = doctor()
    print(report.to_json() if args.json else report.text())
    return 0 if report.ok else 1


def cmd_build(args: argparse.Namespace) -> int:
    from gradswitch.cli.p4_compile import BuildError, build_program

    try:
        result = build_program()
    except BuildError as e:
        for line in str(e).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 1
    print(f"compiled {result.json} and {result.p4info}, and stamped them (`gradswitch doctor` checks the stamp)")
    return 0


def cmd_net(args: argparse.Namespace) -> int:
    from gradswitch.control.control_socket import ControlServer
    from gradswitch.experiment.testbed import Testbed
    from gradswitch.net.network import NetworkOptions, preflight

    topo = topology_from_args(args)
    preflight()
    options = NetworkOptions(log_level=args.log_level, pcap=args.pcap, patch_links=args.patch_links)
    switches, hosts = len(topo.switches), len(topo.hosts)
    print(f"bringing up {topo.name}: {switches} BMv2 switch{'es' * (switches != 1)}, "
          f"{hosts} host{'s' * (hosts != 1)} ...", flush=True)
    with Testbed(topo, options) as net:
        assert net.control is not None
        print(f"switches programmed; logs in {net.run_dir}", flush=True)
        if args.pingall:
            reach = net.pingall()
            print(reach.table())
            return 0 if reach.full else 1
        from gradswitch.experiment.fault_schedule import injector

        with ControlServer(net.control, net.run_dir, inject=injector(net)):  # `fault` from an attached REPL too
            _mininet_cli(net)
        return 0


def _mininet_cli(net: Testbed) -> None:
    from mininet.cli import CLI

    from gradswitch.control.repl import Repl, run_repl
    from gradswitch.experiment.fault_schedule import injector

    assert net.control is not None, "the network is not running"
    control: ControlPlane = net.control
    inject = injector(net)  # the REPL's `fault`: this process holds the switches

    class GradCLI(CLI):  # type: ignore[misc]
        # Before the first prompt and after each command: a SIGTERM whose SystemExit was lost
        # (GradNetwork.exit_if_signalled) still ends the network instead of waiting for input.
        def preloop(self) -> None:
            net.exit_if_signalled()

        def postcmd(self, stop: bool, line: str) -> bool:
            net.exit_if_signalled()
            return stop

        def do_repl(self, line: str) -> None:
            """repl [COMMAND]: the gradswitch REPL (tables, entries, counters), or one command of it."""
            if line.strip():
                Repl(control, inject=inject).onecmd(line)
            else:
                run_repl(control, inject=inject)

    print("Mininet CLI: `repl` opens the gradswitch REPL; `gradswitch repl` in another terminal attaches too.")
    GradCLI(net.net)


def _find_run_dir(explicit: Path | None) -> Path:
    from gradswitch.control.control_socket import SOCKET_NAME, ControlSocketError

    if explicit is not None:
        if not (explicit / SOCKET_NAME).exists():
            raise ControlSocketError(f"--run-dir {explicit}: no running network there (no {SOCKET_NAME}); "
                                     f"leave --run-dir out to find the one running under {runtime_dir()}")
        return explicit
    candidates = sorted(p.parent for p in runtime_dir().glob(f"*/{SOCKET_NAME}"))
    if not candidates:
        raise ControlSocketError(f"no running network under {runtime_dir()}; start one with `gradswitch net`")
    if len(candidates) > 1:
        listing = ", ".join(map(str, candidates))
        raise ControlSocketError(f"several running networks ({listing}); pick one with --run-dir")
    return candidates[0]


def cmd_repl(args: argparse.Namespace) -> int:
    from gradswitch.control.control_plane import ControlPlane
    from gradswitch.control.control_socket import attach, attach_faults
    from gradswitch.control.fabric import Fabric
    from gradswitch.control.p4rt import REPL_ELECTION_ID
    from gradswitch.control.repl import run_repl

    if args.direct:
        fabric = Fabric(topology_from_args(args), election_id=REPL_ELECTION_ID)
        fabric.connect()
        with fabric:
            run_repl(ControlPlane.over(fabric), args.command)
        return 0
    given = [f"--{name.replace('_', '-')}" for names in TOPOLOGY_OPTIONS.values() for name in (*names, "bw")
             if getattr(args, name) is not None]
    if given:
        raise UsageError(f"{', '.join(dict.fromkeys(given))}: only with --direct (without it the REPL attaches to "
                         "the running network, which has its own topology)")
    run_dir = _find_run_dir(args.run_dir)
    run_repl(attach(run_dir), args.command, inject=attach_faults(run_dir))
    return 0


def experiment_spec(args: argparse.Namespace) -> ExperimentSpec:
    """The experiment `gradswitch experiment`'s options describe: the --spec file's values (if given) with
    the options given beside it over them, ExperimentSpec's defaults for the rest; SpecError lists every
    problem, one line each."""
    from gradswitch.experiment.spec import load_experiment, spec_from_dict

    given = options_given(args)
    if args.spec is not None:
        return load_experiment(args.spec, given)
    spec = spec_from_dict(given)
    spec.validate()
    return spec


def options_given(args: argparse.Namespace) -> dict[str, Any]:
    """The spec's fields `gradswitch experiment`'s options gave (the emulate and sim tables' as tables)."""
    from gradswitch.experiment.spec import CLI_OPTIONS, EMULATE_OPTIONS, RUN_KEYS, SECTION_OF, SIM_OPTIONS

    options = {key: CLI_OPTIONS.get(key, key).replace("-", "_") for key in (*RUN_KEYS, *SECTION_OF)}
    given = {field: value for field, option in options.items() if (value := getattr(args, option, None)) is not None}
    for table, names in (("emulate", EMULATE_OPTIONS), ("sim", SIM_OPTIONS)):
        values = {field: value for field, option in names.items()
                  if (value := getattr(args, option.replace("-", "_"), None)) is not None}
        if values:
            given[table] = values
    return given


def cmd_experiment(args: argparse.Namespace) -> int:
    from gradswitch.experiment.report import format_table
    from gradswitch.experiment.runner import run_experiment

    spec = experiment_spec(args)
    if spec.workload.workload_et is not None:
        return _experiment_graph(spec, args)
    _ready_for([spec])
    out = args.out or Path("runs") / spec.label
    report = run_experiment(spec, out)
    print(format_table(report))
    print(f"results: {out / 'results.json'}, plots: {out / 'iterations.png'}")
    return 0 if report["ok"] else 1


def _experiment_graph(spec: ExperimentSpec, args: argparse.Namespace) -> int:
    from gradswitch.experiment.graph_experiment import format_graph_table, load_graph, run_graph_spec
    from gradswitch.experiment.graph_run import RESULTS
    from gradswitch.experiment.graph_timeline import PLOT_FILE
    from gradswitch.experiment.spec import flat_spec, read_toml

    given = set(options_given(args)) | (set(flat_spec(read_toml(args.spec))) if args.spec is not None else set())
    spec, graph = load_graph(spec, given)  # what a trace's run has no use for, refused
    _ready_for([spec])
    out = args.out or Path("runs") / (spec.name or f"{graph.name}-n{graph.world_size}-{spec.network.topo}")
    report = run_graph_spec(spec, graph, out)
    print(format_graph_table(report, str(spec.network.backend)))
    timeline = out / PLOT_FILE
    print(f"results: {out / RESULTS}" + (f", timeline: {timeline}" if timeline.exists() else ""))
    return 0 if report.checked else 1


def _ready_for(runs: Sequence[ExperimentSpec]) -> None:
    """What the specs' backends need, before anything starts: a machine that can bring up networks
    (BMv2 runs), the built simulator (ns3 runs)."""
    if any(not s.network.simulated for s in runs):
        from gradswitch.net.network import preflight

        preflight()
    if any(s.network.simulated for s in runs):
        from gradswitch.sim.build import status

        missing = status().missing()
        if missing:
            raise UsageError(f"backend = ns3: {missing}")
        if any(s.network.simulated and s.network.ranks > 1 for s in runs):
            missing = status(mpi=True).missing()
            if missing:
                raise UsageError(f"ranks > 1 (MPI): {missing}")


def cmd_compare(args: argparse.Namespace) -> int:
    from gradswitch.experiment.compare import exit_status, load_spec, run_compare
    from gradswitch.experiment.summary_file import CompareExit

    spec = load_spec(args.spec)
    _ready_for(spec.runs)
    out = args.out or Path("runs") / spec.name
    summary = run_compare(spec, out)
    print(f"report: {out / 'report.md'}, summary: {out / 'summary.json'}")
    status = exit_status(summary)  # 0 ok; 3 a result broke its check; 4 a run could not run
    if status != CompareExit.OK:
        print(f"exit status {int(status)}: {status.meaning}", file=sys.stderr)
    return int(status)


def cmd_completion(args: argparse.Namespace) -> int:
    import shtab

    print(shtab.complete(build_parser(), shell=args.shell))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from gradswitch.formats import FormatError
    from gradswitch.net.network import STATE_FILE, NetworkError, cleanup_run, remove_orphan_interfaces

    status = 0
    for state in sorted(runtime_dir().glob(f"*/{STATE_FILE}")):
        try:
            removed = cleanup_run(state.parent)
        except (NetworkError, FormatError) as e:
            print(f"skipped: {e}")
            status = 1
            continue
        except PermissionError as e:
            raise UsageError(f"cannot remove what {state.parent} left ({e.strerror}): run `gradswitch clean` as root "
                             "(sudo), as the network was") from None
        for item in removed:
            print(f"removed {item}")
    # Runs whose state file is gone (a temporary run directory, a run killed outright
    # elsewhere) can still leave switch-port veths in the root namespace.
    for intf in remove_orphan_interfaces():
        print(f"removed interface {intf} (no running switch uses it)")
    return status


def build_parser() -> argparse.ArgumentParser:
    from gradswitch.experiment.spec import Backend, Check, Engine, ExperimentSpec, SimOptions
    from gradswitch.net.bmv2 import LOG_LEVELS
    from gradswitch.protocol.ecmp import LoadBalance
    from gradswitch.protocol.p4_constants import CONFIG
    from gradswitch.roce.qp import VALID_MTUS, Mode
    from gradswitch.topology.generators import TOPOLOGIES
    from gradswitch.workload.gradients import workload_names
    from gradswitch.workload.job import Algorithm, Device, DType, Emulation, FloatMode, Precision, Scheduling, Sync

    parser = Parser(prog="gradswitch", formatter_class=HelpFormatter, description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action=VersionAction,
                        help="print the version (the package's and, in a git checkout, `git describe`) and exit")
    global_options(parser, in_subcommand=False)
    sub = parser.add_subparsers(dest="command_name", title="commands", metavar="COMMAND", parser_class=Parser)

    p = add_command(sub, "doctor", "report the tools gradswitch uses and what fails without them",
                    "Check every tool gradswitch uses (p4c, BMv2's simple_switch_grpc, Mininet, tc, the ns-3 "
                    "simulator, MPI, ...) and say what cannot run without each; check that the compiled switch "
                    "program and its P4Info are present and current (gradswitch/p4src/build/p4c-stamp.json). "
                    "Exit status 0 "
                    "when everything required is there and at least one backend (BMv2 networks or the ns-3 "
                    "simulator) can run, 1 otherwise.",
                    ["gradswitch doctor", "gradswitch doctor --json  # the same report as JSON",
                     "gradswitch doctor -v  # with debug logging"])
    p.add_argument("--json", action="store_true", help="print the report as JSON (gradswitch.cli.doctor.Report)")
    p.set_defaults(func=cmd_doctor)

    p = add_command(sub, "build", "compile gradswitch/p4src/gradswitch.p4 (warnings are errors)",
                    "Compile the switch program gradswitch/p4src/gradswitch.p4 with p4c-bm2-ss into the BMv2 JSON "
                    "and the "
                    "P4Info text the switches and the controller load. A warning from the compiler fails the "
                    "build (exit status 1, its output as error lines).",
                    ["gradswitch build"])
    p.set_defaults(func=cmd_build)

    p = add_command(sub, "net", "bring up a Mininet network of BMv2 switches",
                    "Bring up a Mininet network of BMv2 switches, programmed by the controller, and open the "
                    "Mininet CLI (`repl` in it opens the gradswitch REPL; `gradswitch repl` in another terminal "
                    "attaches too). Exit the CLI to tear everything down. Needs root.",
                    ["gradswitch net --topo leafspine --leaves 2 --spines 2 --hosts-per-leaf 2",
                     "gradswitch net --topo rack --hosts 4 --pingall  # check every host pair, then tear down",
                     "gradswitch net --topo dumbbell --hosts-per-side 2 --bw 100 --pcap"])
    _topology_args(p, default="leafspine")
    p.add_argument("--pingall", action="store_true", help="check every host pair, print the table, tear down")
    p.add_argument("--log-level", default="info", choices=LOG_LEVELS, help="BMv2 log level (debug logs every packet)")
    p.add_argument("--pcap", action="store_true", help="BMv2 writes pcaps of every port")
    p.add_argument("--patch-links", action="store_true", help="every switch-to-switch link through a patch (a "
                   "Linux bridge), so that the REPL's `fault link-down` cuts it without touching BMv2's ports "
                   "(docs/faults.md)")
    p.set_defaults(func=cmd_net)

    p = add_command(sub, "repl", "inspect and change the switches of a running network",
                    "Open the gradswitch REPL on the switches of the network `gradswitch net` runs: list tables "
                    "and entries, insert, modify and delete entries, read counters, inject loss, create NetReduce "
                    "jobs, set DLCP and load balancing. It talks to that network's controller; with --direct "
                    "(no controller running) it opens its own P4Runtime sessions. `help` in it lists the commands.",
                    ["gradswitch repl",
                     "gradswitch repl -c switches -c 'tables leaf1'  # run two commands and exit",
                     "gradswitch repl --direct --topo rack --hosts 4"])
    p.add_argument("--run-dir", type=Path, help="run directory of the network (default: the one running)")
    p.add_argument("-c", "--command", action="append", help="run this REPL command and exit (repeatable)")
    p.add_argument("--direct", action="store_true",
                   help="no controller running: open own P4Runtime sessions (lower election id than a controller)")
    _topology_args(p, default="leafspine")
    p.set_defaults(func=cmd_repl)

    from gradswitch.cli import shell

    shell.add_arguments(add_command(sub, "shell", "open p4runtime-shell on a switch of the running network",
                                    shell.DESCRIPTION, shell.EXAMPLES))

    from gradswitch.cli import trace_model

    trace_model.add_arguments(add_command(sub, "trace-model", "measure a PyTorch model under DDP and write its "
                                          "training as Chakra traces", trace_model.DESCRIPTION, trace_model.EXAMPLES))

    # Experiment options default to None: ExperimentSpec's defaults apply to what is not given.
    D, E, S = ExperimentSpec(), Emulation(), SimOptions()
    p = add_command(sub, "experiment", "run one all-reduce or training experiment (BMv2, or ns-3) and report it",
                    "Run one experiment: jobs of workers all-reduce gradients (ring, parameter server, NetReduce "
                    "in the switches) on a network of BMv2 switches in Mininet, or on the ns-3 simulator "
                    "(--backend ns3), and print its table of iteration times, bandwidth and checks; results.json "
                    "and plots go to --out (a BMv2 run needs root, as Mininet does). An option not given takes "
                    "the default its help shows. With --spec, the experiment comes from a TOML file holding the "
                    "keys of one run of a compare spec (e.g. "
                    "`algo = \"ring\"`, `workers = 4`, `size_bytes = 1048576`, `sim = { check = \"digest\" }`); "
                    "options given beside it override the file's values.",
                    ["gradswitch experiment --algo ring --workers 4 --topo rack --size 1MiB --bw 20 "
                     "--iterations 2",
                     "gradswitch experiment --backend ns3 --algo ring --workers 4 --topo rack --size 1MiB --bw 20 "
                     "--iterations 2  # the same on the simulator: no root, no BMv2",
                     "gradswitch experiment --backend ns3 --topo fattree --workers 256 --algo netreduce --bw 100000",
                     "gradswitch experiment --spec my-run.toml --workers 8  # the file's run, with 8 workers"])
    complete_paths(p.add_argument("--spec", type=Path, metavar="FILE.toml",
                                  help="the experiment's values from this TOML file (one compare run's keys); "
                                  "options given beside it override them"))
    p.add_argument("--algo", choices=Algorithm.names(),
                   help=f"{', '.join(Algorithm.names())} (default {D.algorithm.algo})")
    p.add_argument("--workers", type=int, help=f"workers per job (default {D.network.workers})")
    p.add_argument("--servers", type=int, help=f"parameter servers (ps; default {D.algorithm.servers})")
    p.add_argument("--ps-key", type=parse_size, help="parameter server: bytes per key (default "
                   f"{size_text(D.algorithm.ps_key_bytes)}; smaller keys pipeline more)")
    p.add_argument("--size", type=parse_size,
                   help=f"synthetic gradient size (default {size_text(D.workload.size_bytes)})")
    p.add_argument("--workload", help=f"default {D.workload.workload}; one of {', '.join(workload_names())}")
    complete_paths(p.add_argument("--workload-et", metavar="DIR/PREFIX",
                                  help="run Chakra execution traces (DIR/PREFIX.{rank}.et, e.g. from `gradswitch "
                                  "export-et` or the Chakra tools) instead of --algo/--size/--workload; workers = "
                                  "their ranks (docs/workloads.md)"))
    p.add_argument("--engine", choices=Engine.names(),
                   help=f"what runs the iterations (default {D.algorithm.engine}): the job as an execution "
                   "graph on the graph engine (a model's training, or its all-reduces in a row; --workload "
                   "train-digits: its real gradients through the graph's all-reduces; results.json and report as the "
                   "loop's; docs/training.md), or each algorithm's loop (loop; kept until every published figure is "
                   "re-measured on the graph)")
    p.add_argument("--scale", type=float, help="fraction of a model profile's layer sizes, 0 < scale <= 1")
    p.add_argument("--dtype", choices=DType.names())
    p.add_argument("--float-mode", choices=FloatMode.names(),
                   help="float32 as int32: a fixed scale, or a shared exponent per block (SwitchML-style)")
    p.add_argument("--iterations", type=int, help=f"iterations to run (default {D.measurement.iterations})")
    p.add_argument("--topo", choices=list(TOPOLOGIES), help=f"default {D.network.topo}; fattree and leafspine3 on the "
                   "simulator (--backend ns3)")
    p.add_argument("--bw", type=float, metavar="MBPS", help="shape every link to this rate")
    p.add_argument("--loss", type=float, metavar="PCT", help="drop this percentage of RoCE packets on every worker "
                   "link, 0 <= PCT < 100")
    p.add_argument("--fault", action="append", metavar="KIND:TARGET@SECONDS",
                   help="a failure during the run (repeat for several): switch-crash:spine1@3,restart=5, "
                   "switch-hang:spine1@3,release=5, link-down:leaf1-spine1@2,down=1, "
                   "link-flap:leaf1-spine1@2,down=0.5,flaps=3, worker-crash:2@4, "
                   "slow-worker:1@0,factor=3 (docs/faults.md)")
    p.add_argument("--transport", choices=Mode.names(), help=f"go-back-N (RoCE) or selective repeat (IRN); "
                   f"default {D.transport.transport}")
    p.add_argument("--mtu", type=int, choices=VALID_MTUS, help=f"RoCE MTU of ring and PS (default {D.transport.mtu}: "
                   "NetReduce's packet size)")
    p.add_argument("--window", type=int,
                   help=f"packets in flight per QP (default {D.transport.window}; the simulator raises it "
                   "to cover the path's bandwidth-delay product)")
    p.add_argument("--credits", type=int,
                   help=f"NetReduce: messages in flight per worker (default {D.algorithm.credits})")
    p.add_argument("--netreduce-k", type=int, metavar="K", help="NetReduce k of N: a sum leaves the switch once K "
                   "workers are in (default: all N); BMv2, rack, --workload train-digits (docs/faults.md)")
    p.add_argument("--netreduce-deadline-ms", type=float, metavar="MS", help="NetReduce: a sum also leaves with the "
                   "workers in once MS have passed since its first contribution, carried out on a waiting worker's "
                   "retransmission (set --min-rto-ms near MS); with or without --netreduce-k; BMv2, rack, "
                   "--workload train-digits (docs/faults.md)")
    p.add_argument("--min-rto-ms", type=float, metavar="MS", help="smallest retransmission timeout (default: a "
                   "full queue's time plus a window on the path, at least 50 ms; the RTT estimate may raise it)")
    p.add_argument("--name", help="run name (default: algo-nN-topo)")
    complete_paths(p.add_argument("--out", type=Path, help="output directory (default: runs/NAME)"), "directory")
    g = p.add_argument_group("switches (docs/dlcp.md): priority classes and load balancing")
    g.add_argument("--roce-class", action="store_true", default=None,
                   help=f"every RoCE v2 packet in one strict-priority class (priority {CONFIG.ROCE_CLASS_PRIORITY}) "
                   "above bulk traffic, as RoCE is deployed")
    g.add_argument("--load-balance", choices=LoadBalance.names(),
                   help=f"ECMP groups: per flow by the 5-tuple's hash, or per flowlet at random after an idle gap "
                   f"(LetFlow); default {D.network.load_balance}")
    g.add_argument("--flowlet-gap-us", type=int, metavar="US",
                   help=f"flowlet: idle microseconds after which a flow may move (default {D.network.flowlet_gap_us})")
    g.add_argument("--ecmp-seed", type=int, metavar="N", help="seed of the ECMP hash (default 0: the plain hash)")
    g = p.add_argument_group("backend: BMv2 (the testbed) or the ns-3 simulator (docs/simulator.md)")
    g.add_argument("--backend", choices=Backend.names(),
                   help=f"what runs the jobs (default {D.network.backend}); ns3: fat "
                   "trees, hundreds of workers, 100 Gb/s links, computation at real speed")
    g.add_argument("--k", type=int, help="fattree: k (default: the smallest even k with k^3/4 >= the hosts)")
    g.add_argument("--pods", type=int,
                   help=f"leafspine3: pods of --leaves leaves and --spines spines (default {D.network.pods})")
    g.add_argument("--superspines", type=int, help=f"leafspine3: super-spines (default {D.network.superspines})")
    g.add_argument("--ranks", type=int, help="ns3: MPI ranks the simulator runs on (default 1: one process, no MPI)")
    g.add_argument("--hostfile", help="ns3 with --ranks: mpirun's hostfile (a cluster's machines; default: this one)")
    g.add_argument("--check", choices=Check.names(), help="ns3: what packets carry and every sum is checked against: "
                   "exact values, a digest per contribution, or nothing (default auto: exact while small)")
    g.add_argument("--link-delay-us", type=float, metavar="US",
                   help=f"ns3: propagation delay of every link (default {S.link_delay_us:g})")
    g.add_argument("--switch-delay-us", type=float, metavar="US",
                   help="ns3: per-packet delay in a switch (default 0; bench/testbed_costs.py measures BMv2's)")
    g.add_argument("--host-delay-us", type=float, metavar="US",
                   help="ns3: per-message delay at a receiving host (default 0; the Python hosts', measured likewise)")
    g.add_argument("--queue-bytes", type=int, metavar="BYTES",
                   help="ns3: bytes of every priority queue of a port (default: the testbed's shaped buffer per rate)")
    g.add_argument("--shaped-links", action="store_const", const=True, default=None,
                   help="ns3: links as the testbed's HTB shapers (a packet reaches the next hop as it leaves), not "
                        "wires that serialize it first; bench.crossval sets it")
    g = p.add_argument_group("training (docs/training.md): emulate a GPU cluster's computation, time-dilated")
    g.add_argument("--emulate-link", type=float, metavar="GBPS", help="the emulated cluster's link rate (Gb/s; "
                   f"default {E.link_gbps:g}, on ns3 --bw's: dilation 1); with this (or --device/--batch) workers "
                   "train instead of all-reducing in a row")
    g.add_argument("--device", choices=Device.names(), help=f"emulated GPU (default {E.device})")
    g.add_argument("--precision", choices=Precision.names(), help=f"fp32 (TF32 on A100) or amp (default {E.precision})")
    g.add_argument("--batch", type=int, help=f"samples per GPU per iteration (default {E.batch})")
    g.add_argument("--compute-scale", type=float, help="fraction of the modelled computation (0: none)")
    g.add_argument("--sync", choices=Sync.names(), help="next forward after every gradient (iteration) or layer by "
                   f"layer (layer); default {D.algorithm.sync}")
    g.add_argument("--scheduling", choices=Scheduling.names(),
                   help=f"fifo buckets or priority partitions (default {D.algorithm.scheduling})")
    g.add_argument("--bucket-mb", type=float,
                   help=f"fifo: real MiB per bucket (default {D.algorithm.bucket_mb:g}, DDP's)")
    g.add_argument("--partition-mb", type=float,
                   help=f"priority: real MiB per partition (default {D.algorithm.partition_mb:g})")
    g.add_argument("--warmup", type=int,
                   help=f"iterations left out of the steady state (default {D.measurement.warmup})")
    g.add_argument("--in-flight", type=int,
                   help=f"reductions in progress at once, at most (default {D.algorithm.in_flight})")
    p.set_defaults(func=cmd_experiment)

    p = add_command(sub, "compare", "run a matrix of experiments from a spec file (gradswitch/specs/*.toml)",
                    "Run every experiment of a compare spec (a TOML file: defaults, a matrix of values, runs given "
                    "one by one, repetitions, baselines; see gradswitch/specs/), round by round, and write one report: "
                    "report.md with its tables and plots, summary.json with every run's median figures. Started "
                    "again on the same --out, it skips the repetitions that are complete. Exit status: 0 every "
                    "repetition ran and its results held; 3 every one ran but a result was wrong or beyond its error "
                    "bound (report.md: \"check failed\"); 4 a repetition could not run (a crash, a refused spec, a "
                    "timeout); 2 a spec or command line refused before anything ran.",
                    ["gradswitch compare gradswitch/specs/baselines.toml",
                     "gradswitch compare gradswitch/specs/baselines.toml --out runs/baselines-again"])
    complete_paths(p.add_argument("spec", type=Path, metavar="SPEC.toml", help="the compare spec"))
    complete_paths(p.add_argument("--out", type=Path, help="output directory (default: runs/<spec name>)"),
                   "directory")
    p.set_defaults(func=cmd_compare)

    from gradswitch.cli import goodput

    goodput.add_arguments(add_command(sub, "goodput", goodput.SUMMARY, goodput.DESCRIPTION, goodput.EXAMPLES),
                          complete_paths)

    from gradswitch.cli import tables

    tables.add_arguments(add_command(sub, "tables", tables.SUMMARY, tables.DESCRIPTION, tables.EXAMPLES),
                         complete_paths)

    from gradswitch.cli import export_et

    export_et.add_commands(sub, add_command, parse_size)  # export-et, check-et: Chakra traces

    p = add_command(sub, "clean", "remove switches, hosts and veths left by a run that was killed",
                    "Remove what a network killed outright left behind (its switch processes, host namespaces, "
                    "veth interfaces, reserved ports), and switch-port veths no running switch uses. A network "
                    "that is still running is left alone. Run it as root, as the network was.",
                    ["gradswitch clean"])
    p.set_defaults(func=cmd_clean)

    p = add_command(sub, "completion", "print the shell completion script (bash, zsh, tcsh)",
                    "Print a script that completes gradswitch's commands, options, choices and file names in your "
                    "shell. To enable it:\n\n"
                    "  bash: mkdir -p ~/.local/share/bash-completion/completions\n"
                    "        gradswitch completion bash > ~/.local/share/bash-completion/completions/gradswitch\n"
                    "        (loaded in new shells; or add `eval \"$(gradswitch completion bash)\"` to ~/.bashrc)\n"
                    "  zsh:  gradswitch completion zsh > ~/.zfunc/_gradswitch\n"
                    "        (with `fpath=(~/.zfunc $fpath); autoload -Uz compinit; compinit` in ~/.zshrc)\n"
                    "  tcsh: gradswitch completion tcsh > ~/.gradswitch.tcsh\n"
                    "        (with `source ~/.gradswitch.tcsh` in ~/.tcshrc)",
                    ["gradswitch completion bash > ~/.local/share/bash-completion/completions/gradswitch",
                     "eval \"$(gradswitch completion bash)\"  # this shell only"])
    p.add_argument("shell", choices=COMPLETION_SHELLS, help="the shell to complete in")
    p.set_defaults(func=cmd_completion)
    return parser


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The options, or one line and exit status 2: no command names the commands; an unknown option is
    named by its command's parser (`gradswitch experiment: error: ... --wrokers`), with the nearest option."""
    args, extras = parser.parse_known_args(argv)
    commands: dict[str, argparse.ArgumentParser] = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    if args.command_name is None:
        parser.error(f"give a command: {', '.join(commands)}")
    if extras:
        command = commands[args.command_name]
        options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
        close = [m for e in extras if e.startswith("-") for m in difflib.get_close_matches(e.split("=")[0], options, 1)]
        command.error(f"unrecognized arguments: {' '.join(extras)}"
                      + (f": did you mean {', '.join(close)}?" if close else ""))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_command_line(build_parser(), argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.bmv2:
            from gradswitch.net.bmv2 import use_bmv2

            use_bmv2(args.bmv2)
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted: everything was torn down", file=sys.stderr)
        return 130
    except user_errors() as e:
        if args.verbose:
            traceback.print_exc()
        for line in str(e).splitlines() or [type(e).__name__]:
            print(f"error: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
