"""`gradswitch repl`: inspect and change the switches of a running network by name.

    switches                                  list switches, their ports and sessions
    tables [TABLE]                            list tables, or one table's keys and actions
    entries SWITCH TABLE                      list a table's entries on a switch
    insert SWITCH TABLE KEY=V ... -> ACTION [ARG=V ...] [priority=N]
    modify SWITCH TABLE KEY=V ... -> ACTION [ARG=V ...] [priority=N]
    delete SWITCH TABLE KEY=V ... [priority=N]
    counter SWITCH COUNTER [INDEX]            read an indexed counter
    ports SWITCH                              packets and bytes per port
    drops SWITCH                              dropped packets by reason
    mcast SWITCH GROUP                        read a multicast group
    loss SWITCH PORT FRACTION [in|out|both] [roce] [corrupt]
    packet-out SWITCH PORT HEXBYTES           inject a packet out of a port
    packet-in SWITCH [SECONDS]                wait for the next packet sent to the controller
    job create JOB HOST... [credits=N] [spine=SWITCH]   a NetReduce job on these worker hosts
    job status JOB | job teardown JOB | jobs  NetReduce jobs: counters, cells in use; reset
    dlcp JOB [priority=on|off] [drop=on|off] [spray=on|off]   DLCP features of a job
    dlcp thresholds [default | BYTES | PRIORITY=BYTES ...]   DLCP selective-drop thresholds
    roce-class [on|off]                       every RoCE v2 packet in one priority class above bulk traffic
    balance [ecmp|flowlet] [gap=US] [seed=N]  how ECMP groups pick a member: per flow, per flowlet; the hash seed
    fault KIND:TARGET[@SECONDS][,opt=V ...]   a switch or link fails now or SECONDS from now (docs/faults.md)

Keys and arguments are P4 names (the last component is enough: dst_addr for
hdr.ipv4.dst_addr); values are numbers, IPv4 or MAC addresses, 10.0.0.0/8 for LPM,
V&&&MASK for ternary. Tab completes commands, switches, tables, fields and actions.

The REPL works on a `ControlPlane`: in `gradswitch net` it is the controller itself; in a
separate terminal its parts are proxies of the running controller's
(gradswitch/control/control_socket.py), so every write is made by the one primary session of each
switch.
"""

from __future__ import annotations

import cmd
import shlex
from collections.abc import Callable
from typing import Any

from gradswitch.control.control_plane import ControlPlane
from gradswitch.control.controls.fault_injection import Direction
from gradswitch.control.controls.netreduce import REFUSALS
from gradswitch.control.controls.packet_io import punt_reason
from gradswitch.control.netreduce_jobs import JobError
from gradswitch.control.p4rt import P4Info, SwitchError, TableEntry, UnknownName
from gradswitch.control.p4rt.entities import EntryError, MatchValue, Value, short
from gradswitch.protocol.ecmp import MAX_ECMP_SEED, MAX_FLOWLET_GAP_US, LoadBalance
from gradswitch.protocol.netreduce import DEFAULT_CREDITS, MAX_DEADLINE_US
from gradswitch.protocol.p4_constants import CONFIG
from gradswitch.protocol.paths import P4INFO


class ReplError(ValueError):
    """A command line the REPL cannot read."""


def whole(word: str, what: str, lo: int, hi: int) -> int:
    """`word` as a whole number lo..hi (decimal or 0x...), or a ReplError naming `what`."""
    try:
        n = int(word, 0)
    except ValueError:
        raise ReplError(f"{what} {word!r} is not a whole number (give {lo}..{hi})") from None
    if not lo <= n <= hi:
        raise ReplError(f"{what} {n} is out of range: give {lo}..{hi}")
    return n


def number(word: str, what: str, lo: float, hi: float) -> float:
    """`word` as a number lo..hi, or a ReplError naming `what`."""
    try:
        x = float(word)
    except ValueError:
        raise ReplError(f"{what} {word!r} is not a number (give {lo:g}..{hi:g})") from None
    if not lo <= x <= hi:
        raise ReplError(f"{what} {x:g} is out of range: give {lo:g}..{hi:g}")
    return x


def parse_entry(p4info: P4Info, table: str, words: list[str], with_action: bool) -> TableEntry:
    """A TableEntry from `KEY=V ... [-> ACTION ARG=V ...] [priority=N]`."""
    priority = 0
    match: dict[str, MatchValue] = {}
    params: dict[str, Value] = {}
    action = ""
    in_action = False
    for word in words:
        if word == "->":
            in_action = True
            continue
        if "=" not in word:
            if in_action and not action:
                action = word
                continue
            raise ReplError(f"expected KEY=VALUE, got {word!r}")
        key, value = word.split("=", 1)
        if key == "priority":
            priority = whole(value, "priority", 1, 2**31 - 1)
        elif in_action:
            params[key] = value
        else:
            match[key] = value
    if with_action and not action:
        raise ReplError("give the action after '->', e.g. -> set_next_hop port=1 dst_mac=00:00:0a:00:01:01")
    tname = p4info.table(table).preamble.name  # AmbiguousName lists the tables a short name could mean
    return TableEntry(tname, match, action, params, priority)


class Repl(cmd.Cmd):
    intro = "gradswitch REPL: `help` lists commands, Tab completes, Ctrl-D leaves."
    prompt = "gradswitch> "

    def __init__(self, control: ControlPlane, p4info: P4Info | None = None, out: Callable[[str], None] = print,
                 inject: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self.control = control
        self.inject = inject  # fires a fault (its command line form) on the network; None: this REPL cannot
        self.fabric = control.fabric
        self.p4info = p4info or P4Info.from_file(P4INFO)
        self.out = out
        self._switches: list[str] = list(self.fabric.switch_names())

    # ---- plumbing ----

    def onecmd(self, line: str) -> bool:
        try:
            return super().onecmd(line)
        except (ReplError, EntryError, UnknownName, SwitchError, JobError, KeyError, IndexError, ValueError) as e:
            self.out(f"error: {e}")
        except (EOFError, ConnectionError) as e:  # the controller this REPL is attached to has gone
            self.out(f"error: the network's controller does not answer ({type(e).__name__}): it has stopped; "
                     "leave with Ctrl-D and start a network again")
        return False

    def emptyline(self) -> bool:
        return False

    identchars = cmd.Cmd.identchars + "-"

    def parseline(self, line: str) -> tuple[str | None, str | None, str]:
        command, arg, line = super().parseline(line)
        return (command.replace("-", "_") if command else command), arg, line

    def default(self, line: str) -> None:
        self.out(f"unknown command {line.split()[0]!r}; `help` lists them")

    def do_help(self, arg: str) -> None:
        """help [COMMAND]: the commands, one line each, or one command's usage."""
        if arg.strip():
            super().do_help(arg.strip().replace("-", "_"))
            return
        for name in sorted(n[3:] for n in self.get_names() if n.startswith("do_") and n not in ("do_EOF", "do_quit")):
            paragraph = (getattr(self, f"do_{name}").__doc__ or "").strip().split("\n\n")[0]
            self.out("  " + " ".join(line.strip() for line in paragraph.splitlines()))
        self.out("Names are P4 names; the last component is enough where it names one thing "
                 "(`tables` shows the shortest name of each table).")

    def _args(self, arg: str, least: int, usage: str) -> list[str]:
        words = shlex.split(arg)
        if len(words) < least:
            raise ReplError(f"usage: {usage}")
        return words

    def _switch(self, name: str) -> str:
        if name not in self._switches:
            raise ReplError(f"no switch {name!r} (switches: {', '.join(self._switches)})")
        return name

    # ---- commands ----

    def do_switches(self, arg: str) -> None:
        """switches: list the switches of the network."""
        for s in self.fabric.describe_switches():
            role = "down: its process died" if not s.get("up", True) else "primary" if s["primary"] else "not primary"
            self.out(f"{s['name']:<10} {s['role']:<6} device {s['device_id']:<3} gRPC {s['grpc']:<16} "
                     f"thrift {s['thrift_port']:<6} ports {s['ports']} ({role})")

    def do_tables(self, arg: str) -> None:
        """tables [TABLE]: list tables, or the keys and actions of one."""
        if arg.strip():
            t = self.p4info.table(arg.strip())
            name = t.preamble.name
            keys = ", ".join(f"{short(f.name)}:{f.match_type.lower()}/{f.bitwidth}"
                             for f in self.p4info.match_fields(name))
            self.out(f"{name}\n  keys: {keys}\n  size: {t.size}")
            for a in self.p4info.table_actions(name):
                params = ", ".join(f"{p.name}/{p.bitwidth}" for p in self.p4info.params(a))
                self.out(f"  action {short(a)}({params})")
            return
        labels = {name: self.p4info.table_label(name) for name in self.p4info.table_names()}
        width = max(map(len, labels.values()))
        for name, label in labels.items():
            self.out(f"{label:<{width}}  {name}")

    def do_entries(self, arg: str) -> None:
        """entries SWITCH TABLE: list a table's entries on a switch."""
        sw, table = self._args(arg, 2, "entries SWITCH TABLE")[:2]
        sw = self._switch(sw)
        views = self.fabric.read_entries(sw, table)
        for v in views:
            self.out(v.text)
        self.out(f"({len(views)} entries)")

    def _write(self, op: str, arg: str, with_action: bool) -> None:
        usage = f"{op} SWITCH TABLE KEY=V ..." + (" -> ACTION [ARG=V ...]" if with_action else "") + " [priority=N]"
        words = self._args(arg, 3 if with_action else 2, usage)
        sw, table = self._switch(words[0]), words[1]
        entry = parse_entry(self.p4info, table, words[2:], with_action)
        getattr(self.fabric, op)(sw, [entry])
        done = {"insert": "inserted", "modify": "modified", "delete": "deleted"}[op]
        self.out(f"{done} on {sw}: {entry.describe(self.p4info.table_label(entry.table))}")

    def do_insert(self, arg: str) -> None:
        """insert SWITCH TABLE KEY=V ... -> ACTION [ARG=V ...] [priority=N]: add an entry."""
        self._write("insert", arg, True)

    def do_modify(self, arg: str) -> None:
        """modify SWITCH TABLE KEY=V ... -> ACTION [ARG=V ...] [priority=N]: change an entry's action."""
        self._write("modify", arg, True)

    def do_delete(self, arg: str) -> None:
        """delete SWITCH TABLE KEY=V ... [priority=N]: remove the entry with this key (no action needed)."""
        self._write("delete", arg, False)

    def do_counter(self, arg: str) -> None:
        """counter SWITCH COUNTER [INDEX]: read an indexed counter (non-zero cells)."""
        words = self._args(arg, 2, "counter SWITCH COUNTER [INDEX]")
        index = whole(words[2], "INDEX", 0, 2**31 - 1) if len(words) > 2 else None
        sw = self._switch(words[0])
        cells = self.fabric.read_counter(sw, words[1], index)
        shown = {i: c for i, c in sorted(cells.items()) if c.packets or index is not None}
        for i, c in shown.items():
            self.out(f"[{i}] {c.packets} packets, {c.bytes} bytes")
        if not shown:
            self.out("(all cells zero)")

    def do_ports(self, arg: str) -> None:
        """ports SWITCH: packets and bytes received and sent per port."""
        sw = self._switch(self._args(arg, 1, "ports SWITCH")[0])
        self.out(f"{'port':>5} {'rx pkts':>10} {'rx bytes':>12} {'tx pkts':>10} {'tx bytes':>12}")
        for p in self.fabric.port_stats(sw):
            self.out(f"{p.port:>5} {p.rx_packets:>10} {p.rx_bytes:>12} {p.tx_packets:>10} {p.tx_bytes:>12}")

    def do_drops(self, arg: str) -> None:
        """drops SWITCH: dropped packets by reason, and NetReduce's refusals by the port they came in on."""
        sw = self._switch(self._args(arg, 1, "drops SWITCH")[0])
        drops = self.fabric.drops(sw)
        for reason, n in sorted(drops.items()):
            self.out(f"{reason:<16} {n}")
        if not drops:
            self.out("(no drops)")
        trimmed = self.control.dlcp.trimmed(sw)
        if trimmed:
            self.out(f"(and {trimmed} packets trimmed by DLCP's selective drop: payload dropped, headers sent on)")
        refusals = {port: {e: n for e, n in events.items() if e in REFUSALS}
                    for port, events in self.control.netreduce.port_events(sw).items()}
        for port, events in sorted(refusals.items()):
            if events:
                self.out(f"  NetReduce, port {port}: " + ", ".join(f"{e} {n}" for e, n in sorted(events.items())))

    def do_mcast(self, arg: str) -> None:
        """mcast SWITCH GROUP: read a multicast group."""
        words = self._args(arg, 2, "mcast SWITCH GROUP")
        sw = self._switch(words[0])
        group_id = whole(words[1], "GROUP", 1, 0xFFFF)
        group = self.fabric.read_multicast_group(sw, group_id)
        self.out(group.describe() if group else f"no multicast group {words[1]}")

    def do_loss(self, arg: str) -> None:
        """loss SWITCH PORT FRACTION [in|out|both] [roce] [corrupt]: drop (or corrupt: flip a bit of) a
        fraction of a port's packets (0 stops)."""
        words = self._args(arg, 3, "loss SWITCH PORT FRACTION [in|out|both] [roce] [corrupt]")
        directions: dict[str, Direction] = {"in": "in", "out": "out", "both": "both"}
        direction: Direction = next((directions[w] for w in words[3:] if w in directions), "both")
        roce = "roce" in words[3:]
        corrupt = "corrupt" in words[3:]
        sw = self._switch(words[0])
        port = whole(words[1], "PORT", 0, CONFIG.CPU_PORT - 1)
        fraction = number(words[2], "FRACTION", 0.0, 1.0)
        unknown = [w for w in words[3:] if w not in (*directions, "roce", "corrupt")]
        if unknown:
            raise ReplError(f"loss: unknown word(s) {', '.join(unknown)} (give in, out or both, roce, corrupt)")
        rules = self.fabric.set_port_loss(sw, port, fraction, direction,
                                          CONFIG.IP_PROTO_UDP if roce else None,
                                          CONFIG.ROCE_V2_UDP_PORT if roce else None, corrupt=corrupt)
        kind = "corruption" if corrupt else "fault"
        self.out(f"{len(rules)} {kind} rule(s) on {words[0]} port {words[1]}")

    def do_packet_out(self, arg: str) -> None:
        """packet-out SWITCH PORT HEXBYTES: send a packet out of a switch port."""
        words = self._args(arg, 3, "packet-out SWITCH PORT HEXBYTES")
        try:
            payload = bytes.fromhex("".join(words[2:]))
        except ValueError:
            raise ReplError("HEXBYTES: give the packet as hex digits, two per byte (spaces allowed)") from None
        sw = self._switch(words[0])
        port = whole(words[1], "PORT", 0, CONFIG.CPU_PORT - 1)
        self.fabric.packet_out(sw, payload, port)
        self.out(f"sent {len(payload)} bytes out of {words[0]} port {words[1]}")

    def do_packet_in(self, arg: str) -> None:
        """packet-in SWITCH [SECONDS]: wait for the next packet the switch sends to the controller."""
        words = self._args(arg, 1, "packet-in SWITCH [SECONDS]")
        sw = self._switch(words[0])
        seconds = number(words[1], "SECONDS", 0.0, 3600.0) if len(words) > 1 else 5.0
        pin = self.fabric.next_packet_in(sw, seconds)
        if pin is None:
            self.out("(no packet-in)")
            return
        reason = punt_reason(pin.metadata.get("reason", 0))
        self.out(f"from port {pin.metadata.get('ingress_port')} ({reason}), {len(pin.payload)} bytes: "
                 f"{pin.payload[:64].hex()}")

    def do_job(self, arg: str) -> None:
        """job create JOB HOST... [credits=N] [spine=SW] [k=K] [deadline_ms=MS] | job status JOB | job teardown JOB:
        NetReduce jobs (k, deadline_ms: a sum of k of the N, or of those in once the deadline passed)."""
        words = self._args(arg, 2, "job create|status|teardown JOB ...")
        verb, job = words[0], whole(words[1], "JOB", 1, CONFIG.AGG_MAX_JOBS - 1)
        if verb == "create":
            opts = dict(w.split("=", 1) for w in words[2:] if "=" in w)
            hosts = [w for w in words[2:] if "=" not in w]
            if len(hosts) < 2:
                raise ReplError("job create JOB HOST HOST... (at least two workers)")
            if set(opts) - {"credits", "spine", "k", "deadline_ms"}:
                raise ReplError("job create takes credits=, spine=, k= and deadline_ms= "
                                f"(got {', '.join(sorted(set(opts) - {'credits', 'spine', 'k', 'deadline_ms'}))})")
            credits = whole(opts.get("credits", str(DEFAULT_CREDITS)), "credits", 1, CONFIG.AGG_MAX_CREDITS)
            quorum = whole(opts["k"], "k", 1, len(hosts)) if "k" in opts else None
            deadline_ms = number(opts["deadline_ms"], "deadline_ms", 0.001, MAX_DEADLINE_US / 1000) \
                if "deadline_ms" in opts else 0.0
            info = self.control.netreduce.create(job, hosts, credits, opts.get("spine"), quorum=quorum,
                                                 deadline_us=round(deadline_ms * 1000))
            self.out(f"job {job}: workers {', '.join(info.workers)}, rkey {info.rkey:#x}, "
                     f"first PSN {info.initial_psn:#x}, aggregation at {info.aggregation_switch}")
            if quorum is not None or deadline_ms:
                rule = " or ".join(x for x in (f"{quorum or len(hosts)} of {len(hosts)}",
                                               f"those in after {deadline_ms:g} ms" if deadline_ms else "") if x)
                self.out(f"  partial sums: {rule} (the Last packet of each names who is in)")
            for sw, part in info.switches.items():
                cells = f"{part.cells[0]}..{part.cells[1]}"
                self.out(f"  {sw:<8} {part.role:<6} cells {cells}, {part.member_qps} member QPs")
        elif verb == "status":
            status = self.control.netreduce.status(job)
            for sw, act in status.switches.items():
                events = ", ".join(f"{k} {v}" for k, v in act.events.items() if v)
                self.out(f"{sw:<8} {act.part.role:<6} cells in use {act.cells_in_use}/{act.part.cell_count}"
                         f"  {events or 'no events'}")
        elif verb == "teardown":
            self.control.netreduce.teardown(job)
            self.out(f"job {job} torn down, its aggregator state reset")
        else:
            raise ReplError(f"unknown job command {verb!r}: create, status or teardown")

    def do_jobs(self, arg: str) -> None:
        """jobs: the NetReduce jobs of the network."""
        jobs = self.control.netreduce.list()
        for j in jobs:
            self.out(f"job {j.job}: {len(j.workers)} workers ({', '.join(j.workers)}), "
                     f"credits {j.credits}, aggregation at {j.aggregation_switch}")
        if not jobs:
            self.out("(no NetReduce jobs)")

    def do_dlcp(self, arg: str) -> None:
        """dlcp JOB [priority=on|off] [drop=on|off] [spray=on|off]: switch DLCP's features of a job.
        dlcp thresholds [default | BYTES | PRIORITY=BYTES ...]: show or set the queue depths above
        which droppable packets are dropped (every switch with shaped ports)."""
        words = self._args(arg, 1, "dlcp JOB [priority=on|off] [drop=on|off] [spray=on|off]")
        if words[0] == "thresholds":
            self._thresholds(words[1:])
            return
        opts = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        bad = set(opts) - {"priority", "drop", "spray"} or {v for v in opts.values() if v not in ("on", "off")}
        if bad:
            raise ReplError(f"dlcp takes priority=, drop=, spray= with on or off (got {sorted(bad)})")
        job = whole(words[0], "JOB", 1, CONFIG.DLCP_MAX_JOBS - 1)
        if not opts:
            self.out(f"job {job}: {self.control.dlcp.features(job).describe()}")
            return
        change = {k: v == "on" for k, v in opts.items()}  # what is not named stays as it is
        now = self.control.dlcp.set(job, change.get("priority"), change.get("drop"), change.get("spray"))
        self.out(f"job {words[0]}: {now.describe()}")

    def _thresholds(self, words: list[str]) -> None:
        usage = "dlcp thresholds [default | BYTES | PRIORITY=BYTES ...]"
        if not words:
            shown = False
            for name in self.fabric.switch_names():
                current = self.control.dlcp.thresholds(name)
                if current:
                    shown = True
                    self.out(f"{name}: " + " ".join(f"{p}={b}" for p, b in sorted(current.items())))
            if not shown:
                self.out("(no shaped ports: no thresholds)")
            return
        most = 2**32 - 1
        keep_others = False
        if words == ["default"]:
            wanted = None
        elif len(words) == 1 and "=" not in words[0]:
            wanted = {p: whole(words[0], "BYTES", 0, most) for p in range(CONFIG.PRIORITY_QUEUES)}
        else:
            if not all("=" in w for w in words):
                raise ReplError(f"usage: {usage}")
            wanted = {whole(p, "PRIORITY", 0, CONFIG.PRIORITY_QUEUES - 1): whole(b, "BYTES", 0, most)
                      for p, b in (w.split("=", 1) for w in words)}
            keep_others = True  # each switch keeps its own (per link rate) for the priorities not named
        for name, values in self.control.dlcp.set_thresholds(wanted, keep_others).items():
            self.out(f"{name}: " + " ".join(f"{p}={b}" for p, b in sorted(values.items())))

    def do_roce_class(self, arg: str) -> None:
        """roce-class [on|off]: show, or put every RoCE v2 packet (data and ACKs, every job) in one strict-priority
        class above bulk traffic on every switch, or take it out (a DLCP job with priority on keeps its own)."""
        words = shlex.split(arg)
        if words and (len(words) > 1 or words[0] not in ("on", "off")):
            raise ReplError(f"roce-class takes on or off (got {' '.join(words)})")
        on = self.control.dlcp.set_roce_class(words[0] == "on") if words else self.control.dlcp.roce_class()
        where = f"every RoCE v2 packet at priority {CONFIG.ROCE_CLASS_PRIORITY}, above bulk traffic (0)"
        self.out(f"RoCE class: {'on: ' + where if on else 'off: RoCE shares priority 0 with bulk traffic'}")

    def do_balance(self, arg: str) -> None:
        """balance [ecmp|flowlet] [gap=US] [seed=N]: show, or set how every switch's ECMP groups pick a packet's
        member: per flow by the 5-tuple's hash with seed N (ecmp; seed 0 is the plain hash), or per flowlet, a
        member at random after an idle gap of US microseconds (flowlet). DLCP spraying overrides both for a
        spraying job's packets."""
        mode: LoadBalance | None = None
        gap: int | None = None
        seed: int | None = None
        for word in shlex.split(arg):
            if word in LoadBalance.names():
                mode = LoadBalance(word)
            elif word.startswith("gap="):
                gap = whole(word[4:], "gap", 1, MAX_FLOWLET_GAP_US)
            elif word.startswith("seed="):
                seed = whole(word[5:], "seed", 0, MAX_ECMP_SEED)
            else:
                raise ReplError(f"balance: unknown word {word!r} (give {' or '.join(LoadBalance.names())}, "
                                "gap=MICROSECONDS, seed=N)")
        if mode is None and gap is None and seed is None:
            self.out(f"load balancing: {self.control.balancing.current().describe()}")
            return
        self.out(f"load balancing: {self.control.balancing.set(mode, gap, seed).describe()}")

    def do_fault(self, arg: str) -> None:
        """fault KIND:TARGET[@SECONDS][,restart=S][,release=S][,down=S][,up=S][,flaps=N]: a switch crashes
        (restarted after restart=S) or hangs (its process stopped; let go on after release=S), a link goes down
        (up again after down=S) or flaps, now or SECONDS from now.

        Kinds: switch-crash, switch-hang, link-down, link-flap (worker faults belong to a run: gradswitch
        experiment --fault).
        Fired by the process that holds the network (`gradswitch net`), from its REPL or an attached one."""
        words = self._args(arg, 1, "fault KIND:TARGET[@SECONDS][,opt=V ...], e.g. switch-crash:spine1@2,restart=5")
        if len(words) > 1:
            raise ReplError(f"fault: one fault per command, without spaces (got {len(words)} words: {arg.strip()})")
        if self.inject is None:
            raise ReplError("fault: this REPL has no network to fire faults on (`gradswitch repl --direct` talks to "
                            "the switches only); attach to a `gradswitch net` network, which fires them")
        self.out(self.inject(words[0]))

    def do_exit(self, arg: str) -> bool:
        """exit: leave the REPL (the network keeps running)."""
        return True

    do_quit = do_exit

    def do_EOF(self, arg: str) -> bool:
        """Ctrl-D: leave the REPL; the next prompt (the shell's, or `mininet>`) starts on its own line."""
        self.out("")
        return True

    # ---- completion ----

    def completenames(self, text: str, *ignored: Any) -> list[str]:
        names = [n.replace("_", "-") for n in super().completenames(text.replace("-", "_"), *ignored)]
        return [n for n in names if n != "EOF"]

    def _complete_entry(self, text: str, line: str, with_action: bool) -> list[str]:
        words = line.split()
        if not line.endswith(" "):
            words = words[:-1]
        position = len(words)  # index of the word being completed
        if position == 1:
            return [s for s in self._switches if s.startswith(text)]
        if position == 2:
            return [t for t in self._table_labels() if t.startswith(text)]
        try:
            table = self.p4info.table(words[2]).preamble.name
        except UnknownName:
            return []
        if "->" in words:
            after = words[words.index("->") + 1:]
            if not after:
                return [short(a) for a in self.p4info.table_actions(table) if short(a).startswith(text)]
            try:
                params = self.p4info.params(after[0])
            except UnknownName:
                return []
            return [f"{p.name}=" for p in params if p.name.startswith(text)]
        keys = [f"{short(f.name)}=" for f in self.p4info.match_fields(table)]
        if self.p4info.table_is_ternary(table):
            keys.append("priority=")
        options = keys + (["->"] if with_action else [])
        return [k for k in options if k.startswith(text)]

    def complete_insert(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return self._complete_entry(text, line, True)

    complete_modify = complete_insert

    def complete_delete(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return self._complete_entry(text, line, False)

    def _complete_switch_then(self, text: str, line: str, then: list[str]) -> list[str]:
        words = line.split()
        position = len(words) - (0 if line.endswith(" ") else 1)
        if position == 1:
            return [s for s in self._switches if s.startswith(text)]
        if position == 2:
            return [t for t in then if t.startswith(text)]
        return []

    def complete_entries(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return self._complete_switch_then(text, line, self._table_labels())

    def complete_counter(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return self._complete_switch_then(text, line, self.p4info.counter_labels())

    def complete_tables(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return [t for t in self._table_labels() if t.startswith(text)]

    def _table_labels(self) -> list[str]:
        return self.p4info.table_labels()

    def _complete_switch(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return self._complete_switch_then(text, line, [])

    @staticmethod
    def _complete_words(text: str, line: str, words: list[str]) -> list[str]:
        typed = line.split()[1:] if line.endswith(" ") else line.split()[1:-1]
        return [w for w in words if w.startswith(text) and w not in typed]

    def complete_roce_class(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return [] if len(line.split()) > (1 if line.endswith(" ") else 2) else self._complete_words(
            text, line, ["on", "off"])

    def complete_balance(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return self._complete_words(text, line, [*LoadBalance.names(), "gap=", "seed="])

    complete_ports = complete_drops = complete_mcast = complete_loss = _complete_switch
    complete_packet_out = complete_packet_in = _complete_switch


def run_repl(control: ControlPlane, commands: list[str] | None = None, inject: Callable[[str], str] | None = None
             ) -> None:
    """Interactive loop, or run the given commands (for scripts: `gradswitch repl -c ...`)."""
    repl = Repl(control, inject=inject)
    if commands:
        for line in commands:
            print(f"{repl.prompt}{line}")
            repl.onecmd(line)
        return
    try:
        import readline

        readline.set_completer_delims(" \t\n")
        readline.parse_and_bind("tab: complete")
    except ImportError:
        pass
    repl.cmdloop()
