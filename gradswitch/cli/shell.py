"""`gradswitch shell SWITCH`: p4runtime-shell, the P4Runtime shell users know, on one switch of the running network.

p4runtime-shell 0.0.6 pins protobuf<3.21, p4runtime 1.4.1 and IPython 7.31, which the project left
behind (gradswitch/control/p4rt/proto.py), so it runs from a virtual environment of its own, made on first
use under the user's cache directory ($XDG_CACHE_HOME/gradswitch/p4runtime-shell, default
~/.cache/gradswitch/...) with pip (PyPI is needed that once). It attaches to the switch without
`--config`: it reads the P4Info from the switch and never replaces the running pipeline.

Election ids (gradswitch/control/p4rt/session.py): by default it is a backup client (SHELL_ELECTION_ID,
below the controller's and the REPL's), so it reads everything and the switch refuses its writes
("Not primary"); the controller stays in charge. With `--primary` it takes an id above the
controller's (SHELL_PRIMARY_ELECTION_ID): the shell's writes go through and the controller's are
refused while the shell is open; when the shell exits, the switch makes the controller primary again.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gradswitch.formats import FormatError
from gradswitch.protocol.paths import runtime_dir, user_cache_dir

SHELL_REQUIREMENT = "p4runtime-shell==0.0.6"
READY_FILE = ".gradswitch-ready"  # written last: a venv without it (pip cut short) is made again


class ShellError(RuntimeError):
    """A user's mistake or a missing piece: one line saying what to do."""


@dataclass(frozen=True)
class ShellTarget:
    """One switch of a running network, as the shell connects to it."""

    switch: str
    device_id: int
    grpc_addr: str


def shell_venv() -> Path:
    return user_cache_dir() / "p4runtime-shell"


def find_network(run_dir: Path | None) -> Path:
    """The run directory of the running network: the one given, else the only one under runtime_dir()."""
    from gradswitch.net.network import STATE_FILE

    if run_dir is not None:
        if not (run_dir / STATE_FILE).exists():
            raise ShellError(f"--run-dir {run_dir}: no running network there (no {STATE_FILE}); "
                             f"leave --run-dir out to find the one running under {runtime_dir()}")
        return run_dir
    running = sorted(p.parent for p in runtime_dir().glob(f"*/{STATE_FILE}") if _controller_alive(p))
    if not running:
        raise ShellError(f"no running network under {runtime_dir()}; start one with `gradswitch net`")
    if len(running) > 1:
        raise ShellError(f"several running networks ({', '.join(map(str, running))}); pick one with --run-dir")
    return running[0]


def _controller_alive(state: Path) -> bool:
    from gradswitch.net.network import read_state

    try:
        pid = int(read_state(state).get("controller_pid") or 0)
    except FormatError as e:
        raise ShellError(str(e)) from None
    except (OSError, ValueError, AttributeError):
        return False
    return pid > 0 and Path(f"/proc/{pid}").exists()


def target(run_dir: Path, switch: str) -> ShellTarget:
    """Where `switch` of the network in run_dir listens; ShellError names the switches there."""
    from gradswitch.net.network import STATE_FILE, read_state

    try:
        switches = read_state(run_dir / STATE_FILE)["switches"]
    except FormatError as e:
        raise ShellError(str(e)) from None
    except (OSError, ValueError, KeyError) as e:
        raise ShellError(f"{run_dir / STATE_FILE}: cannot read the network's switches ({e})") from None
    if switch not in switches:
        raise ShellError(f"no switch {switch!r} in the running network: give one of {', '.join(sorted(switches))}")
    sw = switches[switch]
    return ShellTarget(switch, int(sw["device_id"]), f"127.0.0.1:{int(sw['grpc_port'])}")


def venv_python(directory: Path) -> Path:
    return directory / "bin" / "python"


def ensure_shell_venv(directory: Path | None = None, out: Sequence[int] = ()) -> Path:
    """The shell's virtual environment's Python, made with pip on first use (pip's progress shown)."""
    directory = directory or shell_venv()
    ready = directory / READY_FILE
    if ready.exists() and ready.read_text().strip() == SHELL_REQUIREMENT and venv_python(directory).exists():
        return venv_python(directory)
    print(f"gradswitch shell: installing {SHELL_REQUIREMENT} into {directory} (once; needs PyPI) ...",
          file=sys.stderr, flush=True)
    venv.EnvBuilder(clear=True, with_pip=True).create(directory)
    pip = [str(venv_python(directory)), "-m", "pip", "install", "--disable-pip-version-check", SHELL_REQUIREMENT]
    # pip's output goes to stderr, so a caller feeding the shell through a pipe reads only the shell on stdout.
    if subprocess.run(pip, stdout=sys.stderr, check=False).returncode != 0:
        raise ShellError(f"pip could not install {SHELL_REQUIREMENT} into {directory} (see its output above); "
                         "check that PyPI is reachable, then run the command again")
    ready.write_text(SHELL_REQUIREMENT + "\n")
    return venv_python(directory)


def shell_command(python: Path, to: ShellTarget, primary: bool) -> list[str]:
    """p4runtime-shell's command line: no --config, so it takes the P4Info from the switch and pushes nothing."""
    from gradswitch.control.p4rt.session import SHELL_ELECTION_ID, SHELL_PRIMARY_ELECTION_ID

    high, low = SHELL_PRIMARY_ELECTION_ID if primary else SHELL_ELECTION_ID
    return [str(python), "-m", "p4runtime_sh", "--grpc-addr", to.grpc_addr, "--device-id", str(to.device_id),
            "--election-id", f"{high},{low}"]


def cmd_shell(args: argparse.Namespace) -> int:
    try:
        to = target(find_network(args.run_dir), args.switch)
        python = ensure_shell_venv()
    except ShellError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    role = ("primary: its writes go through, the controller's are refused until it exits" if args.primary
            else "backup: it reads; the switch refuses its writes (--primary to write)")
    print(f"gradswitch shell: {to.switch} (device {to.device_id}, {to.grpc_addr}), {role}", file=sys.stderr,
          flush=True)
    command = shell_command(python, to, args.primary)
    os.execv(command[0], command)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `gradswitch shell` (gradswitch/cli/main.py makes the subcommand)."""
    p.add_argument("switch", metavar="SWITCH", help="a switch of the running network (e.g. leaf1)")
    p.add_argument("--run-dir", type=Path, help="run directory of the network (default: the one running)")
    p.add_argument("--primary", action="store_true",
                   help="take over from the controller while the shell is open, so that its writes go through")
    p.set_defaults(func=cmd_shell)


DESCRIPTION = ("Open p4runtime-shell (IPython; `tables`, `table_entry[...]`, `.read()`, `.insert()`) on one switch "
               "of the network `gradswitch net` runs. It runs from a virtual environment of its own, made under "
               "~/.cache/gradswitch on first use (needs PyPI once), reads the P4Info from the switch and never "
               "replaces its pipeline. It is a backup client: it reads, and the switch refuses its writes, the "
               "controller staying in charge; --primary takes over while the shell is open.")
EXAMPLES = ["gradswitch shell leaf1",
            "echo 'print(len(list(table_entry[\"ipv4_routes\"].read())))' | gradswitch shell leaf1",
            "gradswitch shell leaf1 --primary  # write from the shell; the controller's writes wait"]
