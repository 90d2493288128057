"""A bad REPL argument is one `error:` line naming the argument, what is allowed and what to do,
and nothing reaches a switch; the REPL keeps running. (The commands' effects on real switches
are tested in tests/mininet/test_network.py and tests/bmv2/.)"""

from __future__ import annotations

from typing import Any

import pytest

from gradswitch.control.control_plane import ControlPlane
from gradswitch.control.dlcp_settings import DlcpSettings
from gradswitch.control.load_balancing import LoadBalancing
from gradswitch.control.netreduce_jobs import NetReduceJobs
from gradswitch.control.repl import Repl
from gradswitch.protocol.p4_constants import CONFIG


class _Switchless:
    """A fabric that knows its switches' names and fails the test if asked for anything else."""

    topo: Any = None

    def switch_names(self) -> list[str]:
        return ["s1", "s2"]

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a bad argument reached the fabric ({name})")


def repl() -> tuple[Repl, list[str]]:
    fabric: Any = _Switchless()
    out: list[str] = []
    control = ControlPlane(fabric, NetReduceJobs(fabric), DlcpSettings(fabric), LoadBalancing(fabric))
    return Repl(control, out=out.append), out


@pytest.mark.parametrize(("line", "says"), [
    ("loss s1 x 0.1", f"PORT 'x' is not a whole number (give 0..{CONFIG.CPU_PORT - 1})"),
    ("loss s1 300 0.1", f"PORT 300 is out of range: give 0..{CONFIG.CPU_PORT - 1}"),
    ("loss s1 1 2", "FRACTION 2 is out of range: give 0..1"),
    ("loss s1 1 half", "FRACTION 'half' is not a number (give 0..1)"),
    ("loss s1 1 0.1 sideways", "loss: unknown word(s) sideways (give in, out or both, roce, corrupt)"),
    ("loss s9 1 0.1", "no switch 's9' (switches: s1, s2)"),
    ("counter s1 port_rx -1", "INDEX -1 is out of range"),
    ("mcast s1 zero", "GROUP 'zero' is not a whole number (give 1..65535)"),
    ("packet-out s1 1 zz", "HEXBYTES: give the packet as hex digits"),
    ("packet-out s1 999 00", f"PORT 999 is out of range: give 0..{CONFIG.CPU_PORT - 1}"),
    ("packet-in s1 forever", "SECONDS 'forever' is not a number"),
    ("job status x", f"JOB 'x' is not a whole number (give 1..{CONFIG.AGG_MAX_JOBS - 1})"),
    ("job create 99 h1 h2", f"JOB 99 is out of range: give 1..{CONFIG.AGG_MAX_JOBS - 1}"),
    ("job create 1 h1 h2 credits=9", f"credits 9 is out of range: give 1..{CONFIG.AGG_MAX_CREDITS}"),
    ("job create 1 h1 h2 credit=2", "job create takes credits=, spine=, k= and deadline_ms= (got credit)"),
    ("job create 1 h1 h2 h3 k=4", "k 4 is out of range: give 1..3"),
    ("job create 1 h1", "at least two workers"),
    ("job status 3", "no NetReduce job 3 (jobs: none)"),
    ("job teardown 3", "no NetReduce job 3 (jobs: none)"),
    ("job frobnicate 3", "unknown job command 'frobnicate'"),
    ("dlcp 64 priority=on", f"JOB 64 is out of range: give 1..{CONFIG.DLCP_MAX_JOBS - 1}"),
    ("dlcp 1 priority=maybe", "dlcp takes priority=, drop=, spray= with on or off"),
    ("dlcp thresholds 9=100", f"PRIORITY 9 is out of range: give 0..{CONFIG.PRIORITY_QUEUES - 1}"),
    ("dlcp thresholds 1=lots", "BYTES 'lots' is not a whole number"),
    ("dlcp thresholds -5", "BYTES -5 is out of range"),
    ("dlcp thresholds 1=100 big", "usage: dlcp thresholds"),
    ("insert s1 acl_rules protocol=17 priority=x -> drop", "priority 'x' is not a whole number"),
    ("roce-class maybe", "roce-class takes on or off (got maybe)"),
    ("roce-class on off", "roce-class takes on or off (got on off)"),
    ("balance letflow", "balance: unknown word 'letflow' (give ecmp or flowlet, gap=MICROSECONDS, seed=N)"),
    ("balance flowlet gap=soon", "gap 'soon' is not a whole number (give 1..4294967295)"),
    ("balance flowlet gap=0", "gap 0 is out of range: give 1..4294967295"),
    ("balance seed=-1", "seed -1 is out of range: give 0..2147483647"),
])
def test_a_bad_argument_is_one_line_and_touches_no_switch(line, says):
    r, out = repl()
    assert r.onecmd(line) is False  # the REPL goes on
    assert len(out) == 1 and out[0].startswith("error: "), out
    assert says in out[0], out[0]


def test_a_controller_that_has_gone_is_an_error_line_not_a_crash():
    class Gone(_Switchless):
        def drops(self, switch: str) -> dict[str, int]:
            raise EOFError  # what a multiprocessing proxy raises when the controller process exited

    fabric: Any = Gone()
    out: list[str] = []
    r = Repl(ControlPlane(fabric, NetReduceJobs(fabric), DlcpSettings(fabric), LoadBalancing(fabric)), out=out.append)
    assert r.onecmd("drops s1") is False
    assert out == ["error: the network's controller does not answer (EOFError): it has stopped; leave with Ctrl-D "
                   "and start a network again"]
