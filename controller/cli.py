"""The `gradswitch` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocol.paths import runtime_dir


def _topology_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("topology")
    g.add_argument("--topo", choices=("rack", "leafspine", "dumbbell"), default="leafspine")
    g.add_argument("--hosts", type=int, help="rack: number of hosts")
    g.add_argument("--leaves", type=int, help="leafspine: number of leaves")
    g.add_argument("--spines", type=int, help="leafspine: number of spines")
    g.add_argument("--hosts-per-leaf", type=int, help="leafspine: hosts on each leaf")
    g.add_argument("--hosts-per-side", type=int, help="dumbbell: hosts on each side")
    g.add_argument("--bw", type=float, metavar="MBPS", help="shape every link to this rate (HTB)")


def topology_from_args(args: argparse.Namespace) -> Any:
    from mininet_topos.topologies import build_topology

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
    from controller.doctor import report, run_checks

    checks = run_checks()
    print(report(checks))
    essential = {"simple_switch_grpc", "p4c-bm2-ss", "mnexec", "root"}
    return 0 if all(c.ok for c in checks if c.name in essential) else 1


def cmd_build(args: argparse.Namespace) -> int:
    from controller.build import BuildError, compile_program

    try:
        result = compile_program()
    except BuildError as e:
        print(e, file=sys.stderr)
        return 1
    print(f"compiled {result.json} and {result.p4info}")
    return 0


def cmd_net(args: argparse.Namespace) -> int:
    from controller.control_socket import ControlServer
    from mininet_topos.network import GradNetwork, NetworkError, NetworkOptions

    topo = topology_from_args(args)
    options = NetworkOptions(log_level=args.log_level, pcap=args.pcap)
    print(f"bringing up {topo.name}: {len(topo.switches)} BMv2 switches, {len(topo.hosts)} hosts ...", flush=True)
    try:
        with GradNetwork(topo, options) as net:
            assert net.fabric is not None
            print(f"switches programmed; logs in {net.run_dir}", flush=True)
            if args.pingall:
                reach = net.pingall()
                print(reach.table())
                return 0 if reach.full else 1
            with ControlServer(net.fabric, net.run_dir):
                _mininet_cli(net)
            return 0
    except NetworkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _mininet_cli(net: Any) -> None:
    from mininet.cli import CLI

    from controller.repl import Repl, run_repl

    class GradCLI(CLI):  # type: ignore[misc]
        def do_repl(self, line: str) -> None:
            """repl [COMMAND]: the gradswitch REPL (tables, entries, counters), or one command of it."""
            if line.strip():
                Repl(net.fabric).onecmd(line)
            else:
                run_repl(net.fabric)

    print("Mininet CLI: `repl` opens the gradswitch REPL; `gradswitch repl` in another terminal attaches too.")
    GradCLI(net.net)


def _find_run_dir(explicit: Path | None) -> Path:
    from controller.control_socket import SOCKET_NAME, ControlSocketError

    if explicit is not None:
        return explicit
    candidates = sorted(p.parent for p in runtime_dir().glob(f"*/{SOCKET_NAME}"))
    if not candidates:
        raise ControlSocketError(f"no running network under {runtime_dir()}; start one with `gradswitch net`")
    if len(candidates) > 1:
        listing = ", ".join(map(str, candidates))
        raise ControlSocketError(f"several running networks ({listing}); pick one with --run-dir")
    return candidates[0]


def cmd_repl(args: argparse.Namespace) -> int:
    from controller.control_socket import ControlSocketError, attach
    from controller.fabric import Fabric
    from controller.p4rt import REPL_ELECTION_ID, SwitchError
    from controller.repl import run_repl

    if args.direct:
        fabric = Fabric(topology_from_args(args), election_id=REPL_ELECTION_ID)
        try:
            fabric.connect()
        except SwitchError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        with fabric:
            run_repl(fabric, args.command)
        return 0
    try:
        proxy = attach(_find_run_dir(args.run_dir))
    except ControlSocketError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    run_repl(proxy, args.command)
    return 0


def parse_size(text: str) -> int:
    """8MiB, 512KiB, 1GiB, 1000 (bytes)."""
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "b": 1}
    lowered = text.strip().lower()
    for unit, factor in units.items():
        if lowered.endswith(unit):
            return int(float(lowered[: -len(unit)]) * factor)
    return int(lowered)


def cmd_experiment(args: argparse.Namespace) -> int:
    from controller.experiment import ExperimentError, ExperimentSpec, run_experiment
    from controller.report import format_table
    from mininet_topos.network import NetworkError

    spec = ExperimentSpec(algo=args.algo, workers=args.workers, size_bytes=parse_size(args.size),
                          iterations=args.iterations, topo=args.topo, bw_mbps=args.bw, loss_pct=args.loss,
                          transport=args.transport, servers=args.servers, ps_key_bytes=parse_size(args.ps_key),
                          workload=args.workload, scale=args.scale,
                          dtype=args.dtype, float_mode=args.float_mode, mtu=args.mtu, name=args.name or "")
    out = args.out or Path("runs") / spec.label
    try:
        report = run_experiment(spec, out)
    except (ExperimentError, NetworkError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_table(report))
    print(f"results: {out / 'results.json'}, plots: {out / 'iterations.png'}")
    return 0 if report["ok"] else 1


def cmd_compare(args: argparse.Namespace) -> int:
    from controller.compare import load_spec, run_compare
    from controller.experiment import ExperimentError

    try:
        spec = load_spec(args.spec)
    except ExperimentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = args.out or Path("runs") / spec.name
    summary = run_compare(spec, out)
    print(f"report: {out / 'report.md'}, summary: {out / 'summary.json'}")
    return 0 if all(h.get("correct") for h in summary.values()) else 1


def cmd_clean(args: argparse.Namespace) -> int:
    from mininet_topos.network import STATE_FILE, NetworkError, cleanup_run, remove_orphan_interfaces

    status = 0
    for state in sorted(runtime_dir().glob(f"*/{STATE_FILE}")):
        try:
            removed = cleanup_run(state.parent)
        except NetworkError as e:
            print(f"skipped: {e}")
            status = 1
            continue
        for item in removed:
            print(f"removed {item}")
    # Runs whose state file is gone (a temporary run directory, a run killed outright
    # elsewhere) can still leave switch-port veths in the root namespace.
    for intf in remove_orphan_interfaces():
        print(f"removed interface {intf} (no running switch uses it)")
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gradswitch", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command_name", required=True)

    p = sub.add_parser("doctor", help="report the tools gradswitch uses and what fails without them")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("build", help="compile p4src/gradswitch.p4 (warnings are errors)")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("net", help="bring up a Mininet network of BMv2 switches")
    _topology_args(p)
    p.add_argument("--pingall", action="store_true", help="check every host pair, print the table, tear down")
    p.add_argument("--log-level", default="info", help="BMv2 log level (debug logs every packet)")
    p.add_argument("--pcap", action="store_true", help="BMv2 writes pcaps of every port")
    p.set_defaults(func=cmd_net)

    p = sub.add_parser("repl", help="inspect and change the switches of a running network")
    p.add_argument("--run-dir", type=Path, help="run directory of the network (default: the one running)")
    p.add_argument("-c", "--command", action="append", help="run this REPL command and exit (repeatable)")
    p.add_argument("--direct", action="store_true",
                   help="no controller running: open own P4Runtime sessions (lower election id than a controller)")
    _topology_args(p)
    p.set_defaults(func=cmd_repl)

    p = sub.add_parser("experiment", help="run one all-reduce experiment and report it")
    p.add_argument("--algo", choices=("ring", "ps", "netreduce"), default="ring")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--servers", type=int, default=1, help="parameter servers (ps)")
    p.add_argument("--ps-key", default="64KiB", help="parameter server: bytes per key (smaller keys pipeline more)")
    p.add_argument("--size", default="8MiB", help="synthetic gradient size (e.g. 8MiB)")
    p.add_argument("--workload", default="synthetic", help="synthetic, resnet50, vgg16, bert-base, small-cnn, *-stanza")
    p.add_argument("--scale", type=float, default=1.0, help="fraction of a model profile's layer sizes")
    p.add_argument("--dtype", choices=("int32", "float32"), default="int32")
    p.add_argument("--float-mode", choices=("fixed", "exponent"), default="fixed",
                   help="float32 as int32: a fixed scale, or a shared exponent per 64-value block (SwitchML-style)")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--topo", choices=("rack", "leafspine", "dumbbell"), default="rack")
    p.add_argument("--bw", type=float, metavar="MBPS", help="shape every link to this rate")
    p.add_argument("--loss", type=float, default=0.0, metavar="PCT", help="drop this percentage on every worker link")
    p.add_argument("--transport", choices=("gbn", "sr"), default="gbn",
                   help="go-back-N (RoCE) or selective repeat (IRN)")
    p.add_argument("--mtu", type=int, default=1024, choices=(256, 1024, 4096))
    p.add_argument("--name", help="run name (default: algo-nN-topo)")
    p.add_argument("--out", type=Path, help="output directory (default: runs/NAME)")
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("compare", help="run a matrix of experiments from a spec file (experiments/*.toml)")
    p.add_argument("spec", type=Path)
    p.add_argument("--out", type=Path, help="output directory (default: runs/<spec name>)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("clean", help="remove switches, hosts and veths left by a run that was killed")
    p.set_defaults(func=cmd_clean)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted: everything was torn down", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
